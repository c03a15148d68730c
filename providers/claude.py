"""Claude through claude-agent-sdk (`pip install agenthost[claude]`).

One `ClaudeAdapter` per provider session holds one `ClaudeSDKClient`, which
spawns the Claude Code CLI (through the CLI guard) and speaks newline-delimited
stream-json with it on stdio. What the SDK does that matters here:

- `query()` only writes a user message and returns; the CLI answers with
  frames (`system` init, `stream_event` partials, `assistant`, `user` tool
  results) and ends each turn with one `result`. A message written while a
  turn runs is taken in at the next tool boundary (steering, folded into the
  turn) or else runs as the next turn. Each message we write carries a
  `uuid`; frames list the uuids their turn took in (`user_message_uuids`),
  which is how steering is told apart from a turn of its own. (A CLI too old
  to report them gets its turns matched in write order only.)
- A new conversation's session id is ours, a uuid5 of (session id, chat id),
  passed as `--session-id`. The adapter reports the id the CLI says it runs
  under (ProviderRefReported: on start, and whenever a frame names another);
  the host stores it with the chat and hands it back, and `--resume` takes it,
  so a restarted connection or host continues the same conversation.
- `interrupt()` is a control request; the turn then ends with an error
  result (`error_during_execution`).
- `can_use_tool` is the SDK's callback for the CLI's permission requests, and
  for the questions its AskUserQuestion tool asks (providers/claude_requests.py:
  a permission with the CLI's suggestions as options and an editable input; the
  questions as the host's input request, answered in the CLI's own shape).
- The model's thinking streams as thinking deltas (else whole, as a message's
  thinking block): ReplyReasoning (providers/claude_turns.py).
- A resume of an unknown session makes the CLI print "No conversation found
  with session ID: <id>" and exit 1; `connect()` raises with that text.
- The SDK's own control-request timeout is 60 s or more, so every call that
  waits on the CLI runs under this adapter's `rpc_timeout`. A turn that goes
  silent for `probe_after` seconds is probed with a control request;
  `max_timeouts` timeouts in a row fail the connection (ConnectionFailed), as
  does a CLI that exits.

Capabilities: the send call settles with the turn (the adapter reads through
to the result), steering is accepted, nothing can be withdrawn, and the CLI
keeps the conversation (a send carries only its own text).
"""

import asyncio
import collections
import contextlib
import os
import signal
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import structlog

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.provider import (
    Capabilities,
    ConnectionFailed,
    ProviderAnswer,
    ProviderCancel,
    ProviderEvent,
    ProviderRefReported,
    ProviderResume,
    ProviderSend,
    ProviderSteer,
)
from agenthost.providers.base import (
    Emit,
    Provider,
    ProviderAdapter,
    ProviderCallError,
    ProviderCrashed,
    ProviderResumeError,
)
from agenthost.providers.claude_requests import ClaudeRequests
from agenthost.providers.claude_turns import ClaudeTurns, Written
from agenthost.providers.cli_guard import guard_env, launcher_path, resolve_cli

try:
    import claude_agent_sdk as sdk  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # the `claude` extra is not installed: ClaudeProvider() says so
    sdk = None  # type: ignore[assignment,unused-ignore]

log = structlog.get_logger(__name__)

CAPABILITIES = Capabilities(
    call_settles_with_turn=True,
    can_withdraw_steering=False,
    stateful_prompt=True,
    accepts_steering=True,
)
NO_HISTORY = "No conversation found with session ID"
_ADAPTER_OPTIONS = frozenset(
    {
        "cli_path",
        "env",
        "model",
        "cwd",
        "permission_mode",
        "include_partial_messages",
        "can_use_tool",
        "stderr",
        "session_id",
        "resume",
    }
)
_SESSION_NAMESPACE = uuid.UUID("5d3c0a52-61f4-4c55-9b36-1f0e0d7c8a11")


