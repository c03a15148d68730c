"""Helpers to read a subscription in tests."""

from collections.abc import Callable

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


def events_until(
    sub: Subscription, seen_enough: Callable[[ChatEvent], bool], timeout: float = 10.0
) -> list[ChatEvent]:
    """Every event up to and including the first one that `seen_enough` accepts."""
    seen: list[ChatEvent] = []
    while not seen or not seen_enough(seen[-1]):
        seen.append(sub.next(timeout))
    return seen


def drain_events(sub: Subscription, turns: int, timeout: float = 10.0) -> list[ChatEvent]:
    """Every event until the chat, as the events show it, holds `turns` finished
    turns, runs none and has no steering pending."""
    from agenthost.messages.events import ChatSnapshot
    from agenthost.messages.reducers import reduce_chat

    seen: list[ChatEvent] = []
    state = None
    while True:
        event = sub.next(timeout)
        seen.append(event)
        state = event.state if isinstance(event, ChatSnapshot) else reduce_chat(state, event)
        if len(state.turns) >= turns and state.active_turn is None and not state.steering_messages:
            return seen
