"""The provider contract: plain asyncio code, no pykka.

A `Provider` is a configured backend (the scripted model, an SDK's CLI, an
HTTP endpoint). The host opens one `ProviderAdapter` per provider session
(one per chat) and drives it on the `ProviderLoop` of its provider kind. An
adapter reports what happens through `emit`, a thread-safe, non-blocking
callback taking provider-protocol messages (messages/provider.py).

Failures are typed: `ProviderCallError` (a send failed; `taken` says whether
the provider took the turn), `ProviderCrashed` (the connection is dead),
`ProviderResumeError` (resume failed; `no_history` is the allowlist verdict).
"""

import abc
import asyncio
import concurrent.futures
import contextlib
import threading
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import attrs
import structlog
import tenacity

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.provider import (
    Capabilities,
    ConnectionFailed,
    HostRequestOpened,
    ProviderAnswer,
    ProviderCancel,
    ProviderEvent,
    ProviderResume,
    ProviderSend,
    ProviderSteer,
    ProviderWithdraw,
)
from agenthost.providers import loops

log = structlog.get_logger(__name__)

Emit = Callable[[ProviderEvent], None]
T = TypeVar("T")


class ProviderCallError(Exception):
    """A call failed. `taken`: the provider had already taken the turn.
    `no_active_turn`: a steer found no running turn to join."""

    def __init__(self, error: AgentHostError, *, taken: bool, no_active_turn: bool = False) -> None:
        super().__init__(str(error))
        self.error = error
        self.taken = taken
        self.no_active_turn = no_active_turn


class ProviderCrashed(Exception):
    """The provider connection died; the supervisor restarts it."""

    def __init__(self, message: str = "the provider connection crashed") -> None:
        super().__init__(message)
        self.error = AgentHostError(code=ErrorCode.PROVIDER_CRASHED, message=message)


class ProviderResumeError(Exception):
    """Resume failed. `no_history` is True only when the provider positively
    reports that no history exists (design rule 4's allowlist,
    docs/design-rules.md)."""

    def __init__(self, code: int, message: str, *, no_history: bool = False) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.no_history = no_history


TRANSIENT_MARKERS = (
    "network fetch failed",
    "timed out",
    "timeout",
    "connection refused",
    "connection reset",
    "temporarily unavailable",
    "429",
    "500",
    "502",
    "503",
    "504",
)


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """Retries of a provider resume: transient errors only, bounded, with jitter.

    `sleep` is injectable so tests need not wait.
    """

    attempts: int = 3
    wait_min: float = 0.2
    wait_max: float = 2.0
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep


class HostRequests:
    """The requests an adapter opened to the host (permissions, questions,
    client tools) and their answers. An answer may arrive before the adapter
    waits for it (it emitted the request first): the early answer wins."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[ProviderAnswer]] = {}
        self._early: dict[str, ProviderAnswer] = {}

    async def ask(self, request: HostRequestOpened, emit: Emit) -> ProviderAnswer:
        """Emit `request` and wait for the host's answer to it."""
        early = self._early.pop(request.request_id, None)
        emit(request)
        if early is not None:
            return early
        future: asyncio.Future[ProviderAnswer] = asyncio.get_running_loop().create_future()
        self._waiting[request.request_id] = future
        try:
            return await future
        finally:
            self._waiting.pop(request.request_id, None)

    def answer(self, message: ProviderAnswer) -> None:
        future = self._waiting.get(message.request_id)
        if future is None:
            self._early[message.request_id] = message
        elif not future.done():
            future.set_result(message)

    def waiting_on(self) -> list[str]:
        return sorted(self._waiting)

    def cancel_all(self) -> None:
        for future in self._waiting.values():
            future.cancel()


class ProviderAdapter(abc.ABC):
    """One provider session. Every method runs on the provider kind's loop."""

    capabilities: Capabilities

    def is_transient(self, error: ProviderResumeError) -> bool:
        """Whether a resume error may pass if tried again (each adapter owns its list)."""
        text = error.message.lower()
        return not error.no_history and any(marker in text for marker in TRANSIENT_MARKERS)

    async def start(self) -> None:
        """Open a new provider session (spawn a CLI, connect); no-op by default."""
        return None

    @abc.abstractmethod
    async def send(self, message: ProviderSend) -> str | None:
        """Hand the provider a turn; returns the provider's message id, if any.

        Resolves early (copilot, codex) or with the turn (claude), per
        `capabilities.call_settles_with_turn`.
        """

    async def steer(self, message: ProviderSteer) -> str | None:
        raise ProviderCallError(
            AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message="steering is not supported"),
            taken=False,
        )

    async def withdraw(self, message: ProviderWithdraw) -> bool:
        return False

    async def answer(self, message: ProviderAnswer) -> None:
        """Deliver the host's answer to a request the provider opened."""
        return None

    @abc.abstractmethod
    async def cancel(self, message: ProviderCancel) -> None: ...

    async def resume(self, message: ProviderResume) -> None:
        return None

    async def dispose(self) -> None:
        return None

    def turn_diagnostic_snapshot(self, turn_id: str) -> dict[str, Any]:
        return {}