class ClaudeProvider(Provider):
    """Claude Code through claude-agent-sdk.

    Args:
        cli_path: the Claude Code CLI to run (required: nothing is searched
            for or downloaded, and the CLI bundled in the SDK's wheel is not used).
        env: extra environment for the CLI (the rest is inherited).
        model: passed on as the SDK's `model` option.
        cwd: the CLI's working directory.
        permission_mode: passed on as the SDK's `permission_mode` option.
        start_timeout: seconds the CLI may take to start and answer initialize.
        rpc_timeout: seconds any other call that waits on the CLI may take.
        probe_after: seconds of silence during a turn before the CLI is probed.
        max_timeouts: timeouts in a row that fail the connection.
        sdk_options: more `ClaudeAgentOptions` fields, passed on as they are
            (e.g. `system_prompt`, `allowed_tools`); not those the adapter sets.
    """

    capabilities = CAPABILITIES

    def __init__(
        self,
        cli_path: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        model: str | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        permission_mode: str | None = None,
        start_timeout: float = 60.0,
        rpc_timeout: float = 30.0,
        probe_after: float = 60.0,
        max_timeouts: int = 2,
        sdk_options: Mapping[str, Any] | None = None,
    ) -> None:
        if sdk is None:
            raise AgentHostError(
                code=ErrorCode.PROVIDER_UNAVAILABLE,
                message="claude: claude-agent-sdk is not installed; pip install agenthost[claude]",
            )
        self.cli = resolve_cli(cli_path, provider="claude")
        self.env = dict(env or {})
        self.model = model
        self.cwd = None if cwd is None else str(cwd)
        self.permission_mode = permission_mode
        self.start_timeout = start_timeout
        self.rpc_timeout = rpc_timeout
        self.probe_after = probe_after
        self.max_timeouts = max_timeouts
        self.sdk_options = dict(sdk_options or {})
        taken = sorted(self.sdk_options.keys() & _ADAPTER_OPTIONS)
        if taken:
            raise ValueError(f"claude: sdk_options may not set {', '.join(taken)}")

    def open_session(self, session_id: str, chat_id: str, emit: Emit) -> "ClaudeAdapter":
        return ClaudeAdapter(self, session_id, chat_id, emit)


