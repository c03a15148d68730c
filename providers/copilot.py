"""GitHub Copilot through its official SDK (github-copilot-sdk, `pip install agenthost[copilot]`).

One adapter is one chat's provider session: its own `CopilotClient`, hence
its own CLI process, and one Copilot session. A new session's id is derived
from the host's session and chat ids; the adapter reports the id it opened
(ProviderRefReported), the host stores it with the chat and hands it back on
resume, so a restarted connection or host resumes the same conversation.
What the SDK does that matters here:

- The client spawns the CLI itself (`subprocess.Popen`, on this loop's
  thread) from the path it is given; with no path it would download one. We
  hand it the `agenthost-cli-guard` launcher and the real CLI in the
  launcher's environment (providers/cli_guard.py), so the CLI runs in its own
  session with a parent-death signal and never outlives the host.
- `session.send` returns at once with a message id; the turn's work comes as
  `session.event` notifications, delivered on this loop: `user.message` (the
  echo, with the message id), `assistant.message_delta`, `assistant.message`,
  tool events, and `session.idle` when the run is over. Steering is a send in
  `immediate` mode; it is echoed as its own `user.message` and, for the host,
  starts a new turn (design rule 1, docs/design-rules.md).
- The SDK's own RPCs wait forever. Every call here has a timeout; consecutive
  timeouts, or a dead CLI, fail the connection (`ProviderCrashed` /
  `ConnectionFailed`) and the supervisor restarts it. While a run is in
  flight a heartbeat pings the CLI, so a CLI that dies or hangs mid-turn is
  noticed although no call of ours is waiting on it.
- Permission requests, the model's questions to the user and calls to client
  tools reach us as SDK callbacks; each becomes a `HostRequestOpened` and
  waits for the host's `ProviderAnswer` (providers/copilot_requests.py): a
  permission offers the decisions the CLI takes (approve once, for this
  session where it can remember one, reject), a question its choices.
- The model's thinking streams as `assistant.reasoning_delta` (then the whole
  of it in `assistant.reasoning`, which counts only where nothing streamed):
  `ReplyReasoning`.
- A CLI that cannot run a message says so with `session.error` and goes idle,
  without echoing it (without a GitHub login: "No GitHub OAuth token or
  Copilot HMAC key provided"). The error ends the turn of every message it
  had not echoed yet; a CLI that goes idle without echoing a message it
  acknowledged ends that turn too. The missing login has its own code,
  PROVIDER_LOGIN_REQUIRED.
- `byok` is the SDK's own-endpoint option (`provider`, "bring your own key"),
  passed on session create and resume: the CLI then runs against that model
  endpoint and needs no GitHub login. (Its COPILOT_PROVIDER_* variables are
  ignored when the SDK runs it on stdio.) It is checked, and a missing login
  worded, in providers/copilot_config.py.
"""

import asyncio
import os
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

import attrs
import structlog

try:
    from copilot import CopilotClient, RuntimeConnection
    from copilot._jsonrpc import JsonRpcError, ProcessExitedError
    from copilot.rpc import QueueWithdrawMessageRequest
    from copilot.session import CopilotSession
    from copilot.session_events import (
        AssistantMessageData,
        AssistantMessageDeltaData,
        AssistantReasoningData,
        AssistantReasoningDeltaData,
        SessionErrorData,
        SessionEvent,
        SessionIdleData,
        ToolExecutionCompleteData,
        ToolExecutionStartData,
        UserMessageData,
    )
except ImportError as missing:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "CopilotProvider needs github-copilot-sdk: pip install 'agenthost[copilot]'"
    ) from missing

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.provider import (
    CallSettled,
    Capabilities,
    ConnectionFailed,
    Idle,
    ProviderAnswer,
    ProviderCancel,
    ProviderEvent,
    ProviderRefReported,
    ProviderResume,
    ProviderSend,
    ProviderSteer,
    ProviderWithdraw,
    ReplyDelta,
    ReplyMessage,
    ReplyReasoning,
    Settlement,
    ToolCallCompleted,
    ToolCallStarted,
    UserMessageEcho,
)
from agenthost.messages.state import ClientTool
from agenthost.providers.base import (
    Emit,
    Provider,
    ProviderAdapter,
    ProviderCallError,
    ProviderCrashed,
    ProviderResumeError,
)
from agenthost.providers.cli_guard import guard_env, launcher_path, resolve_cli
from agenthost.providers.copilot_config import byok as check_byok
from agenthost.providers.copilot_config import login_or_provider_error
from agenthost.providers.copilot_requests import CopilotRequests, json_text