async def resume_with_retry(
    adapter: ProviderAdapter, message: ProviderResume, policy: RetryPolicy
) -> None:
    """Resume, retrying transient errors per `policy`; the last error propagates."""

    def transient(exc: BaseException) -> bool:
        return isinstance(exc, ProviderResumeError) and adapter.is_transient(exc)

    def before_sleep(state: tenacity.RetryCallState) -> None:
        log.warning(
            "resume_retrying",
            session_id=message.session_id,
            chat_id=message.chat_id,
            attempt=state.attempt_number,
            error=str(state.outcome.exception()) if state.outcome else None,
        )

    retrying = tenacity.AsyncRetrying(
        stop=tenacity.stop_after_attempt(policy.attempts),
        wait=tenacity.wait_random_exponential(multiplier=policy.wait_min, max=policy.wait_max),
        retry=tenacity.retry_if_exception(transient),
        sleep=policy.sleep,
        before_sleep=before_sleep,
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            await adapter.resume(message)


class Provider(abc.ABC):
    """A configured backend that opens adapters, one per provider session."""

    capabilities: Capabilities

    @abc.abstractmethod
    def open_session(self, session_id: str, chat_id: str, emit: Emit) -> ProviderAdapter: ...

    def make_loop(self, name: str) -> "ProviderLoop":
        """The event loop this provider kind's adapters run on (one thread per kind)."""
        return ProviderLoop(name)


class LoopCalls:
    """Calls handed to one event loop from other threads, one wake-up per burst.

    `loop.call_soon_threadsafe` writes to the loop's self-pipe on every call: a
    syscall and, on a busy machine, a GIL hand-off per call. Here calls wait in
    a deque and only the first of a burst wakes the loop, which then runs them
    all in order.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # A weak reference: `of` keeps one per loop for as long as the loop lives.
        self._loop = weakref.ref(loop)
        self._calls: deque[tuple[Callable[..., object], tuple[Any, ...]]] = deque()
        self._scheduled = False

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> "LoopCalls":
        """The one LoopCalls of `loop`, shared by whoever hands it calls (the
        replies and subscriptions an asyncio client awaits). Call it on the
        loop's own thread."""
        calls = _shared_calls.get(loop)
        if calls is None:
            calls = _shared_calls[loop] = cls(loop)
        return calls

    def call(self, fn: Callable[..., object], *args: Any) -> None:
        """Run `fn(*args)` on the loop's thread, after the calls made before it.

        Raises:
            RuntimeError: the loop is closed.
        """
        loop = self._loop()
        if loop is None:
            raise RuntimeError("the loop is gone")
        self._calls.append((fn, args))
        if not self._scheduled:
            # Two threads may both get here: the loop then drains twice, harmlessly.
            self._scheduled = True
            try:
                loop.call_soon_threadsafe(self._drain)
            except RuntimeError:
                self._scheduled = False
                raise

    def _drain(self) -> None:
        # Clear the flag before taking the calls: a call appended after this
        # point either is taken below or schedules another drain.
        self._scheduled = False
        calls = self._calls
        for _ in range(len(calls)):
            fn, args = calls.popleft()
            try:
                fn(*args)
            except Exception as exc:
                loop = self._loop()
                if loop is not None:
                    loop.call_exception_handler(
                        {"message": "LoopCalls call failed", "exception": exc}
                    )


_shared_calls: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopCalls]" = (
    weakref.WeakKeyDictionary()
)


def _ignore(events: tuple[ProviderEvent, ...]) -> None:
    return None


