"""A provider the test drives by hand, fully deterministic.

Its coroutines never suspend and run inline on a `SyncLoop`, so with the
deterministic runner every step of host and model is chosen by the test
(or by hypothesis). The model's actions are methods: `delta`, `read`,
`echo`, `idle`, `crash`.
"""

import concurrent.futures
from collections.abc import Callable, Coroutine, Generator
from typing import Any

import attrs

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.provider import (
    Capabilities,
    ConnectionFailed,
    Idle,
    ProviderCancel,
    ProviderEvent,
    ProviderSend,
    ProviderSteer,
    ProviderWithdraw,
    ReplyDelta,
    UserMessageEcho,
)
from agenthost.providers.base import Emit, Provider, ProviderAdapter, ProviderCallError
from agenthost.providers.scripted import SHAPES


class Deferred:
    """What a manual coroutine may wait on; `resolve()` resumes it inline."""

    def __init__(self) -> None:
        self.done = False
        self._resume: list[Callable[[], None]] = []

    def __await__(self) -> Generator["Deferred", None, None]:
        if not self.done:
            yield self

    def resolve(self) -> None:
        if not self.done:
            self.done = True
            for resume in self._resume:
                resume()


class SyncLoop:
    """Runs coroutines inline: to completion, or until they wait on a Deferred,
    resuming them when it resolves. Nothing runs on another thread."""

    def submit(
        self,
        coro: Coroutine[Any, Any, Any],
        on_done: Callable[["concurrent.futures.Future[Any]"], object] | None = None,
    ) -> "concurrent.futures.Future[Any]":
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        if on_done is not None:
            future.add_done_callback(on_done)

        def step() -> None:
            try:
                awaited = coro.send(None)
            except StopIteration as stop:
                future.set_result(stop.value)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                if not isinstance(awaited, Deferred):
                    coro.close()
                    raise RuntimeError("a manual provider coroutine awaited a real future")
                awaited._resume.append(step)

        step()
        return future

    def call(
        self,
        coro: Coroutine[Any, Any, Any],
        on_done: Callable[["concurrent.futures.Future[Any]"], object],
    ) -> None:
        self.submit(coro, on_done)

    def stop(self, timeout: float = 0) -> None:
        return None

    def burst(self, deliver: Callable[[tuple[ProviderEvent, ...]], None]) -> "Unbatched":
        return Unbatched(deliver)


@attrs.define
class Unbatched:
    """Every event delivered alone, at once: the finest interleavings."""

    deliver: Callable[[tuple[ProviderEvent, ...]], None]
    failed: bool = False

    def emit(self, event: ProviderEvent) -> None:
        if isinstance(event, ConnectionFailed):
            self.failed = True
        self.deliver((event,))

    def on_loop(self) -> bool:
        return True

    def flush(self) -> None:
        return None


@attrs.define
class Steering:
    pending_id: str
    message_id: str
    text: str


@attrs.define
class Run:
    key: str
    unread: list[Steering] = attrs.field(factory=list)
    read: list[Steering] = attrs.field(factory=list)
    settled: Deferred = attrs.field(factory=Deferred)  # a send that settles with its turn


class ManualProvider(Provider):
    def __init__(self, shape: str = "copilot") -> None:
        self.shape = shape
        self.capabilities: Capabilities = SHAPES[shape]
        self.adapter: ManualAdapter | None = None
        self.echoed: list[str] = []  # pending ids the model echoed
        self.seen: list[str] = []  # pending ids the model read
        self.withdrawn: list[str] = []  # pending ids withdrawn with removed: true
        self._ids = 0

    def next_id(self) -> str:
        self._ids += 1
        return f"m{self._ids}"

    def make_loop(self, name: str) -> SyncLoop:  # type: ignore[override]
        return SyncLoop()

    def open_session(self, session_id: str, chat_id: str, emit: Emit) -> "ManualAdapter":
        self.adapter = ManualAdapter(self, emit)
        return self.adapter

    # -- the model's moves -------------------------------------------------------------
    @property
    def run(self) -> Run | None:
        return None if self.adapter is None else self.adapter.run

    def delta(self) -> bool:
        run = self.run
        if run is None or self.adapter is None:
            return False
        self.adapter.emit(ReplyDelta(turn_id=run.key, text="x"))
        return True

    def read(self) -> bool:
        run = self.run
        if run is None or not run.unread:
            return False
        self.seen.extend(s.pending_id for s in run.unread)
        run.read.extend(run.unread)
        run.unread.clear()
        return True

    def echo(self) -> bool:
        run = self.run
        if run is None or not run.read or self.adapter is None:
            return False
        steering = run.read.pop(0)
        self.echoed.append(steering.pending_id)
        self.adapter.emit(
            UserMessageEcho(
                turn_id=run.key,
                text=steering.text,
                provider_message_id=steering.message_id,
                starts_turn=self.shape == "copilot",
            )
        )
        return True

    def idle(self) -> bool:
        """End the run; steering still unread starts the next run."""
        run = self.run
        if run is None or run.read or self.adapter is None:
            return False
        self.adapter.emit(Idle(turn_id=run.key))
        self.adapter.run = None
        run.settled.resolve()
        if run.unread:
            first, *rest = run.unread
            self.adapter.start_run(first, rest)
        return True

    def crash(self) -> bool:
        if self.adapter is None:
            return False
        adapter, self.adapter = self.adapter, None
        adapter.run = None
        adapter.emit(
            ConnectionFailed(error=AgentHostError(code=ErrorCode.PROVIDER_CRASHED, message="boom"))
        )
        return True


class ManualAdapter(ProviderAdapter):
    def __init__(self, backend: ManualProvider, emit: Emit) -> None:
        self.backend = backend
        self.capabilities = backend.capabilities
        self.emit = emit
        self.run: Run | None = None

    def start_run(self, first: Steering, rest: list[Steering]) -> None:
        self.run = Run(key=first.pending_id, unread=list(rest))
        self.backend.seen.append(first.pending_id)
        self.backend.echoed.append(first.pending_id)
        self.emit(
            UserMessageEcho(
                turn_id=first.pending_id,
                text=first.text,
                provider_message_id=first.message_id,
                starts_turn=True,
            )
        )

    async def send(self, message: ProviderSend) -> str | None:
        message_id = self.backend.next_id()
        self.run = Run(key=message.turn_id)
        run = self.run
        self.emit(
            UserMessageEcho(
                turn_id=message.turn_id, text=message.text, provider_message_id=message_id
            )
        )
        if self.capabilities.call_settles_with_turn:
            await run.settled
        return message_id

    async def steer(self, message: ProviderSteer) -> str | None:
        steering = Steering(message.pending_id, self.backend.next_id(), message.text)
        if self.run is not None:
            self.run.unread.append(steering)
        elif self.backend.shape == "codex":
            raise ProviderCallError(
                AgentHostError(code=ErrorCode.PROVIDER_ERROR, message="no active turn to steer"),
                taken=False,
                no_active_turn=True,
            )
        else:
            self.start_run(steering, [])
        return steering.message_id

    async def withdraw(self, message: ProviderWithdraw) -> bool:
        if self.run is None:
            return False
        for steering in self.run.unread:
            if steering.message_id == message.provider_message_id:
                self.run.unread.remove(steering)
                self.backend.withdrawn.append(steering.pending_id)
                return True
        return False

    async def cancel(self, message: ProviderCancel) -> None:
        if self.run is not None and self.run.key == message.turn_id:
            run, self.run = self.run, None
            run.settled.resolve()
