"""Helpers to steer the deterministic runner in race tests."""

from collections.abc import Callable

from agenthost.actors import DeterministicRunner
from agenthost.actors.runtime import Delivery

Choose = Callable[[list[Delivery], list[int]], int | None]


def holding(blocked: Callable[[Delivery], bool]) -> Choose:
    """Deliver the oldest deliverable message that is not blocked."""

    def choose(pending: list[Delivery], deliverable: list[int]) -> int | None:
        return next((i for i in deliverable if not blocked(pending[i])), None)

    return choose


def delivered(runner: DeterministicRunner, test: Callable[[object], bool]) -> Callable[[], bool]:
    """A condition: some message delivered so far passes `test`."""
    return lambda: any(test(d.message) for d in runner.history)