class Burst:
    """An adapter's emitted events, handed on once per pass of its loop.

    A zero-latency backend emits a whole reply (echo, deltas, usage, message,
    idle) in one pass: one `deliver` call for all of them instead of one per
    event. Events keep their order; one emitted on another thread first hops
    to the loop. `flush()` delivers early (before a call's result goes out).
    """

    def __init__(
        self, loop: "ProviderLoop", deliver: Callable[[tuple[ProviderEvent, ...]], None]
    ) -> None:
        self._loop = loop
        self._deliver = deliver
        self._events: list[ProviderEvent] = []  # the loop thread's only
        self.failed = False  # a ConnectionFailed was emitted (the loop thread's)

    def emit(self, event: ProviderEvent) -> None:
        """An `Emit`: never blocks."""
        if threading.get_ident() != self._loop.thread_id:  # off the loop: hop to it
            with contextlib.suppress(RuntimeError):  # the loop closed: the host is stopping
                self._loop.loop.call_soon_threadsafe(self.emit, event)
            return
        if type(event) is ConnectionFailed:
            self.failed = True
        events = self._events
        if not events:
            # Two passes of the loop away: a call that emitted these and ends in this
            # pass delivers them itself, its result riding behind them (the call's
            # done callback runs in the next pass, before this flush).
            loop = self._loop.loop
            loop.call_soon(loop.call_soon, self.flush)
        events.append(event)

    def on_loop(self) -> bool:
        """Whether this is the loop's thread, where an emitted event joins the burst."""
        return threading.get_ident() == self._loop.thread_id

    def flush(self) -> None:
        """Deliver what was emitted so far (on the loop thread; elsewhere a no-op)."""
        if self._events and self.on_loop():
            events, self._events = tuple(self._events), []
            self._deliver(events)

    def detach(self, _: object = None) -> None:
        """Deliver nothing from now on (the receiver is gone; whatever it was
        bound to can be freed). Takes and ignores a future, to be a done callback."""
        self._deliver = _ignore


class ProviderLoop:
    """One asyncio event loop on its own thread, shared by a provider kind's adapters."""

    def __init__(self, name: str) -> None:
        self.loop = loops.new_loop()
        self._calls = LoopCalls(self.loop)
        self._thread = threading.Thread(target=self._run, name=f"provider-loop-{name}", daemon=True)
        self._running = threading.Event()
        self._thread.start()
        self.thread_id = self._thread.ident  # events emitted on it need no hop
        # Submissions check that the loop runs: it must, once this returns.
        if not self._running.wait(timeout=30.0):
            raise RuntimeError(f"the provider loop {name} did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._running.set)
        self.loop.run_forever()

    def burst(self, deliver: Callable[[tuple[ProviderEvent, ...]], None]) -> Burst:
        """An emitter whose events reach `deliver` once per pass of this loop."""
        return Burst(self, deliver)

    def submit(
        self,
        coro: Coroutine[Any, Any, T],
        on_done: Callable[[concurrent.futures.Future[T]], object] | None = None,
    ) -> concurrent.futures.Future[T]:
        """Run `coro` on the loop; once the loop stopped, fail without running it.

        As `asyncio.run_coroutine_threadsafe`, but a burst of submissions wakes
        the loop once (LoopCalls). Cancelling the returned future cancels the task.
        `on_done` is added before the task can end, so it runs on the loop's
        thread as the task ends (a callback added later may run on the adder's).
        """
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        if on_done is not None:
            future.add_done_callback(on_done)
        try:
            if self.loop.is_closed() or not self.loop.is_running():
                raise RuntimeError("the provider loop has stopped")
            self._calls.call(self._start, coro, future)
        except RuntimeError as exc:
            coro.close()
            future.set_exception(exc)
        return future

    def call(
        self, coro: Coroutine[Any, Any, T], on_done: Callable[["asyncio.Future[T]"], object]
    ) -> None:
        """Run `coro` on the loop and call `on_done(task)` on the loop's thread as it
        ends (a burst of calls wakes the loop once). The light form of `submit` for
        callers that never wait on the result: no concurrent future, no lock. Once
        the loop stopped, `on_done` gets a future failed with RuntimeError."""
        try:
            if self.loop.is_closed() or not self.loop.is_running():
                raise RuntimeError("the provider loop has stopped")
            self._calls.call(self._start_call, coro, on_done)
        except RuntimeError as exc:
            coro.close()
            failed: concurrent.futures.Future[T] = concurrent.futures.Future()
            failed.set_exception(exc)
            on_done(failed)  # type: ignore[arg-type]

    def _start_call(
        self, coro: Coroutine[Any, Any, T], on_done: Callable[["asyncio.Future[T]"], object]
    ) -> None:
        self.loop.create_task(coro).add_done_callback(on_done)

    def _start(self, coro: Coroutine[Any, Any, T], future: concurrent.futures.Future[T]) -> None:
        """On the loop thread: run `coro` as a task whose end settles `future`."""
        if future.cancelled():
            coro.close()
            return
        task = self.loop.create_task(coro)

        def settle(done: "asyncio.Task[T]") -> None:
            if done.cancelled():
                future.cancel()
            elif future.set_running_or_notify_cancel():
                exc = done.exception()
                if exc is not None:
                    future.set_exception(exc)
                else:
                    future.set_result(done.result())

        def cancel_task(f: concurrent.futures.Future[T]) -> None:
            if f.cancelled() and not self.loop.is_closed():
                self.loop.call_soon_threadsafe(task.cancel)

        task.add_done_callback(settle)
        future.add_done_callback(cancel_task)

    def stop(self, timeout: float = 5.0) -> None:
        if not self.loop.is_running():
            return

        async def _cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            self.submit(_cancel_all()).result(timeout)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()
