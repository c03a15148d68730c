"""Timeouts for the futures an asyncio client awaits, one timer per tick.

`asyncio.timeout` arms a timer (and a context manager, and a cancel of the
task) per wait; a client awaiting thousands of replies a second paid for
each. Here a wait joins the bucket of its deadline, rounded up to the next
tick (50 ms), and one timer per bucket fails whatever is still waiting in it
with TimeoutError. A wait that ends in time leaves its bucket.
"""

import asyncio
import math
import weakref
from typing import Any

TICK_S = 0.05


class Deadlines:
    """The deadlines of one event loop (use it on that loop's thread only)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)  # the registry below is keyed by it: no cycle
        self._buckets: dict[int, set[asyncio.Future[Any]]] = {}

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> "Deadlines":
        deadlines = _per_loop.get(loop)
        if deadlines is None:
            deadlines = _per_loop[loop] = cls(loop)
        return deadlines

    def add(self, future: "asyncio.Future[Any]", timeout: float) -> set["asyncio.Future[Any]"]:
        """Fail `future` with TimeoutError if it is still pending `timeout` seconds
        from now (up to one tick later). Returns its bucket: discard it from there
        once it is done."""
        loop = self._loop()
        assert loop is not None  # it is running this call
        tick = math.ceil((loop.time() + timeout) / TICK_S)
        bucket = self._buckets.get(tick)
        if bucket is None:
            bucket = self._buckets[tick] = set()
            loop.call_at(tick * TICK_S, self._expire, tick)
        bucket.add(future)
        return bucket

    def _expire(self, tick: int) -> None:
        for future in self._buckets.pop(tick, ()):
            if not future.done():
                future.set_exception(TimeoutError())


_per_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Deadlines]" = (
    weakref.WeakKeyDictionary()
)
