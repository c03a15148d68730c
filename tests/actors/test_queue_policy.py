"""actors/queue_policy.py: which pending message runs next, a test per rule."""

import attrs

from agenthost.actors.queue_policy import Next, NextKind, next_to_run
from agenthost.messages.state import (
    ActiveTurn,
    ChatState,
    PendingKind,
    PendingMessage,
    UserMessage,
)


def queued(*ids: str) -> tuple[PendingMessage, ...]:
    return tuple(
        PendingMessage(id=i, kind=PendingKind.QUEUED, message=UserMessage(text=i)) for i in ids
    )


IDLE = ChatState(resource="r", queued_messages=queued("q1", "q2"))
BUSY = attrs.evolve(IDLE, active_turn=ActiveTurn(id="t", message=UserMessage(text="t")))


def choose(
    state: ChatState,
    held_steering: tuple[str, ...] = (),
    steering_on_provider: bool = False,
    queue_held: bool = False,
) -> Next | None:
    return next_to_run(
        state,
        held_steering=held_steering,
        steering_on_provider=steering_on_provider,
        queue_held=queue_held,
    )


def test_rule_1_nothing_starts_while_a_turn_runs() -> None:
    assert choose(BUSY) is None
    assert choose(BUSY, held_steering=("s",)) is None


def test_rule_2_held_steering_runs_first_oldest_first() -> None:
    assert choose(IDLE, held_steering=("s1", "s2")) == Next(NextKind.HELD_STEERING, "s1")
    # even when the queue is held or the provider has steering of its own
    assert choose(IDLE, ("s1",), steering_on_provider=True, queue_held=True) == Next(
        NextKind.HELD_STEERING, "s1"
    )


def test_rule_3_nothing_queued_starts_while_the_provider_has_steering() -> None:
    assert choose(IDLE, steering_on_provider=True) is None


def test_rule_4_the_head_of_the_queue_starts_unless_the_queue_is_held() -> None:
    assert choose(IDLE) == Next(NextKind.QUEUED, "q1")
    assert choose(IDLE, queue_held=True) is None


def test_nothing_pending_nothing_runs() -> None:
    assert choose(ChatState(resource="r")) is None
