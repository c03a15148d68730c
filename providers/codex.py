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
the event loop (providers/codex_process.py): one `Worker` spawns the CLI
(through the CLI guard, whose parent-death signal follows the spawning thread,
which lives as long as the adapter) and runs every request in order; a second
reads each turn's notifications in order and hands them to the loop, where
providers/codex_turns.py turns them into provider-protocol messages; a third
watches the global queue, which fails when the CLI dies. Each request has a
timeout measured on the loop (suspended while an approval waits on the host,
since then the SDK's reader is ours to release), and `max_timeouts` timeouts in
a row fail the connection.

Codex returns early from turn/start and ends on turn/completed; steering is
turn/steer (an error "no active turn to steer" becomes a queued message);
cancel is turn/interrupt; nothing can be withdrawn.

`approval_policy` and `sandbox` go with thread/start and thread/resume, checked
first against what the app-server accepts there (codex 0.163: its config file
no longer takes "untrusted", and the CLI exits at initialize if it finds it).
A CLI that exits says why on its stderr, which the SDK drains on a thread of
its own: a failure waits for that drain, so the error carries the CLI's words.

Codex's own errors end turns in its words: a failed turn, and an `error`
notification it will not retry (then its turn is interrupted too, since no
turn/completed may follow). One it will retry is logged at warning; past
`max_retries` in one turn (codex waits for an unreachable network without
end) the turn ends with codex's words and codex's turn is interrupted.
"""

import asyncio
import contextlib
import functools
import os
import threading
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import structlog
from openai_codex import CodexConfig, JsonRpcError, TransportClosedError
from openai_codex.client import CodexClient
from openai_codex.generated.v2_all import TurnSteerResponse
from openai_codex.models import JsonObject, Notification, UnknownNotification

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.provider import (
    Capabilities,
    ConnectionFailed,
    ProviderAnswer,
    ProviderCancel,
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
from agenthost.providers.cli_guard import guard_env, launcher_path, resolve_cli
from agenthost.providers.codex_process import Worker, exit_reason
from agenthost.providers.codex_requests import CodexRequests
from agenthost.providers.codex_turns import CodexTurns, Run, ends_reading
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
APPROVAL_POLICIES = CODEX_CHOICES["approval_policy"]
SANDBOXES = CODEX_CHOICES["sandbox"]


class CodexProvider(Provider):
    """Codex app-server sessions, one CLI process per provider session.

    Args:
        cli_path: the codex CLI to run (never downloaded or searched for).
        env: added to the CLI's environment (the SDK passes os.environ plus this).
        model: passed on as thread/start's `model`.
        cwd: the CLI's working directory.
        rpc_timeout: seconds each request may take before it counts as timed out.
        max_timeouts: timeouts in a row that fail the connection.
        max_retries: how many errors codex says it will retry (each logged) one
            turn may have before the turn ends with codex's words and codex's
            turn is interrupted; None: as many as codex makes. Codex gives up
            on a failing model API after 5 retries, but waits for an
            unreachable network without end, a retry a minute.
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
        max_retries: int | None = 8,
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
        self.max_retries = max_retries

    def open_session(self, session_id: str, chat_id: str, emit: Emit) -> "CodexAdapter":
        return CodexAdapter(self, session_id, chat_id, emit)


class CodexAdapter(ProviderAdapter):
    """One codex thread over one CLI process. Runs on the codex provider loop."""

    capabilities = CAPABILITIES

    def __init__(self, provider: CodexProvider, session_id: str, chat_id: str, emit: Emit) -> None:
        self._provider = provider
        self._emit = emit
        self._log = log.bind(session_id=session_id, chat_id=chat_id)
        self._events = CodexTurns(self._log, provider.max_retries)
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: CodexClient | None = None
        self._calls: Worker | None = None
        self._turns: Worker | None = None
        self._thread_id: str | None = None
        self._run: Run | None = None
        self._runs: dict[str, Run] = {}  # codex turn id -> run
        self._requests = CodexRequests(
            emit, self._runs.get, lambda: self._run, lambda: self._closing or self._failed
        )
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
        self._requests.loop = self._loop
        client = CodexClient(config=config, approval_handler=self._requests.on_server_request)
        self._client = client
        self._calls = Worker("codex-calls")
        self._turns = Worker("codex-turns")
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
        run = Run(key=message.turn_id)
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
        """Interrupt the run's codex turn (once it started and until it ended)."""
        run = self._run
        if run is None or run.key != message.turn_id:
            return
        if not run.started.is_set():
            await self._wait(run.started, "the turn to start")  # then interrupt it
        if run.turn_id is None or run.done.is_set():
            return
        await self._interrupt(run)

    async def _interrupt(self, run: Run) -> None:
        """Cancel open approvals of the run (the SDK's reader waits on them), then
        turn/interrupt; codex ends the turn with status interrupted."""
        if run.turn_id is None:
            return  # codex never took it
        self._requests.cancel_turn(run.turn_id)
        client = self._require_client()
        interrupt = functools.partial(client.turn_interrupt, self._thread_id or "", run.turn_id)
        try:
            await self._call("turn/interrupt", interrupt)
        except JsonRpcError as exc:
            self._log.info("codex_interrupt_refused", turn_id=run.key, error=exc.message)

    async def answer(self, message: ProviderAnswer) -> None:
        self._requests.answer(message)

    async def dispose(self) -> None:
        """Release waiting approvals, close the CLI (not on the calls thread: it may be stuck)."""
        self._closing = True
        self._requests.release_all()
        for task in list(self._tasks):
            task.cancel()
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
            "waiting_on": self._requests.waiting_on,
        }

    # -- from the SDK ----------------------------------------------------------------------
    def _read_turn(self, run: Run) -> None:
        """Read the turn's notifications in order on the turns thread."""
        assert self._turns is not None and self._loop is not None and run.turn_id is not None
        client, loop, turn_id = self._require_client(), self._loop, run.turn_id

        def read() -> None:
            try:
                while True:
                    notification = client.next_turn_notification(turn_id)
                    loop.call_soon_threadsafe(self._on_notification, run, notification)
                    if ends_reading(notification.method, _params(notification)):
                        return
            except TransportClosedError as exc:  # on this thread, the CLI's last words can wait
                raise ProviderCrashed(exit_reason(client, "mid-turn")) from exc
            finally:
                client.unregister_turn_notifications(turn_id)

        reading = asyncio.wrap_future(self._turns.submit(read), loop=loop)
        reading.add_done_callback(functools.partial(self._reading_ended, run))

    def _reading_ended(self, run: Run, reading: "asyncio.Future[None]") -> None:
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
                reason = exit_reason(client, "while running")
                with contextlib.suppress(RuntimeError):  # the loop closed
                    loop.call_soon_threadsafe(self._connection_failed, reason)

    def _on_notification(self, run: Run, notification: Notification) -> None:
        params = _params(notification)
        for event in self._events.map(run, notification.method, params):
            self._emit(event)
        if run.interrupt:  # codex's own error ended our turn: its turn is stopped too
            run.interrupt = False
            self._background(self._interrupt(run))
        if ends_reading(notification.method, params):
            run.done.set()
            self._runs.pop(run.turn_id or "", None)

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
            if self._requests.waiting_on:
                continue  # the SDK's reader waits on the host's answer, not on the CLI
            self._timeouts += 1
            self._log.warning("codex_call_timed_out", call=what, timeouts=self._timeouts)
            if self._timeouts >= self._provider.max_timeouts:
                self._failed = True
                self._requests.release_all()
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
                reason = await loop.run_in_executor(None, exit_reason, client, what)
            self._log.warning("codex_cli_exited", call=what, reason=reason)
            raise ProviderCrashed(reason) from exc

    async def _wait(self, event: asyncio.Event, what: str) -> None:
        try:
            await asyncio.wait_for(event.wait(), self._provider.rpc_timeout)
        except TimeoutError:
            raise ProviderCrashed(f"the codex CLI stopped answering (waited for {what})") from None

    def _background(self, call: Coroutine[Any, Any, None]) -> None:
        """Run `call` on the loop; its failure is logged (a dead CLI is noticed elsewhere)."""

        def done(task: "asyncio.Task[None]") -> None:
            if not task.cancelled() and task.exception() is not None:
                self._log.info("codex_call_failed", error=str(task.exception()))

        task = asyncio.get_running_loop().create_task(call)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(done)

    def _connection_failed(self, message: str) -> None:
        if self._closing or self._failed:
            return
        self._failed = True
        self._requests.release_all()
        self._log.warning("codex_connection_failed", error=message)
        self._emit(
            ConnectionFailed(error=AgentHostError(code=ErrorCode.PROVIDER_CRASHED, message=message))
        )

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
