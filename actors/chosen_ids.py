"""Ids a client chooses for a chat's turns and pending messages, and what a
turn id names there: plain functions over a chat's state (ChatActor's thread).

Invariants:
1. A chosen id is new to its chat: no turn, active turn, pending message or
   queued message's chosen turn id of the chat has it. Nothing else needs
   checking: the store keys turns and pending messages by chat and id
   (migration 0011), so ids of other chats never meet it, and the check costs
   no store read (the chat holds every turn it has).
2. A turn id chosen for a send while the chat is busy stays with its queued
   message (`PendingMessage.turn_id`) and is the id its turn runs under.
3. A cancel naming a turn says what it did or why it could not: the running
   turn is cancelled, a queued one is removed before it runs, anything else is
   refused with the reason (ended, another turn runs, unknown).
"""

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.state import ChatState, PendingMessage


def check_new_ids(state: ChatState, *ids: str | None) -> None:
    """Refuse ids the client chose (None: not chosen) that are empty or in use.

    Raises:
        AgentHostError: INVALID_ARGUMENT naming the id.
    """
    for chosen in ids:
        if chosen is None:
            continue
        taken = (
            not chosen
            or chosen == state.active_turn_id
            or any(m.id == chosen or m.turn_id == chosen for m in state.pending)
            or any(t.id == chosen for t in state.turns)
        )
        if taken:
            raise AgentHostError(
                code=ErrorCode.INVALID_ARGUMENT,
                message=f"id {chosen!r} is empty or in use in this chat",
            )


def queued_turn(state: ChatState, turn_id: str) -> PendingMessage | None:
    """The queued message whose turn will run as `turn_id`, if one waits."""
    return next((m for m in state.queued_messages if m.turn_id == turn_id), None)


def not_cancellable(state: ChatState, turn_id: str) -> AgentHostError:
    """Why a cancel naming `turn_id` cannot apply (it neither runs nor waits)."""
    ended = next((t for t in state.turns if t.id == turn_id), None)
    if ended is not None:
        reason = f"turn {turn_id} already ended ({ended.state.value})"
    elif state.active_turn_id is not None:
        reason = f"turn {turn_id} is not running (turn {state.active_turn_id} is)"
    else:
        reason = f"turn {turn_id} is neither running nor queued"
    return AgentHostError(code=ErrorCode.NOT_FOUND, message=reason)
