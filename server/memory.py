"""Memory a long-running server gives back once sessions left it.

A session's turns are freed when it leaves memory, but glibc's allocator keeps
what it freed in its arenas (texts of 100 KB are below its mmap threshold): a
soak of 300 users left a server at 2.8 GB with nothing resident, of which
`malloc_trim(0)` returned 1.6 GB (benchmarks/soak.py). So after sessions leave,
the server asks the allocator to trim, at most once every `every_s` seconds,
on a thread of its own (a trim of a large heap takes a while; ctypes lets the
GIL go meanwhile). Where there is no glibc (macOS, musl), nothing happens.
"""

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from agenthost.actors import collector

log = structlog.get_logger(__name__)

TRIM_EVERY_S = 30.0


class HeapTrimmer:
    """Trims the heap a while after sessions left memory (the server loop's own).

    `left()` says a session left; the trim follows `every_s` after the first
    departure not yet trimmed for, so a burst of departures costs one trim."""

    def __init__(
        self,
        every_s: float = TRIM_EVERY_S,
        trim: Callable[[], int] | None = None,
        later: Callable[[float, Callable[[], None]], Any] | None = None,
    ) -> None:
        """`trim`: the allocator's (default glibc's malloc_trim(0); None where there
        is none); `later(delay, fn)`: how to wait (default the running loop's)."""
        self.every_s = every_s
        self._trim = trim if trim is not None else collector.glibc_trim()
        self._later = later
        self._due: Any = None
        self.running: asyncio.Task[None] | None = None
        self.trims = 0

    def left(self) -> None:
        """A session left memory (on the server's loop)."""
        if self._trim is None or self._due is not None:
            return
        later = self._later or asyncio.get_running_loop().call_later
        self._due = later(self.every_s, self._start)

    def _start(self) -> None:
        self._due = None
        if self.running is None or self.running.done():
            self.running = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        assert self._trim is not None
        returned = await asyncio.to_thread(self._trim)
        self.trims += 1
        log.info("heap_trimmed", returned=bool(returned))

    def close(self) -> None:
        if self._due is not None:
            self._due.cancel()
            self._due = None
        if self.running is not None:
            self.running.cancel()