log = structlog.get_logger(__name__)
T = TypeVar("T")

CAPABILITIES = Capabilities(
    call_settles_with_turn=False,
    can_withdraw_steering=True,
    stateful_prompt=True,
    accepts_steering=True,
)
NO_HISTORY = "session not found"
_SESSION_NAMESPACE = uuid.UUID("6f1c7c1e-2b0a-4f57-9a53-0c9e4d3b8a21")


class CopilotProvider(Provider):
    """GitHub Copilot through github-copilot-sdk.

    Args:
        cli_path: the Copilot CLI to run (required: nothing is downloaded).
        env: extra environment for the CLI, over the host's own.
        model: the model every session uses (the SDK's `model`); None: the CLI's default.
        client_tools: tools a client of the host executes; calls to them become
            HostRequestOpened(client_tool) and wait for the client's result.
        working_directory: the CLI's working directory; None: the host's.
        rpc_timeout: seconds any call to the CLI may take.
        start_timeout: seconds spawning the CLI and opening the session may take.
        max_timeouts: consecutive timeouts after which the connection is failed.
        heartbeat_s: how often a CLI with a run in flight is pinged.
        byok: your own model endpoint instead of a GitHub login (the SDK's
            `provider` option): `type` ("openai", "azure" or "anthropic"),
            `base_url`, and `api_key` or `api_key_env` (the name of the variable
            holding the key, read now); other keys of the SDK's ProviderConfig
            (`wire_api`, `model_id`, `wire_model`, `headers`, ...) pass as they are.

    Raises:
        AgentHostError: PROVIDER_UNAVAILABLE naming `cli_path=` when the CLI is
            missing; INVALID_ARGUMENT naming the `byok` key at fault.
    """

    capabilities = CAPABILITIES

    def __init__(
        self,
        cli_path: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        model: str | None = None,
        *,
        client_tools: Sequence[ClientTool] = (),
        working_directory: str | None = None,
        rpc_timeout: float = 30.0,
        start_timeout: float = 60.0,
        max_timeouts: int = 2,
        heartbeat_s: float = 5.0,
        byok: Mapping[str, Any] | None = None,
    ) -> None:
        self.cli = resolve_cli(cli_path, provider="copilot")
        self.byok = None if byok is None else check_byok(byok)
        self.env = dict(env or {})
        self.model = model
        self.client_tools = tuple(client_tools)
        self.working_directory = working_directory
        self.rpc_timeout = rpc_timeout
        self.start_timeout = start_timeout
        self.max_timeouts = max_timeouts
        self.heartbeat_s = heartbeat_s

    def open_session(self, session_id: str, chat_id: str, emit: Emit) -> "CopilotAdapter":
        return CopilotAdapter(self, session_id, chat_id, emit)

    def __repr__(self) -> str:  # never the byok key
        endpoint = None if self.byok is None else self.byok.get("base_url")
        return f"CopilotProvider(cli={self.cli!r}, model={self.model!r}, byok={endpoint!r})"

    def child_env(self) -> dict[str, str]:
        """The CLI's environment: the host's, the user's `env`, the launcher's."""
        return {
            **os.environ,
            **self.env,
            "COPILOT_SKIP_CLI_DOWNLOAD": "1",
            **guard_env(self.cli),
        }


@attrs.frozen
class _Origin:
    """A user message we handed the CLI: which host run its echo belongs to."""

    key: str  # the run it opens: a send's turn id, or a steering message's pending id
    text: str
    starts_turn: bool


