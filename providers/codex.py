"""Codex through its official Python SDK, openai-codex (`codex app-server` on stdio).

`CodexProvider(cli_path=..., env=None, model=None)` opens one `CodexAdapter`
per provider session: one CLI process and one codex thread each. The adapter
reports the thread id when codex starts the thread (ProviderRefReported); the
host stores it with the chat and hands it back on resume.

What the SDK does that matters here:
- `CodexClient` is synchronous. `start()` spawns the CLI with `subprocess.Popen`
  (environment: `os.environ` plus `CodexConfig.env`) and starts a reader thread
  that routes responses to per-request queues and notifications to per-turn
  queues (buffered from the moment turn/start is written) or to one global queue.
  Every request blocks its caller until the answer comes, with no timeout.
- Server requests (approvals) are answered on that reader thread by the
  `approval_handler`, synchronously: while it waits, nothing else is read.
- When the CLI's stdout closes, the reader fails every waiter with
  `TransportClosedError`.

So an adapter runs the SDK's blocking calls on its own daemon threads, never on
the event loop: one `_Worker` spawns the CLI (through the CLI guard, whose
parent-death signal follows the spawning thread, which lives as long as the
adapter) and runs every request in order; a second reads each turn's
notifications in order and hands them to the loop, where `_map` turns them into
provider-protocol messages; a third watches the global queue, which fails when
the CLI dies. Each request has a timeout measured on the loop (suspended while an
approval waits on the host, since then the SDK's reader is ours to release), and
`max_timeouts` timeouts in a row fail the connection.

Codex returns early from turn/start and ends on turn/completed; steering is
turn/steer (an error "no active turn to steer" becomes a queued message);
cancel is turn/interrupt; nothing can be withdrawn.

`approval_policy` and `sandbox` go with thread/start and thread/resume, checked
first against what the app-server accepts there (codex 0.163: its config file
no longer takes "untrusted", and the CLI exits at initialize if it finds it).
A CLI that exits says why on its stderr, which the SDK drains on a thread of
its own: a failure waits for that drain, so the error carries the CLI's words.
"""

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import os
import queue
import re
import subprocess
import threading
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import attrs
import structlog
from openai_codex import CodexConfig, JsonRpcError, TransportClosedError
from openai_codex.client import CodexClient
from openai_codex.generated.v2_all import TurnSteerResponse
from openai_codex.models import JsonObject, Notification, UnknownNotification

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.provider import (
    CallSettled,
    Capabilities,
    ConnectionFailed,
    HostRequestKind,
    HostRequestOpened,
    Idle,
    ProviderAnswer,
    ProviderCancel,
    ProviderEvent,
    ProviderRefReported,
    ProviderResume,
    ProviderSend,
    ProviderSteer,
    ReplyDelta,
    ReplyMessage,
    Settlement,
    ToolCallCompleted,
    ToolCallStarted,
    UserMessageEcho,
)
from agenthost.providers.base import (
    Emit,
    Provider,
    ProviderAdapter,
    ProviderCallError,
    ProviderCrashed,
    ProviderResumeError,
)
from agenthost.providers.cli_guard import guard_env, launcher_path, resolve_cli
from agenthost.providers.manifest import CODEX_CHOICES

log = structlog.get_logger(__name__)
T = TypeVar("T")

