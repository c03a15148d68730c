"""queue_drain (200): the bridge to the chat's QueueDrainActor.

A turn that ends while messages are pending is reported to the queue drain:
a success releases a held queue, any other end of a turn holds it (a local
command or a refused request changes nothing). After a success, or a local
command, the queue drain also drains: not while a turn runs, and not when
the last turn ended in a resumable error (the user may resume it first).
The QueueDrainActor decides what runs (actors/queue_policy.py). Each queued
message's sender is remembered (a chat memento), so a drained message is
admitted as its sender's.
"""

from agenthost.actors.contributions.base import (
    ChatKey,
    ClientAction,
    Contribution,
    Dispatch,
    TurnEnd,
    TurnEndReason,
)
from agenthost.actors.contributions.services import Chats, MementoCache, Mementos
from agenthost.messages.events import PendingMessageAdded, PendingMessageRemoved, TurnStarted
from agenthost.messages.state import PendingKind, Turn, TurnState

ID = "queue_drain"
DRAINS_AFTER = (TurnEndReason.SUCCESS, TurnEndReason.LOCAL_COMMAND)


def sender_of(cache: MementoCache, chat: ChatKey, pending_id: str) -> str | None:
    """The client that queued `pending_id` (None: unknown, or the embedding program)."""
    sender = cache.get(ID, chat, ("sender", pending_id))
    return sender if isinstance(sender, str) else None


def _resumable_error(turn: Turn) -> bool:
    return turn.state is TurnState.ERROR and turn.error is not None and turn.error.resumable


class QueueDrain(Contribution):
    id = ID
    order = 200
    description = "Runs queued messages one after another."
    required = "queued messages would never run without it"
    observes = (PendingMessageRemoved, TurnStarted)
    applies = (PendingMessageAdded,)

    def __init__(self, mementos: Mementos, chats: Chats) -> None:
        self._mementos = mementos
        self._chats = chats

    def on_turn_end(self, end: TurnEnd) -> None:
        state = end.state
        if not state.pending:
            return  # (the hot path: nothing to tell)
        succeeded: bool | None = None  # a local command or a refusal: unchanged
        if end.reason is TurnEndReason.SUCCESS:
            succeeded = True
        elif end.reason not in (TurnEndReason.LOCAL_COMMAND, TurnEndReason.REJECTED):
            succeeded = False
        drain = (
            end.reason in DRAINS_AFTER
            and state.active_turn is None
            and not (state.turns and _resumable_error(state.turns[-1]))
        )
        self._chats.turn_ended(end.chat, state, succeeded=succeeded, drain=drain)

    def on_did_apply_client_action(self, applied: ClientAction) -> None:
        match applied.action:
            case PendingMessageAdded(pending=pending) if pending.kind is PendingKind.QUEUED:
                if applied.client_id is not None:
                    self._mementos.set(applied.chat, "sender", pending.id, value=applied.client_id)

    def on_did_dispatch_action(self, dispatch: Dispatch) -> None:
        match dispatch.action:
            case PendingMessageRemoved(kind=PendingKind.QUEUED, pending_id=pending_id):
                self._forget(dispatch.chat, pending_id)
            case TurnStarted(queued_message_id=str(pending_id)):
                self._forget(dispatch.chat, pending_id)

    def _forget(self, chat: ChatKey, pending_id: str) -> None:
        if self._mementos.get(chat, "sender", pending_id) is not None:
            self._mementos.delete_memento(chat, "sender", pending_id)