class CopilotAdapter(ProviderAdapter):
    """One chat's Copilot session. Every method runs on the provider loop's thread."""

    capabilities = CAPABILITIES

    def __init__(self, provider: CopilotProvider, session_id: str, chat_id: str, emit: Emit):
        self.provider = provider
        self.session_id = session_id
        self.chat_id = chat_id
        self.copilot_session_id = str(uuid.uuid5(_SESSION_NAMESPACE, f"{session_id}/{chat_id}"))
        self._emit = emit
        self._log = log.bind(session_id=session_id, chat_id=chat_id)
        self._client: CopilotClient | None = None
        self._session: CopilotSession | None = None
        self._origins: dict[str, _Origin] = {}  # provider message id -> origin
        self._unsent: dict[str, _Origin] = {}  # sends whose message id is not back yet
        self._key: str | None = None  # the host run the CLI works on now
        self._busy = False
        self._announced: set[str] = set()  # tool call ids the host has heard of
        self._asks = CopilotRequests(emit, lambda: self._key, self._announced)
        self._reasoned: set[str] = set()  # reasoning ids whose text streamed
        self._timeouts = 0
        self._failed: ProviderCrashed | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self._refused = False  # an error came before any echo; its idle is still to come
        self._aborting: asyncio.Future[None] | None = None  # an abort's idle still to come

    # -- opening -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Spawn the CLI and create this chat's Copilot session."""
        await self._connect()
        self._session = await self._call("session.create", self._create(), opening=True)
        self._emit(ProviderRefReported(provider_ref=self.copilot_session_id))

    async def resume(self, message: ProviderResume) -> None:
        """Resume this chat's Copilot session: the one the host stored (the derived
        id when it stored none).

        Raises:
            ProviderResumeError: `no_history` when the CLI positively reports the
                session unknown ("Session not found", -32603); a fresh session under
                the same id is open by then. Every other error propagates as is.
        """
        if message.provider_ref is not None:
            self.copilot_session_id = message.provider_ref
        await self._connect()
        try:
            self._session = await self._call("session.resume", self._resume(), opening=True)
        except JsonRpcError as exc:
            no_history = exc.code == -32603 and NO_HISTORY in exc.message.lower()
            if no_history:
                self._session = await self._call("session.create", self._create(), opening=True)
                self._emit(ProviderRefReported(provider_ref=self.copilot_session_id))
            raise ProviderResumeError(exc.code, exc.message, no_history=no_history) from exc
        self._emit(ProviderRefReported(provider_ref=self.copilot_session_id))

    async def _connect(self) -> None:
        if self._client is not None:
            return
        client = CopilotClient(
            connection=RuntimeConnection.for_stdio(path=launcher_path()),
            env=self.provider.child_env(),
            working_directory=self.provider.working_directory,
        )
        try:
            await self._call("start", client.start(), opening=True)
        except BaseException:
            await client.force_stop()  # a CLI that never came up is not kept
            raise
        self._client = client
        self._heartbeat = asyncio.get_running_loop().create_task(self._beat())

    def _session_options(self) -> dict[str, Any]:
        """What create and resume both pass (the SDK wants `provider` on each)."""
        return {
            "on_permission_request": self._asks.on_permission,
            "on_user_input_request": self._asks.on_user_input,
            "model": self.provider.model,
            "tools": [self._asks.client_tool(t) for t in self.provider.client_tools] or None,
            "streaming": True,
            "on_event": self._on_event,
            "provider": self.provider.byok,
        }

    def _create(self) -> Awaitable[CopilotSession]:
        assert self._client is not None
        return self._client.create_session(
            session_id=self.copilot_session_id, **self._session_options()
        )

    def _resume(self) -> Awaitable[CopilotSession]:
        assert self._client is not None
        return self._client.resume_session(self.copilot_session_id, **self._session_options())

    # -- host -> provider ----------------------------------------------------------------------
    async def send(self, message: ProviderSend) -> str | None:
        """Hand the CLI the turn's own text (never earlier history: the CLI keeps it)."""
        origin = _Origin(message.turn_id, message.text, starts_turn=False)
        message_id = await self._deliver(origin, immediate=False)
        self._log.info("copilot_sent", turn_id=message.turn_id, size=len(message.text))
        return message_id

    async def steer(self, message: ProviderSteer) -> str | None:
        """Steering is sent in immediate mode: the CLI injects it at its next model call,
        or runs it next when the run is over; either way it is echoed as its own message."""
        origin = _Origin(message.pending_id, message.text, starts_turn=True)
        message_id = await self._deliver(origin, immediate=True)
        self._log.info("copilot_steered", pending_id=message.pending_id, size=len(message.text))
        return message_id

    async def _deliver(self, origin: _Origin, *, immediate: bool) -> str:
        """Send one user message. Its echo may be dispatched before `session.send`'s
        answer reaches us, so until then the origin waits in `_unsent`, matched by text."""
        await self._abort_over()
        session = self._live_session()
        token = uuid.uuid4().hex
        self._unsent[token] = origin
        self._busy = True
        try:
            if immediate:
                sending = session.send(origin.text, mode="immediate")
            else:
                sending = session.send(origin.text)
            message_id = await self._call("session.send", sending)
        except (JsonRpcError, TimeoutError) as exc:
            raise ProviderCallError(
                AgentHostError(code=ErrorCode.PROVIDER_ERROR, message=f"copilot: {exc}"),
                taken=False,
            ) from exc
        finally:
            unsent = self._unsent.pop(token, None)
        if unsent is not None:  # not echoed yet
            self._origins[message_id] = unsent
        return message_id

    async def withdraw(self, message: ProviderWithdraw) -> bool:
        """The queue's withdraw call, with the message id and the exact prompt:
        `removed` False means the CLI had already given it to the model."""
        session = self._live_session()
        request = QueueWithdrawMessageRequest(
            expected_prompt=message.text, message_id=message.provider_message_id
        )
        result = await self._call(
            "session.queue.withdrawMessage", session.rpc.queue.withdraw_message(request)
        )
        if result.removed:
            self._origins.pop(message.provider_message_id, None)
        self._log.info(
            "copilot_withdraw_answered", pending_id=message.pending_id, removed=result.removed
        )
        return result.removed

    async def cancel(self, message: ProviderCancel) -> None:
        """Abort the run, unless the CLI has already moved on to another host run."""
        if self._session is None or self._key not in (None, message.turn_id):
            return
        if self._busy and self._aborting is None:
            self._aborting = asyncio.get_running_loop().create_future()
        await self._call("session.abort", self._session.abort())

    async def _abort_over(self) -> None:
        """The CLI answers `session.abort` at once and unwinds the run after; what it
        is sent meanwhile is queued behind the aborted run and dropped with it, never
        echoed. So a message waits for the abort's idle (within `rpc_timeout`)."""
        aborting = self._aborting
        if aborting is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(aborting), self.provider.rpc_timeout)
        except TimeoutError:
            self._log.warning("copilot_abort_never_idle", timeout=self.provider.rpc_timeout)
            self._aborted()

    def _aborted(self) -> None:
        aborting, self._aborting = self._aborting, None
        if aborting is not None and not aborting.done():
            aborting.set_result(None)

    async def answer(self, message: ProviderAnswer) -> None:
        self._asks.waiting.answer(message)

    async def dispose(self) -> None:
        """Stop the CLI: gracefully within the timeout, else kill it."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        self._asks.waiting.cancel_all()
        self._aborted()
        client, self._client, self._session = self._client, None, None
        if client is None:
            return
        try:
            await asyncio.wait_for(client.stop(), self.provider.rpc_timeout)
        except Exception as exc:  # a hung or dead CLI: nothing graceful is left to do
            self._log.warning("copilot_stop_forced", error=repr(exc))
            await client.force_stop()

    def turn_diagnostic_snapshot(self, turn_id: str) -> dict[str, Any]:
        return {
            "running": self._busy and self._key == turn_id,
            "waiting_on": self._asks.waiting.waiting_on(),
            "timeouts": self._timeouts,
        }

    # -- provider -> host ----------------------------------------------------------------------
    def _on_event(self, event: SessionEvent) -> None:
        """The SDK calls this on this loop for every session event."""
        for translated in self._translate(event):
            self._emit(translated)

    def _translate(self, event: SessionEvent) -> list[ProviderEvent]:
        """Map one SDK event onto provider-protocol messages (the one mapping function)."""
        data = event.data
        match data:
            case SessionErrorData():
                return self._session_error(data)
            case SessionIdleData():
                return self._session_idle(data)
            case UserMessageData():
                origin = self._origin(data.message_id, data.content)
                if origin is None:
                    return []  # not ours (another client's, or replayed on resume)
                if not (origin.starts_turn and self._key is not None):
                    self._key = origin.key  # a send, or steering that opens a new run
                return [
                    UserMessageEcho(
                        turn_id=self._key,
                        text=data.content,
                        provider_message_id=data.message_id,
                        starts_turn=origin.starts_turn,
                    )
                ]
            case _ if self._key is None:
                return []  # nothing of the host's is running
            case AssistantMessageDeltaData() if data.parent_tool_call_id is None:
                return [ReplyDelta(turn_id=self._key, text=data.delta_content)]
            case AssistantReasoningDeltaData():
                self._reasoned.add(data.reasoning_id)
                return [ReplyReasoning(turn_id=self._key, text=data.delta_content)]
            case AssistantReasoningData() if data.reasoning_id not in self._reasoned:
                return [ReplyReasoning(turn_id=self._key, text=data.content)]  # not streamed
            case AssistantMessageData() if data.parent_tool_call_id is None:
                finish = "tool_calls" if data.tool_requests else "stop"
                return [ReplyMessage(turn_id=self._key, text=data.content, finish_reason=finish)]
            case ToolExecutionStartData() if (
                data.parent_tool_call_id is None and data.tool_call_id not in self._announced
            ):
                self._announced.add(data.tool_call_id)
                return [
                    ToolCallStarted(
                        turn_id=self._key,
                        tool_call_id=data.tool_call_id,
                        name=data.tool_name,
                        arguments=json_text(data.arguments),
                    )
                ]
            case ToolExecutionCompleteData() if data.tool_call_id in self._announced:
                self._announced.discard(data.tool_call_id)
                result = data.result.content if data.result is not None else ""
                return [
                    ToolCallCompleted(
                        turn_id=self._key,
                        tool_call_id=data.tool_call_id,
                        result=result or "",
                        success=data.success,
                    )
                ]
        return []

    def _session_error(self, data: SessionErrorData) -> list[ProviderEvent]:
        """The CLI's own error ends the run it is on; before any echo, it ends the
        turns of the messages it was given and has not echoed (it will not run them)."""
        error = login_or_provider_error(data.message)
        self._log.warning(
            "copilot_session_error",
            turn_id=self._key,
            error_type=data.error_type,
            error=data.message,
            code=error.code.value,
        )
        if self._key is not None:
            return [CallSettled(turn_id=self._key, settlement=Settlement.REJECTED, error=error)]
        self._refused = True
        return [
            CallSettled(turn_id=origin.key, settlement=Settlement.REJECTED, error=error)
            for origin in self._take_unechoed(data.originating_message_id)
        ]

    def _session_idle(self, data: SessionIdleData) -> list[ProviderEvent]:
        """The run is over. After an abort, the CLI has dropped every message it had
        not echoed. Idle with no run of ours under way (no echo came) and not after
        an error: the CLI dropped what it acknowledged."""
        key, self._key, self._busy = self._key, None, False
        refused, self._refused = self._refused, False
        self._aborted()
        ended: list[ProviderEvent] = [] if key is None else [Idle(turn_id=key)]
        if data.aborted:  # what it took before the idle was queued behind the run
            why = "the CLI dropped the message with the aborted run"
            return ended + self._dropped(why, (self._origins,))
        if ended or refused:
            return ended
        # Its answer to session.send may still be on its way to us (`_unsent`).
        why = "the CLI went idle without running the message"
        return self._dropped(why, (self._origins, self._unsent))

    def _dropped(self, why: str, tables: tuple[dict[str, _Origin], ...]) -> list[ProviderEvent]:
        """End the turn of each message of `tables` (handed to the CLI, not echoed).
        Steering the CLI drops is the host's to give back, not a turn."""
        dropped = [o for table in tables for o in table.values() if not o.starts_turn]
        for table in tables:
            for known in [k for k, o in table.items() if not o.starts_turn]:
                del table[known]
        if dropped:
            self._log.warning("copilot_dropped_unechoed", turn_ids=[o.key for o in dropped])
        error = AgentHostError(code=ErrorCode.PROVIDER_ERROR, message=f"copilot: {why}")
        return [
            CallSettled(turn_id=origin.key, settlement=Settlement.REJECTED, error=error)
            for origin in dropped
        ]

    def _take_unechoed(self, message_id: str | None) -> list[_Origin]:
        """The messages handed to the CLI and not echoed: the one `message_id` names,
        else all of them (sent, or still on their way)."""
        if message_id is not None and message_id in self._origins:
            return [self._origins.pop(message_id)]
        taken = [*self._origins.values(), *self._unsent.values()]
        self._origins.clear()
        self._unsent.clear()
        return taken

    def _origin(self, message_id: str | None, text: str) -> _Origin | None:
        """By message id first; by exact text only among messages whose id we lack."""
        if message_id is not None and message_id in self._origins:
            return self._origins.pop(message_id)
        candidates = [self._unsent]
        if message_id is None:
            candidates.append(self._origins)
        for table in candidates:
            for known, origin in table.items():
                if origin.text == text:
                    return table.pop(known)
        return None

    # -- liveness ------------------------------------------------------------------------------
    def _live_session(self) -> CopilotSession:
        if self._failed is not None:
            raise self._failed
        if self._session is None:
            raise ProviderCallError(
                AgentHostError(code=ErrorCode.PROVIDER_ERROR, message="copilot: no open session"),
                taken=False,
            )
        return self._session

    async def _call(self, what: str, call: Awaitable[T], *, opening: bool = False) -> T:
        """Await one call to the CLI within `rpc_timeout` (`start_timeout` while opening).

        Raises:
            TimeoutError: it timed out (and the connection is still trusted).
            ProviderCrashed: the CLI is gone, or this was one timeout too many.
        """
        if self._failed is not None:
            if asyncio.iscoroutine(call):
                call.close()
            raise self._failed
        try:
            timeout = self.provider.start_timeout if opening else self.provider.rpc_timeout
            result = await asyncio.wait_for(call, timeout)
        except TimeoutError:
            self._timeouts += 1
            self._log.warning("copilot_call_timed_out", call=what, timeouts=self._timeouts)
            if self._timeouts >= self.provider.max_timeouts:
                raise self._fail(
                    f"copilot CLI stopped answering: {self._timeouts} calls timed out"
                ) from None
            raise TimeoutError(f"{what} timed out after {timeout:g} s") from None
        except ProcessExitedError as exc:
            raise self._fail(f"copilot CLI exited: {exc}") from exc
        except RuntimeError as exc:  # how client.start reports a CLI that exited
            if "exited" in str(exc):
                raise self._fail(f"copilot CLI exited: {exc}") from exc
            raise
        self._timeouts = 0
        return result

    def _fail(self, reason: str) -> ProviderCrashed:
        if self._failed is None:
            self._failed = ProviderCrashed(reason)
            self._log.warning("copilot_connection_failed", reason=reason)
            self._aborted()  # a message waiting for the abort's idle fails at once
        return self._failed

    async def _beat(self) -> None:
        """While a run is in flight, ping the CLI: a dead or hung CLI fails the connection."""
        while self._failed is None:
            await asyncio.sleep(self.provider.heartbeat_s)
            if not self._busy or self._client is None:
                continue
            try:
                await self._call("ping", self._client.ping())
            except TimeoutError:
                continue
            except ProviderCrashed as crash:
                self._emit(ConnectionFailed(error=crash.error))
                return
            except Exception as exc:  # answered, if oddly: the CLI is alive
                self._log.warning("copilot_ping_failed", error=repr(exc))