CAPABILITIES = Capabilities(
    call_settles_with_turn=False,
    can_withdraw_steering=False,
    stateful_prompt=True,
    accepts_steering=True,
)
NO_HISTORY = "no rollout found for thread id"
NO_ACTIVE_TURN = "no active turn to steer"
APPROVALS = {
    "item/commandExecution/requestApproval": "shell",
    "item/fileChange/requestApproval": "apply_patch",
}
TOOL_ITEMS = {
    "commandExecution": "shell",
    "fileChange": "apply_patch",
    "mcpToolCall": "mcp",
    "dynamicToolCall": "tool",
    "webSearch": "web_search",
}
FINISH = {"completed": "stop", "interrupted": "interrupted"}
APPROVAL_POLICIES = CODEX_CHOICES["approval_policy"]
SANDBOXES = CODEX_CHOICES["sandbox"]
EXIT_WAIT_S = 2.0  # how long a failure waits for the exited CLI's last stderr lines
_NOISE = re.compile(r"^\s*(\d+: |Stack backtrace:|WARNING: proceeding, even though)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class CodexProvider(Provider):
    """Codex app-server sessions, one CLI process per provider session.

    Args:
        cli_path: the codex CLI to run (never downloaded or searched for).
        env: added to the CLI's environment (the SDK passes os.environ plus this).
        model: passed on as thread/start's `model`.
        cwd: the CLI's working directory.
        rpc_timeout: seconds each request may take before it counts as timed out.
        max_timeouts: timeouts in a row that fail the connection.
        approval_policy: when codex asks before it runs a command or applies a
            change: "untrusted", "on-request" or "never"; None: the CLI's default
            (its config.toml's, else on-request).
        sandbox: where commands run: "read-only", "workspace-write" or
            "danger-full-access"; None: the CLI's default.

    Raises:
        AgentHostError: PROVIDER_UNAVAILABLE when the CLI is missing (names
            `cli_path=`); INVALID_ARGUMENT for a value codex does not take.
    """

    capabilities = CAPABILITIES

    def __init__(
        self,
        cli_path: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        model: str | None = None,
        *,
        cwd: str | None = None,
        rpc_timeout: float = 30.0,
        max_timeouts: int = 2,
        approval_policy: str | None = None,
        sandbox: str | None = None,
    ) -> None:
        self.approval_policy = _one_of("approval_policy", approval_policy, APPROVAL_POLICIES)
        self.sandbox = _one_of("sandbox", sandbox, SANDBOXES)
        self.cli = resolve_cli(cli_path, provider="codex")
        self.env = dict(env or {})
        self.model = model
        self.cwd = cwd
        self.rpc_timeout = rpc_timeout
        self.max_timeouts = max_timeouts

    def open_session(self, session_id: str, chat_id: str, emit: Emit) -> "CodexAdapter":
        return CodexAdapter(self, session_id, chat_id, emit)


class _Worker:
    """One daemon thread running submitted calls in order (daemon: a call the
    CLI never answers must not hold up the interpreter's exit)."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()

    def submit(self, fn: Callable[[], T]) -> "concurrent.futures.Future[T]":
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def job() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the awaiting coroutine
                future.set_exception(exc)

        self._jobs.put(job)
        return future

    def stop(self) -> None:
        self._jobs.put(None)


@attrs.define
class _Run:
    """One codex turn, as the host's turn `key` knows it."""

    key: str
    started: asyncio.Event = attrs.field(factory=asyncio.Event)
    done: asyncio.Event = attrs.field(factory=asyncio.Event)
    turn_id: str | None = None
    held: str | None = None  # the last completed agent message, until we know it is final
    announced: set[str] = attrs.field(factory=set)  # tool items already reported

    def flush(self) -> list[ProviderEvent]:
        """A held agent message was not the last one: it is stable without a finish."""
        held, self.held = self.held, None
        return [] if held is None else [ReplyMessage(turn_id=self.key, text=held)]


class CodexAdapter(ProviderAdapter):
    """One codex thread over one CLI process. Runs on the codex provider loop."""

    capabilities = CAPABILITIES

    def __init__(self, provider: CodexProvider, session_id: str, chat_id: str, emit: Emit) -> None:
        self._provider = provider
        self._emit = emit
        self._log = log.bind(session_id=session_id, chat_id=chat_id)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: CodexClient | None = None
        self._calls: _Worker | None = None
        self._turns: _Worker | None = None
        self._thread_id: str | None = None
        self._run: _Run | None = None
        self._runs: dict[str, _Run] = {}  # codex turn id -> run
        self._approvals: dict[str, tuple[concurrent.futures.Future[str], str | None]] = {}
        self._timeouts = 0
        self._closing = False
        self._failed = False

    # -- opening ---------------------------------------------------------------------------
    async def start(self) -> None:
        await self._open()
        await self._ensure_thread()

    async def resume(self, message: ProviderResume) -> None:
        """Resume the codex thread the host stored for this chat. "no rollout found",
        or no thread stored at all, means no history: a new thread starts.

        Raises:
            ProviderResumeError: `no_history` as above (a new thread is open by
                then); any other error of codex's, as it is.
        """
        await self._open()
        thread_id = message.provider_ref
        if thread_id is None:
            await self._ensure_thread()
            raise ProviderResumeError(
                -32600, "codex: no codex thread is stored for this chat", no_history=True
            )
        client = self._require_client()
        params = self._thread_params()
        try:
            await self._call(
                "thread/resume", functools.partial(client.thread_resume, thread_id, params)
            )
        except JsonRpcError as exc:
            no_history = NO_HISTORY in exc.message.lower()
            if no_history:
                await self._ensure_thread()
            raise ProviderResumeError(exc.code, exc.message, no_history=no_history) from exc
        self._thread_id = thread_id
        self._emit(ProviderRefReported(provider_ref=thread_id))

    async def _open(self) -> None:
        """Spawn the CLI (through the guard) on the calls thread and initialize."""
        if self._client is not None:
            return
        self._loop = asyncio.get_running_loop()
        config = CodexConfig(
            codex_bin=launcher_path(),
            env={**self._provider.env, **guard_env(self._provider.cli)},
            cwd=self._provider.cwd,
        )
        client = CodexClient(config=config, approval_handler=self._on_server_request)
        self._client = client
        self._calls = _Worker("codex-calls")
        self._turns = _Worker("codex-turns")
        await self._call("start", client.start)
        await self._call("initialize", client.initialize)
        threading.Thread(
            target=self._watch, args=(client,), name="codex-watch", daemon=True
        ).start()
        self._log.info("codex_cli_started")

    async def _ensure_thread(self) -> str:
        if self._thread_id is None:
            client = self._require_client()
            params = self._thread_params()
            started = await self._call(
                "thread/start", functools.partial(client.thread_start, params)
            )
            self._thread_id = started.thread.id
            self._emit(ProviderRefReported(provider_ref=started.thread.id))
        return self._thread_id

    def _thread_params(self) -> JsonObject | None:
        """thread/start and thread/resume options: those that were set."""
        provider = self._provider
        params: JsonObject = {}
        if provider.model is not None:
            params["model"] = provider.model
        if provider.approval_policy is not None:
            params["approvalPolicy"] = provider.approval_policy
        if provider.sandbox is not None:
            params["sandbox"] = provider.sandbox
        return params or None

    # -- turns -----------------------------------------------------------------------------
    async def send(self, message: ProviderSend) -> str | None:
        """turn/start with this turn's text only (codex keeps the conversation);
        returns codex's turn id as soon as codex took the turn."""
        previous = self._run
        if previous is not None and not previous.done.is_set():
            # A turn/start while codex still runs a turn (one being interrupted)
            # would join that turn: wait for its end.
            await self._wait(previous.done, "the previous turn to end")
        thread_id = await self._ensure_thread()
        client = self._require_client()
        run = _Run(key=message.turn_id)
        self._run = run
        start = functools.partial(
            client.turn_start, thread_id, message.text, {"clientUserMessageId": message.turn_id}
        )
        try:
            started = await self._call("turn/start", start)
        except BaseException as exc:
            run.started.set()
            run.done.set()  # codex refused it, or nothing will ever end it
            if isinstance(exc, JsonRpcError):
                raise ProviderCallError(
                    AgentHostError(code=ErrorCode.PROVIDER_ERROR, message=f"codex: {exc.message}"),
                    taken=False,
                ) from exc
            raise
        run.turn_id = started.turn.id
        run.started.set()
        self._runs[run.turn_id] = run
        self._log.info("codex_turn_started", turn_id=run.key, codex_turn_id=run.turn_id)
        self._read_turn(run)
        return run.turn_id

    async def steer(self, message: ProviderSteer) -> str | None:
        """turn/steer into the running codex turn; returns the client message id
        codex echoes on the user message item (`clientId`)."""
        run = self._run
        if run is not None and not run.started.is_set():
            await self._wait(run.started, "the turn to start")
        if run is None or run.turn_id is None or run.done.is_set():
            raise _no_active_turn(NO_ACTIVE_TURN)
        client = self._require_client()
        client_id = uuid.uuid4().hex
        params: JsonObject = {
            "threadId": self._thread_id,
            "expectedTurnId": run.turn_id,
            "input": [{"type": "text", "text": message.text}],
            "clientUserMessageId": client_id,
        }
        steer = functools.partial(
            client.request, "turn/steer", params, response_model=TurnSteerResponse
        )
        try:
            await self._call("turn/steer", steer)
        except JsonRpcError as exc:
            if NO_ACTIVE_TURN in exc.message.lower():
                raise _no_active_turn(exc.message) from exc
            raise ProviderCallError(
                AgentHostError(code=ErrorCode.PROVIDER_ERROR, message=f"codex: {exc.message}"),
                taken=False,
            ) from exc
        return client_id

    async def cancel(self, message: ProviderCancel) -> None:
        """Cancel open approvals of the run (the SDK's reader waits on them), then
        turn/interrupt; codex ends the turn with status interrupted."""
        run = self._run
        if run is None or run.key != message.turn_id:
            return
        if not run.started.is_set():
            await self._wait(run.started, "the turn to start")  # then interrupt it
        if run.turn_id is None or run.done.is_set():
            return
        for request_id, (answer, turn_id) in list(self._approvals.items()):
            if turn_id == run.turn_id:
                del self._approvals[request_id]
                answer.set_result("cancel")
        client = self._require_client()
        interrupt = functools.partial(client.turn_interrupt, self._thread_id or "", run.turn_id)
        try:
            await self._call("turn/interrupt", interrupt)
        except JsonRpcError as exc:
            self._log.info("codex_interrupt_refused", turn_id=run.key, error=exc.message)

    async def answer(self, message: ProviderAnswer) -> None:
        entry = self._approvals.pop(message.request_id, None)
        if entry is None:
            return
        approved = bool(message.approved) and message.error is None
        entry[0].set_result("accept" if approved else "decline")

    async def dispose(self) -> None:
        """Release waiting approvals, close the CLI (not on the calls thread: it may be stuck)."""
        self._closing = True
        self._release_approvals()
        client, self._client = self._client, None
        if client is not None:
            await asyncio.get_running_loop().run_in_executor(None, client.close)
        for worker in (self._calls, self._turns):
            if worker is not None:
                worker.stop()

    def turn_diagnostic_snapshot(self, turn_id: str) -> dict[str, Any]:
        run = self._run
        return {
            "running": run is not None and run.key == turn_id and not run.done.is_set(),
            "codex_turn_id": None if run is None else run.turn_id,
            "waiting_on": sorted(self._approvals),
        }

    # -- from the SDK ----------------------------------------------------------------------
    def _read_turn(self, run: _Run) -> None:
        """Read the turn's notifications in order on the turns thread."""
        assert self._turns is not None and self._loop is not None and run.turn_id is not None
        client, loop, turn_id = self._require_client(), self._loop, run.turn_id

        def read() -> None:
            try:
                while True:
                    notification = client.next_turn_notification(turn_id)
                    loop.call_soon_threadsafe(self._on_notification, run, notification)
                    if notification.method == "turn/completed":
                        return
            except TransportClosedError as exc:  # on this thread, the CLI's last words can wait
                raise ProviderCrashed(_exit_reason(client, "mid-turn")) from exc
            finally:
                client.unregister_turn_notifications(turn_id)

        reading = asyncio.wrap_future(self._turns.submit(read), loop=loop)
        reading.add_done_callback(functools.partial(self._reading_ended, run))

    def _reading_ended(self, run: _Run, reading: "asyncio.Future[None]") -> None:
        if reading.cancelled() or reading.exception() is None:
            return
        run.done.set()
        self._connection_failed(str(reading.exception()))

    def _watch(self, client: CodexClient) -> None:
        """On its own thread: drain the global queue; it fails when the CLI dies."""
        try:
            while True:
                client.next_notification()
        except Exception:  # the transport closed: report it on the loop
            loop = self._loop
            if loop is not None and not self._closing:
                reason = _exit_reason(client, "while running")
                with contextlib.suppress(RuntimeError):  # the loop closed
                    loop.call_soon_threadsafe(self._connection_failed, reason)

    def _on_notification(self, run: _Run, notification: Notification) -> None:
        for event in self._map(run, notification.method, _params(notification)):
            self._emit(event)
        if notification.method == "turn/completed":
            run.done.set()
            self._runs.pop(run.turn_id or "", None)

    def _map(self, run: _Run, method: str, params: dict[str, Any]) -> list[ProviderEvent]:
        """One codex notification -> the provider-protocol messages it means."""
        key = run.key
        item = params.get("item") or {}
        kind = item.get("type")
        item_id = str(item.get("id", ""))
        if method == "item/started" and kind == "userMessage":
            client_id = item.get("clientId")
            return [
                UserMessageEcho(
                    turn_id=key,
                    text=_user_text(item),
                    provider_message_id=client_id if isinstance(client_id, str) else None,
                )
            ]
        if method == "item/started" and kind == "agentMessage":
            return run.flush()
        if method == "item/started" and kind in TOOL_ITEMS:
            events = run.flush()
            if item_id not in run.announced:
                run.announced.add(item_id)
                events.append(_tool_started(key, item))
            return events
        if method == "item/agentMessage/delta":
            return [*run.flush(), ReplyDelta(turn_id=key, text=str(params.get("delta", "")))]
        if method == "item/completed" and kind == "agentMessage":
            events = run.flush()
            run.held = str(item.get("text", ""))
            return events
        if method == "item/completed" and kind in TOOL_ITEMS:
            return [
                ToolCallCompleted(
                    turn_id=key,
                    tool_call_id=item_id,
                    result=str(item.get("aggregatedOutput") or ""),
                    success=item.get("status") == "completed",
                )
            ]
        if method == "turn/completed":
            turn = params.get("turn") or {}
            status = turn.get("status")
            final = ReplyMessage(
                turn_id=key, text=run.held or "", finish_reason=FINISH.get(str(status), "error")
            )
            run.held = None
            if status == "failed":
                reason = (turn.get("error") or {}).get("message") or "the codex turn failed"
                error = AgentHostError(code=ErrorCode.PROVIDER_ERROR, message=str(reason))
                settled = CallSettled(turn_id=key, settlement=Settlement.REJECTED, error=error)
                return [final, settled]
            return [final, Idle(turn_id=key)]
        return []

    def _on_server_request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """On the SDK's reader thread: an approval waits for the host's answer.

        No timeout: a person answers it; cancel, dispose and a failed connection
        release it. Requests other than approvals get the SDK's default, {}.
        """
        if method not in APPROVALS:
            return {}
        answer: concurrent.futures.Future[str] = concurrent.futures.Future()
        loop = self._loop
        try:
            if loop is None or self._closing:
                raise RuntimeError("closing")
            asyncio.run_coroutine_threadsafe(
                self._approval_requested(method, params or {}, answer), loop
            )
        except RuntimeError:
            return {"decision": "decline"}
        return {"decision": answer.result()}

    async def _approval_requested(
        self, method: str, params: dict[str, Any], answer: "concurrent.futures.Future[str]"
    ) -> None:
        turn_id = str(params.get("turnId"))
        current = self._run
        if turn_id not in self._runs and current is not None and not current.started.is_set():
            await current.started.wait()  # it came before turn/start's answer reached us
        if self._closing or self._failed:
            answer.set_result("cancel")
            return
        run = self._runs.get(turn_id)
        key = run.key if run is not None else str(turn_id)
        item_id = str(params.get("itemId", ""))
        request_id = uuid.uuid4().hex
        self._approvals[request_id] = (answer, run.turn_id if run is not None else None)
        arguments = json.dumps(
            {k: params[k] for k in ("command", "cwd", "reason", "grantRoot") if params.get(k)}
        )
        if run is not None and item_id not in run.announced:  # the item's start comes later
            run.announced.add(item_id)
            self._emit(
                ToolCallStarted(
                    turn_id=key,
                    tool_call_id=item_id,
                    name=APPROVALS[method],
                    arguments=arguments,
                    needs_permission=True,
                )
            )
        self._emit(
            HostRequestOpened(
                turn_id=key,
                request_id=request_id,
                kind=HostRequestKind.PERMISSION,
                tool_call_id=item_id,
                tool_name=APPROVALS[method],
                arguments=arguments,
            )
        )

    # -- plumbing --------------------------------------------------------------------------
    async def _call(self, what: str, fn: Callable[[], T]) -> T:
        """Run one blocking SDK call on the calls thread, bounded by rpc_timeout.

        Raises:
            ProviderCrashed: the CLI is gone, or `max_timeouts` calls in a row timed out.
            ProviderCallError: this call timed out (taken: codex may have acted on it).
            JsonRpcError: codex answered with an error.
        """
        if self._failed or self._calls is None:
            raise ProviderCrashed("the codex connection has failed")
        future = asyncio.wrap_future(self._calls.submit(fn))
        while True:
            done, _ = await asyncio.wait({future}, timeout=self._provider.rpc_timeout)
            if done:
                break
            if self._approvals:
                continue  # the SDK's reader waits on the host's answer, not on the CLI
            self._timeouts += 1
            self._log.warning("codex_call_timed_out", call=what, timeouts=self._timeouts)
            if self._timeouts >= self._provider.max_timeouts:
                self._failed = True
                self._release_approvals()
                raise ProviderCrashed(f"the codex CLI stopped answering ({what} timed out)")
            raise ProviderCallError(
                AgentHostError(
                    code=ErrorCode.PROVIDER_ERROR,
                    message=f"codex did not answer {what} within {self._provider.rpc_timeout} s",
                ),
                taken=True,
            )
        self._timeouts = 0
        try:
            return future.result()
        except TransportClosedError as exc:
            self._failed = True
            client = self._client
            reason = f"the codex CLI is gone ({what}): {exc}"
            if client is not None:
                loop = asyncio.get_running_loop()
                reason = await loop.run_in_executor(None, _exit_reason, client, what)
            self._log.warning("codex_cli_exited", call=what, reason=reason)
            raise ProviderCrashed(reason) from exc

    async def _wait(self, event: asyncio.Event, what: str) -> None:
        try:
            await asyncio.wait_for(event.wait(), self._provider.rpc_timeout)
        except TimeoutError:
            raise ProviderCrashed(f"the codex CLI stopped answering (waited for {what})") from None

    def _connection_failed(self, message: str) -> None:
        if self._closing or self._failed:
            return
        self._failed = True
        self._release_approvals()
        self._log.warning("codex_connection_failed", error=message)
        self._emit(
            ConnectionFailed(error=AgentHostError(code=ErrorCode.PROVIDER_CRASHED, message=message))
        )

    def _release_approvals(self) -> None:
        approvals, self._approvals = self._approvals, {}
        for answer, _ in approvals.values():
            answer.set_result("cancel")

    def _require_client(self) -> CodexClient:
        if self._client is None:
            raise ProviderCrashed("the codex connection is closed")
        return self._client


def _one_of(option: str, value: str | None, accepted: tuple[str, ...]) -> str | None:
    if value is not None and value not in accepted:
        raise AgentHostError(
            code=ErrorCode.INVALID_ARGUMENT,
            message=f"codex: {option} must be one of {', '.join(accepted)} (got {value!r})",
        )
    return value


def _exit_reason(client: CodexClient, what: str) -> str:
    """Why the CLI exited, in its own words: its status and the last lines of its
    stderr, once the SDK drained them (the SDK sees stdout close before it reads
    the CLI's last stderr lines). Blocks up to EXIT_WAIT_S: call it off the loop.

    The SDK keeps the process and the stderr it drains private (`_proc`,
    `_stderr_thread`, `_stderr_lines` in openai-codex 0.163); this is the one
    place that reads them, and tests/providers/codex fail if they move.
    """
    process: subprocess.Popen[str] | None = getattr(client, "_proc", None)
    status = None
    if process is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            status = process.wait(EXIT_WAIT_S)
    drain: threading.Thread | None = getattr(client, "_stderr_thread", None)
    if drain is not None:
        drain.join(EXIT_WAIT_S)
    lines = [_ANSI.sub("", line).strip() for line in getattr(client, "_stderr_lines", ())]
    said = [line for line in lines if line and not _NOISE.match(line)]
    errors = [line for line in said if "error" in line.lower()]
    words = "; ".join((errors or said)[-3:]) or "it said nothing on stderr"
    code = "" if status is None else f", status {status}"
    return f"the codex CLI exited ({what}{code}): {words}"


def _no_active_turn(message: str) -> ProviderCallError:
    return ProviderCallError(
        AgentHostError(code=ErrorCode.PROVIDER_ERROR, message=message),
        taken=False,
        no_active_turn=True,
    )


def _params(notification: Notification) -> dict[str, Any]:
    """A notification's params as on the wire (camelCase), typed by the SDK or not."""
    payload = notification.payload
    if isinstance(payload, UnknownNotification):
        return dict(payload.params)
    dumped = payload.model_dump(by_alias=True, mode="json", warnings=False)
    return dumped if isinstance(dumped, dict) else {}


def _user_text(item: dict[str, Any]) -> str:
    parts = item.get("content") or []
    return "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


def _tool_started(key: str, item: dict[str, Any]) -> ToolCallStarted:
    kind = str(item.get("type"))
    name = TOOL_ITEMS[kind]
    if kind == "mcpToolCall":
        name = f"{item.get('server', 'mcp')}.{item.get('tool', 'tool')}"
    fields = ("command", "cwd", "changes", "arguments", "query")
    arguments = json.dumps({k: item[k] for k in fields if item.get(k) is not None})
    return ToolCallStarted(
        turn_id=key, tool_call_id=str(item.get("id", "")), name=name, arguments=arguments
    )
