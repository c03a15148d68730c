"""After sessions leave memory the server asks the allocator to give back what
they freed: once a while after the first departure, however many follow."""

import asyncio
from collections.abc import Callable
from typing import Any

from agenthost.actors.collector import glibc_trim
from agenthost.server.memory import HeapTrimmer


class _Later:
    """Stands for the loop's call_later: the test fires what was scheduled."""

    def __init__(self) -> None:
        self.scheduled: list[tuple[float, Callable[[], None]]] = []

    def __call__(self, delay: float, fn: Callable[[], None]) -> Any:
        self.scheduled.append((delay, fn))
        return self

    def cancel(self) -> None:
        self.scheduled.clear()


def test_a_burst_of_departures_costs_one_trim_a_while_after_the_first() -> None:
    calls: list[int] = []
    later = _Later()

    async def main() -> None:
        trimmer = HeapTrimmer(every_s=30.0, trim=lambda: calls.append(1) or 1, later=later)
        for _ in range(50):
            trimmer.left()
        assert [delay for delay, _ in later.scheduled] == [30.0]  # one, for the burst
        assert calls == []
        later.scheduled.pop()[1]()
        assert trimmer.running is not None
        await trimmer.running
        assert calls == [1] and trimmer.trims == 1
        trimmer.left()  # a later departure: another trim, a while after it
        assert len(later.scheduled) == 1

    asyncio.run(main())


def test_without_an_allocator_to_trim_departures_schedule_nothing() -> None:
    later = _Later()
    trimmer = HeapTrimmer(trim=None, later=later)
    trimmer._trim = None  # as where there is no glibc
    trimmer.left()
    assert later.scheduled == []


def test_glibc_trim_runs_here() -> None:
    trim = glibc_trim()
    assert trim is not None  # this machine's Python runs on glibc
    assert trim() in (0, 1)
