"""Thread-safe endpoints the actors write to and the surface reads from.

`Subscription` is a chat subscriber's bounded queue: the chat actor pushes
without ever blocking; a subscriber that falls `maxsize` events or
`max_bytes` bytes behind (events weighed by messages/sizes.py) gets `Lagged`
and is closed, so it never slows the host. A subscription made with
`keep_state` also keeps the chat's published state as of the last event it
handed out (`state`), so a reader that needs the state (the AHP server's
channel) takes the chat's own, sharing its text, instead of reducing a copy.
`Ticket` is a send's reply: the turn id once the turn starts, and the
outcome once it ended and was committed.
"""

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import attrs

from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.runtime import current_runtime
from agenthost.messages.commands import TurnOutcome
from agenthost.messages.events import ChatEvent, Lagged
from agenthost.messages.sizes import event_bytes
from agenthost.messages.state import ChatState
from agenthost.providers.base import LoopCalls


@attrs.frozen(kw_only=True)
class _StateMark:
    """The chat's state once `after` events in all have been handed out."""

    after: int
    state: ChatState


class Subscription:
    """Events of one chat: first a snapshot, then live events.

    `next(timeout)` raises TimeoutError; iteration (sync and async) ends when
    the subscription is closed and drained.
    """

    def __init__(
        self,
        maxsize: int,
        session_id: str = "",
        chat_id: str = "",
        *,
        max_bytes: int | None = None,
        keep_state: bool = False,
    ) -> None:
        self._events: deque[ChatEvent] = deque()
        self._maxsize = maxsize
        self._max_bytes = max_bytes
        self._sizes: deque[int] = deque()  # each queued event's weight (with max_bytes)
        self.queued_bytes = 0
        self._keep_state = keep_state
        self._marks: deque[_StateMark] = deque()  # with keep_state
        self._pushed = 0
        self._taken = 0
        self.state: ChatState | None = None
        self._cond = threading.Condition()
        self._closed = False
        self._async_waiters: list[tuple[LoopCalls, asyncio.Future[None]]] = []
        self._session_id = session_id
        self._chat_id = chat_id
        self._detach: Any = None

    # -- the chat actor's side (never blocks) -----------------------------------
    def push(self, event: ChatEvent) -> bool:
        """Queue an event; False once closed (the actor then forgets it)."""
        return self.push_many((event,))

    def push_many(self, events: Sequence[ChatEvent], state: ChatState | None = None) -> bool:
        """Queue events in order, waking the reader once; False once closed.
        `state`: the chat's published state once these events apply."""
        with self._cond:
            if self._closed:
                return False
            room = max(self._maxsize - len(self._events), 0)
            sizes = None
            if self._max_bytes is not None:
                sizes = [event_bytes(event) for event in events]
                room = min(room, _fitting(sizes, self._max_bytes - self.queued_bytes))
            if len(events) > room:
                self._events.extend(events[:room])
                self._events.append(
                    Lagged(
                        session_id=self._session_id,
                        chat_id=self._chat_id,
                        dropped=len(events) - room,
                    )
                )
                if sizes is not None:
                    self._queued(sizes[:room])
                    self._sizes.append(0)
                self._closed = True
            else:
                self._events.extend(events)
                if sizes is not None:
                    self._queued(sizes)
                if self._keep_state:
                    self._pushed += len(events)
                    if state is not None:
                        self._marks.append(_StateMark(after=self._pushed, state=state))
            self._wake()
            return not self._closed

    def _queued(self, sizes: list[int]) -> None:
        self._sizes.extend(sizes)
        self.queued_bytes += sum(sizes)

    def _took(self) -> ChatEvent:
        """Hand out the oldest event (under the lock): its bytes are free again,
        and the state it completes becomes `state`."""
        event = self._events.popleft()
        if self._sizes:
            self.queued_bytes -= self._sizes.popleft()
        if self._keep_state:
            self._taken += 1
            marks = self._marks
            while marks and marks[0].after <= self._taken:
                self.state = marks.popleft().state
        return event

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._wake()
        if self._detach is not None:
            self._detach(self)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def maxsize(self) -> int:
        """How many events it holds before its reader counts as lagging."""
        return self._maxsize

    @property
    def keeps_state(self) -> bool:
        return self._keep_state

    def _wake(self) -> None:
        self._cond.notify_all()
        waiters, self._async_waiters = self._async_waiters, []
        for calls, future in waiters:  # readers on one loop: one wake-up for all
            with contextlib.suppress(RuntimeError):  # the reader's loop is closed
                calls.call(_set_done, future)

    # -- the reader's side ---------------------------------------------------------
    def next(self, timeout: float = 10.0) -> ChatEvent:
        """The next event.

        Raises:
            TimeoutError: none within `timeout`.
            StopIteration: closed and drained.
        """
        current_runtime().before_wait(lambda: bool(self._events) or self._closed, timeout)
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._events) or self._closed, timeout):
                raise TimeoutError(f"no event within {timeout} s")
            if self._events:
                return self._took()
            raise StopIteration

    def next_nowait(self) -> ChatEvent | None:
        with self._cond:
            return self._took() if self._events else None

    def __iter__(self) -> Iterator[ChatEvent]:
        while True:
            try:
                yield self.next(timeout=3600.0)
            except StopIteration:
                return

    def __aiter__(self) -> AsyncIterator[ChatEvent]:
        return self._aiter()

    async def _aiter(self) -> AsyncIterator[ChatEvent]:
        loop = asyncio.get_running_loop()
        calls = LoopCalls.of(loop)
        while True:
            # One event at a time: an iterator dropped after any event (a server
            # channel reads the snapshot with one, then pumps with another) must
            # leave the rest queued, and the queue is what `maxsize` bounds.
            with self._cond:
                if self._events:
                    event = self._took()
                elif self._closed:
                    return
                else:
                    future: asyncio.Future[None] = loop.create_future()
                    self._async_waiters.append((calls, future))
                    event = None
            if event is None:
                await future
                continue
            yield event


def _fitting(sizes: list[int], room: int) -> int:
    """How many of the first `sizes` fit in `room` bytes."""
    for fit, size in enumerate(sizes):
        room -= size
        if room < 0:
            return fit
    return len(sizes)


def _set_done(future: "asyncio.Future[None]") -> None:
    if not future.done():
        future.set_result(None)


class Ticket:
    """A send's reply, written by the chat actor only."""

    def __init__(self, pending_id: str | None = None) -> None:
        self.pending_id = pending_id
        self.turn_id: str | None = None
        self.outcome: RuntimeFuture = RuntimeFuture()

    def started(self, turn_id: str) -> None:
        self.turn_id = turn_id

    def resolve(self, outcome: TurnOutcome) -> None:
        if not self.outcome.done():
            self.outcome.set(outcome)

    def fail(self, error: BaseException) -> None:
        if not self.outcome.done():
            self.outcome.set_exception(exc_info=(type(error), error, None))
