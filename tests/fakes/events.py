"""Helpers to read a subscription in tests."""

from agenthost.actors import Subscription
from agenthost.messages.events import TERMINAL_EVENTS, ChatEvent


def events_until_turn_end(
    sub: Subscription, turn_id: str, timeout: float = 10.0
) -> list[ChatEvent]:
    """Every event up to and including the end of `turn_id`."""
    seen: list[ChatEvent] = []
    while True:
        event = sub.next(timeout)
        seen.append(event)
        if isinstance(event, TERMINAL_EVENTS) and event.turn_id == turn_id:
            return seen
