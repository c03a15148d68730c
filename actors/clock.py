"""Injectable time: `SystemClock` for real use (`agenthost.testing.FakeClock` for tests).

No actor reads the wall clock or sleeps; it asks its clock. Timer callbacks
must not block: they only `tell` an actor.
"""

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle:
    """A scheduled callback; `cancel()` is idempotent and thread-safe."""

    __slots__ = ("_cancelled", "callback", "due")

    def __init__(self, due: float, callback: Callable[[], None]) -> None:
        self.due = due
        self.callback = callback
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True

    @property
    def cancelled(self) -> bool:
        return self._cancelled


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def wall_ms(self) -> int:
        """Milliseconds since the epoch, for timestamps in state."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle: ...


class TimerHeap:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._seq = itertools.count()

    def push(self, handle: TimerHandle) -> None:
        heapq.heappush(self._heap, (handle.due, next(self._seq), handle))

    def pop_due(self, now: float) -> TimerHandle | None:
        while self._heap and self._heap[0][0] <= now:
            handle = heapq.heappop(self._heap)[2]
            if not handle.cancelled:
                return handle
        return None

    def next_due(self) -> float | None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None


class SystemClock:
    """Real time; timers run on one daemon thread that only calls callbacks."""

    def __init__(self) -> None:
        self._timers = TimerHeap()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def stop(self) -> None:
        """Drop every pending timer and end the timer thread (the host that
        made this clock stopped); later timers never fire."""
        with self._cond:
            self._stopped = True
            self._timers = TimerHeap()
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)

    def now(self) -> float:
        return time.monotonic()

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        handle = TimerHandle(self.now() + max(delay, 0.0), callback)
        with self._cond:
            if self._stopped:
                handle.cancel()
                return handle
            earliest = self._timers.next_due()
            self._timers.push(handle)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="agenthost-clock", daemon=True
                )
                self._thread.start()
            # The timer thread sleeps until the earliest timer: wake it only when
            # this one comes sooner (an idle timer reset on every turn must not
            # wake it each time).
            if earliest is None or handle.due < earliest:
                self._cond.notify()
        return handle

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                handle = self._timers.pop_due(self.now())
                if handle is None:
                    due = self._timers.next_due()
                    self._cond.wait(None if due is None else max(due - self.now(), 0.0))
                    continue
            handle.callback()
