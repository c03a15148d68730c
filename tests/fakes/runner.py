"""Helpers to steer the deterministic runner in race tests."""

from collections.abc import Callable
from typing import Any

from agenthost.actors.protocol import ChatBatch, FromProvider
from agenthost.testing import Delivery, DeterministicRunner

Choose = Callable[[list[Delivery], list[int]], int | None]


def holding(blocked: Callable[[Delivery], bool]) -> Choose:
    """Deliver the oldest deliverable message that is not blocked."""

    def choose(pending: list[Delivery], deliverable: list[int]) -> int | None:
        return next((i for i in deliverable if not blocked(pending[i])), None)

    return choose


def delivered(runner: DeterministicRunner, test: Callable[[object], bool]) -> Callable[[], bool]:
    """A condition: some message delivered so far passes `test` (or, for a
    batch the tracker sent its chat, one of the batch's messages)."""
    return lambda: any(any(map(test, unbatched(d.message))) for d in runner.history)


def unbatched(message: object) -> tuple[object, ...]:
    """The messages a ChatBatch carries; any other message alone."""
    return message.messages if isinstance(message, ChatBatch) else (message,)


def from_provider(
    kind: type, where: Callable[[Any], bool] = lambda _event: True
) -> Callable[[object], bool]:
    """A message test: a burst of provider events holding a `kind` event that passes `where`."""

    def test(message: object) -> bool:
        return isinstance(message, FromProvider) and any(
            isinstance(event, kind) and where(event) for event in message.events
        )

    return test
