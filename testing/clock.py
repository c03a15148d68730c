"""`FakeClock`: time that moves only when the test says so."""

import threading
from collections.abc import Callable

from agenthost.actors.clock import TimerHandle, TimerHeap


class FakeClock:
    """A clock that moves only when the test calls `advance`.

    Due timers fire on the calling thread, in due order, during `advance`.
    """

    def __init__(self, start: float = 0.0, wall_start_ms: int = 1_700_000_000_000) -> None:
        self._now = start
        self._wall_start_ms = wall_start_ms
        self._start = start
        self._timers = TimerHeap()
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._now

    def wall_ms(self) -> int:
        return self._wall_start_ms + round((self._now - self._start) * 1000)

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        handle = TimerHandle(self._now + max(delay, 0.0), callback)
        with self._lock:
            self._timers.push(handle)
        return handle

    def advance(self, seconds: float) -> None:
        """Move time forward and fire every timer that falls due, in order."""
        target = self._now + seconds
        while True:
            with self._lock:
                due = self._timers.next_due()
                if due is None or due > target:
                    break
                handle = self._timers.pop_due(due)
            if handle is not None:
                self._now = max(self._now, handle.due)
                handle.callback()
        self._now = target
