"""Watching an asyncio loop's wake-ups from another thread."""

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any


class HeldLoop:
    """A loop kept busy by a call that waits for `release()`; `wakeups` counts
    the `call_soon_threadsafe` calls (self-pipe writes) made meanwhile."""

    def __init__(self) -> None:
        self.wakeups = 0
        self._gate = threading.Event()

    def release(self) -> None:
        self._gate.set()


@contextlib.contextmanager
def held(loop: asyncio.AbstractEventLoop, timeout: float = 10.0) -> Iterator[HeldLoop]:
    """Hold `loop` busy (what arrives meanwhile waits) and count its wake-ups;
    the loop is released on exit at the latest."""
    held_loop = HeldLoop()
    entered = threading.Event()

    def hold() -> None:
        entered.set()
        held_loop._gate.wait(timeout)

    loop.call_soon_threadsafe(hold)
    assert entered.wait(timeout), "the loop never ran the hold"
    original = loop.call_soon_threadsafe

    def counting(*args: Any) -> Any:
        held_loop.wakeups += 1
        return original(*args)

    loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
    try:
        yield held_loop
    finally:
        loop.call_soon_threadsafe = original  # type: ignore[method-assign]
        held_loop.release()
