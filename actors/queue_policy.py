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

And what a turn started from a pending message says it came from
(`started_from`, its message's origin; DESIGN.md's origins):
5. A turn started from steering, whatever way (consumed as a turn of its
   own, held and run next, sent while idle, requeued after its provider was
   lost), is `steering`; a turn started from the queue (a queued message, or
   one set as queued while the chat was idle) is `queued`; a turn started
   directly keeps its message's own origin (`user`). AHP's origin kinds name
   who wrote a message and have no queued kind, and AHP marks a turn's start
   from a pending message only in the turnStarted action (queuedMessageId),
   which a stored turn does not keep: the origin is where the turn says so.
"""

import enum

import attrs

from agenthost.messages.state import (
    ChatState,
    MessageOrigin,
    OriginKind,
    PendingKind,
    UserMessage,
)

STEERING = MessageOrigin(kind=OriginKind.STEERING)
QUEUED = MessageOrigin(kind=OriginKind.QUEUED)


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


def started_from(kind: PendingKind, message: UserMessage) -> UserMessage:
    """The message of a turn started from a pending message of `kind` (rule 5):
    steering stays steering, even once requeued (its message then says so)."""
    steering = kind is PendingKind.STEERING or message.origin.kind is OriginKind.STEERING
    origin = STEERING if steering else QUEUED
    if message.origin == origin:
        return message
    return attrs.evolve(message, origin=origin)