class ClaudeAdapter(ProviderAdapter):
    """One Claude conversation; every method runs on the claude provider loop."""

    capabilities = CAPABILITIES

    def __init__(self, provider: ClaudeProvider, session_id: str, chat_id: str, emit: Emit) -> None:
        self._p = provider
        self.session_id = session_id
        self.chat_id = chat_id
        self._emit = emit
        # The CLI's session id: a uuid of ours, the same on every resume.
        self.claude_session_id = str(uuid.uuid5(_SESSION_NAMESPACE, f"{session_id}/{chat_id}"))
        self._client: Any = None
        self._tasks: list[asyncio.Future[Any]] = []
        self._log = log.bind(session_id=session_id, chat_id=chat_id)
        self._turns = ClaudeTurns(self._log, self._interrupt_run)
        self._asks = ClaudeRequests(self._turns, emit)
        self._stderr: collections.deque[str] = collections.deque(maxlen=5)
        self._timeouts = 0
        self._last_frame = 0.0
        self._open = False
        self._failed = False
        self._closing = False
        self._process: Any = None  # the CLI's process (the guard's launcher), once spawned

    # -- opening ---------------------------------------------------------------------------
    async def start(self) -> None:
        await self._connect(session_id=self.claude_session_id)
        self._emit(ProviderRefReported(provider_ref=self.claude_session_id))

    async def resume(self, message: ProviderResume) -> None:
        """Resume the conversation the host stored (the derived id when it stored
        none); "No conversation found" is the only no-history verdict, and then a
        fresh conversation is opened."""
        if message.provider_ref is not None:
            self.claude_session_id = message.provider_ref
        try:
            await self._connect(resume=self.claude_session_id)
        except Exception as exc:
            text = " ".join([str(exc), *self._stderr])
            code = getattr(exc.__cause__, "exit_code", None) or getattr(exc, "exit_code", None) or 1
            if NO_HISTORY.lower() not in text.lower():
                raise ProviderResumeError(code, str(exc)) from exc
            self._log.info("claude_resume_found_no_history")
            await self._connect(session_id=self.claude_session_id)
            self._emit(ProviderRefReported(provider_ref=self.claude_session_id))
            raise ProviderResumeError(code, str(exc), no_history=True) from exc
        self._emit(ProviderRefReported(provider_ref=self.claude_session_id))

    async def _connect(self, **session: str) -> None:
        """Spawn the CLI through the guard and run the SDK's initialize handshake."""
        self._failed = False
        self._stderr.clear()
        options = sdk.ClaudeAgentOptions(
            **self._p.sdk_options,
            cli_path=launcher_path(),
            env={**self._p.env, **guard_env(self._p.cli)},
            model=self._p.model,
            cwd=self._p.cwd,
            permission_mode=self._p.permission_mode,  # type: ignore[arg-type]
            include_partial_messages=True,
            can_use_tool=self._asks.can_use_tool,
            stderr=self._stderr.append,
            **session,  # type: ignore[arg-type]
        )
        self._client = sdk.ClaudeSDKClient(options)
        connecting = self._client.connect()
        try:
            await self._rpc("initialize", connecting, fatal=True, timeout=self._p.start_timeout)
        except ProviderCrashed:
            raise
        except Exception as exc:
            raise self._start_failed(exc) from exc
        finally:
            self._process = _process_of(self._client)  # what a kill aims at, from now on
        self._open = True
        self._last_frame = asyncio.get_running_loop().time()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._read(self._client)), loop.create_task(self._watch())]
        self._log.info("claude_cli_started", resumed="resume" in session)

    def _start_failed(self, exc: Exception) -> ProviderCrashed:
        """The CLI exited before it answered initialize: why, in its own words (its
        stderr), not the SDK's "Check stderr output for details"."""
        code = getattr(exc, "exit_code", None)
        said = "; ".join(line.strip() for line in self._stderr if line.strip()) or str(exc)
        status = "" if code is None else f" (exit code {code})"
        reason = f"the claude CLI could not start{status}: {said}"
        self._log.warning("claude_cli_start_failed", error=reason, exit_code=code)
        return ProviderCrashed(reason)

    # -- host -> CLI -------------------------------------------------------------------------
    async def send(self, message: ProviderSend) -> str | None:
        """Write the turn's text (only it: the CLI keeps the conversation) and
        read through to its result. Returns the message's uuid.

        Raises:
            ProviderCallError: the CLI refused the message (not taken) or the
                turn ended in an error result (taken; the CLI's own text).
            ProviderCrashed: the CLI died or hung.
        """
        written = Written(
            uuid=str(uuid.uuid4()), key=message.turn_id, text=message.text, steering=False
        )
        done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._turns.sends[written.uuid] = done
        try:
            await self._write(written)
            return await done
        finally:
            self._turns.sends.pop(written.uuid, None)

    async def steer(self, message: ProviderSteer) -> str | None:
        """Write the steering message now; the CLI takes it in at the next tool
        boundary, or runs it as the next turn."""
        written = Written(
            uuid=str(uuid.uuid4()), key=message.pending_id, text=message.text, steering=True
        )
        await self._write(written)
        return written.uuid

    async def cancel(self, message: ProviderCancel) -> None:
        """Interrupt the turn; one the CLI has not started yet is interrupted when it starts."""
        run = self._turns.run
        if run is not None and run.key == message.turn_id:
            run.cancelled = True
            await self._rpc("interrupt", self._live().interrupt())
        elif any(m.key == message.turn_id for m in self._turns.queued):
            self._turns.cancelled.add(message.turn_id)

    async def answer(self, message: ProviderAnswer) -> None:
        self._asks.waiting.answer(message)

    async def dispose(self) -> None:
        """Close stdin and let the CLI exit (the SDK waits for it, then
        terminates it); kill it if that takes too long or the loop is stopping."""
        self._closing = True
        for task in self._tasks:
            task.cancel()
        for future in self._turns.sends.values():
            future.cancel()
        client, self._client = self._client, None
        if client is None:
            return
        if self._process is None:  # still starting
            self._process = _process_of(client)
        try:
            await self._disconnect(client)
        except asyncio.CancelledError:  # the provider loop is stopping: no time to be graceful
            self._kill_cli()
            await self._reaped()
            await self._disconnect(client)
            raise

    async def _disconnect(self, client: Any) -> None:
        try:
            async with asyncio.timeout(self._p.rpc_timeout):
                await client.disconnect()
        except TimeoutError:
            self._log.warning("claude_cli_kept_running")
            self._kill_cli()
            async with asyncio.timeout(self._p.rpc_timeout):
                await client.disconnect()  # reaps the killed CLI
        await self._reaped()

    async def _reaped(self) -> None:
        """Wait (bounded) until the CLI's process is reaped, so its transport is
        closed while its loop still runs (left to the garbage collector, it
        complains of a closed loop from inside whatever code runs then)."""
        process = self._process
        if process is None:
            return
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self._p.rpc_timeout):
                await process.aclose()  # its pipes too: wait() is for the exit alone
        for _ in range(3):  # the transport closes in callbacks the pipes' close scheduled
            await asyncio.sleep(0)

    def turn_diagnostic_snapshot(self, turn_id: str) -> dict[str, Any]:
        run = self._turns.run
        return {
            "running": run is not None and run.key == turn_id,
            "queued_messages": len(self._turns.queued),
            "waiting_on": self._asks.waiting.waiting_on(),
            "rpc_timeouts": self._timeouts,
        }

    async def _write(self, written: Written) -> None:
        client = self._live()
        frame = {
            "type": "user",
            "message": {"role": "user", "content": written.text},
            "parent_tool_use_id": None,
            "uuid": written.uuid,
        }
        self._turns.queued.append(written)
        try:
            writing = client.query(_one(frame), session_id=self.claude_session_id)
            await self._rpc("query", writing, fatal=True)
        except ProviderCrashed:
            raise
        except Exception as exc:
            self._turns.queued.remove(written)
            raise ProviderCallError(
                AgentHostError(code=ErrorCode.PROVIDER_ERROR, message=f"claude: {exc}"), taken=False
            ) from exc

    def _live(self) -> Any:
        if self._client is None or self._failed:
            raise ProviderCrashed("the claude CLI is not running")
        return self._client

    async def _rpc(
        self, name: str, call: Any, *, fatal: bool = False, timeout: float | None = None
    ) -> Any:
        """Await an SDK call under `rpc_timeout` (or its own `timeout`). A timeout
        counts; `max_timeouts` in a row fail the connection (the CLI is killed).
        A `fatal` call's first timeout does: starting the CLI, and writing to it
        (a write cut off halfway would leave half a line on its stdin)."""
        timeout = self._p.rpc_timeout if timeout is None else timeout
        task = asyncio.ensure_future(call)
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if done:
            self._timeouts = 0
            return task.result()
        self._timeouts += 1
        self._log.warning("claude_rpc_timed_out", rpc=name, timeouts=self._timeouts)
        reason = f"the claude CLI timed out: no answer to {name} within {timeout} s"
        if fatal or self._timeouts >= self._p.max_timeouts:
            self._fail(reason)
            task.cancel()
            task.add_done_callback(_swallow)
            raise ProviderCrashed(reason)
        task.cancel()
        task.add_done_callback(_swallow)
        raise TimeoutError(reason)

    # -- CLI -> host -------------------------------------------------------------------------
    async def _read(self, client: Any) -> None:
        """Map every frame the CLI writes, for the life of the connection."""
        loop = asyncio.get_running_loop()
        try:
            async for frame in client.receive_messages():
                self._last_frame = loop.time()
                for event in self._map(frame):
                    self._emit(event)
        except Exception as exc:
            reason = f"the claude CLI failed: {exc}"
        else:
            reason = "the claude CLI exited"
        if not self._closing:
            self._fail(reason)

    def _map(self, frame: Any) -> list[ProviderEvent]:
        """An SDK message as provider-protocol events (claude_turns.py), after the
        session it names, if that moved."""
        events: list[ProviderEvent] = []
        match frame:
            case sdk.SystemMessage(subtype="init"):
                events = self._session_named(frame.data.get("session_id"))
            case sdk.ResultMessage():
                events = self._session_named(frame.session_id)
        return events + self._turns.map(frame)

    def _session_named(self, session_id: Any) -> list[ProviderEvent]:
        """A frame names the session the CLI runs under: report it if it moved."""
        if not isinstance(session_id, str) or session_id in ("", self.claude_session_id):
            return []
        self._log.info("claude_session_moved", previous=self.claude_session_id)
        self.claude_session_id = session_id
        return [ProviderRefReported(provider_ref=session_id)]

    def _interrupt_run(self) -> None:
        """Interrupt the CLI's running turn (a run whose key was cancelled before it started)."""
        self._spawn(self._rpc("interrupt", self._live().interrupt()))

    def _spawn(self, call: Any) -> None:
        task = asyncio.ensure_future(call)
        task.add_done_callback(_swallow)
        self._tasks.append(task)

    # -- failure -----------------------------------------------------------------------------
    async def _watch(self) -> None:
        """Probe a CLI that went silent during a turn; its timeouts count."""
        loop = asyncio.get_running_loop()
        while not self._failed:
            await asyncio.sleep(self._p.probe_after)
            busy = self._turns.run is not None or self._turns.queued
            if not busy or loop.time() - self._last_frame < self._p.probe_after:
                continue
            try:
                await self._rpc("mcp_status", self._live().get_mcp_status())
            except ProviderCrashed:
                return
            except TimeoutError:
                continue
            except Exception:  # an error answer still shows the CLI is alive
                self._timeouts = 0

    def _fail(self, reason: str) -> None:
        """The connection is dead: kill the CLI, fail what waits on it, tell the host."""
        if self._failed:
            return
        self._failed = True
        self._log.warning("claude_cli_failed", reason=reason)
        self._kill_cli()
        for future in self._turns.sends.values():
            if not future.done():
                future.set_exception(ProviderCrashed(reason))
        self._asks.waiting.cancel_all()
        if self._open:
            self._open = False
            self._emit(
                ConnectionFailed(
                    error=AgentHostError(code=ErrorCode.PROVIDER_CRASHED, message=reason)
                )
            )

    def _kill_cli(self) -> None:
        """SIGKILL the CLI's process group (the guard's launcher leads it), unless
        the process is reaped already (its pid may be another's by now)."""
        process = self._process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(process.pid) == process.pid:
                os.killpg(process.pid, signal.SIGKILL)
            else:
                os.kill(process.pid, signal.SIGKILL)


def _process_of(client: Any) -> Any:
    """The SDK's handle of the CLI process (an anyio Process with pid, returncode
    and wait()). The SDK keeps it on its transport, privately in 0.2.x: this is
    the one place that reads it; the kill tests in tests/providers/claude fail if
    it moves."""
    return getattr(getattr(client, "_transport", None), "_process", None)


async def _one(frame: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """`query()` takes dicts only as an async iterable; a dict carries our uuid."""
    yield frame


def _swallow(task: "asyncio.Future[Any]") -> None:
    if not task.cancelled():
        task.exception()
