"""Which pending message runs next: a pure function of the chat state and the
queue drain's bookkeeping (tests/actors/test_queue_policy.py has a test per rule).

The rules, in order:
1. Nothing starts while a turn runs.
2. Held steering (a provider that takes no input mid-turn) runs first, each
   message as a turn of its own, oldest first.
3. Nothing queued starts while the provider has (or is being handed) steering:
   that runs first, or comes back to the queue.
4. The head of the queue starts, unless the queue is held: after a turn that
   ended without success (an error, a cancel, a lost provider), and after a
   restart, nothing queued starts on its own; the next successful turn
   releases it. Steering a lost provider had is requeued at the head, and
   waits the same way.
"""

import enum

import attrs

from agenthost.messages.state import ChatState


class NextKind(enum.Enum):
    HELD_STEERING = "held_steering"
    QUEUED = "queued"


@attrs.frozen
class Next:
    kind: NextKind
    pending_id: str


def next_to_run(
    state: ChatState,
    *,
    held_steering: tuple[str, ...],
    steering_on_provider: bool,
    queue_held: bool,
) -> Next | None:
    """The pending message to start now, or None (see the module docstring)."""
    if state.active_turn is not None:
        return None
    if held_steering:
        return Next(NextKind.HELD_STEERING, held_steering[0])
    if steering_on_provider:
        return None
    if state.queued_messages and not queue_held:
        return Next(NextKind.QUEUED, state.queued_messages[0].id)
    return None
