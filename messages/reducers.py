"""The pure reducers: `reduce(state, action, now_ms=...) -> state`.

The chat reducer is AHP's chat reducer over our frozen types. It is where the
chat's invariants live, and it never raises on a well-typed action:
- a terminal action (complete, cancelled, error) whose turn id is not the
  active turn's is a no-op, so every turn ends exactly once (DESIGN.md rule 2);
- a turn start taken from a pending message removes that message from the
  steering list and the queue;
- unknown actions are no-ops.
"""

import functools
from collections.abc import Callable
from typing import Any

import attrs

from agenthost.messages.errors import AgentHostError
from agenthost.messages.events import (
    AssistantDelta,
    ChatEvent,
    PendingMessageAdded,
    PendingMessageRemoved,
    QueuedMessagesReordered,
    ResponsePartAdded,
    SteeringRecorded,
    Truncated,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
    UsageReported,
)
from agenthost.messages.state import (
    ActiveTurn,
    ChatState,
    ChatStatus,
    MarkdownPart,
    PendingKind,
    PendingMessage,
    Turn,
    TurnState,
)

ChatReducer = Callable[[ChatState, Any, int], ChatState]
_CHAT_REDUCERS: dict[type, ChatReducer] = {}


def _handles(action_type: type) -> Callable[[ChatReducer], ChatReducer]:
    def register(fn: ChatReducer) -> ChatReducer:
        _CHAT_REDUCERS[action_type] = fn
        return fn

    return register


def reduce_chat(state: ChatState, action: ChatEvent, now_ms: int = 0) -> ChatState:
    """Apply one chat action. Unknown actions leave the state as it is."""
    reducer = _CHAT_REDUCERS.get(type(action))
    return state if reducer is None else reducer(state, action, now_ms)


@functools.singledispatch
def reduce(state: object, action: ChatEvent, now_ms: int = 0) -> object:
    """Reduce any state value by the reducer for its type."""
    raise TypeError(f"no reducer for {type(state).__name__}")


reduce.register(ChatState, reduce_chat)


@_handles(TurnStarted)
def _turn_started(state: ChatState, action: TurnStarted, now_ms: int) -> ChatState:
    if state.active_turn is not None and state.active_turn.id == action.turn_id:
        return state  # idempotent per turn id
    steering = state.steering_messages
    queued = state.queued_messages
    if action.queued_message_id is not None:
        steering = tuple(m for m in steering if m.id != action.queued_message_id)
        queued = tuple(m for m in queued if m.id != action.queued_message_id)
    return attrs.evolve(
        state,
        active_turn=ActiveTurn(id=action.turn_id, message=action.message),
        steering_messages=steering,
        queued_messages=queued,
        status=ChatStatus.IN_PROGRESS,
        modified_at=now_ms,
    )


def _with_active(state: ChatState, turn_id: str, **changes: Any) -> ChatState:
    active = state.active_turn
    if active is None or active.id != turn_id:
        return state
    return attrs.evolve(state, active_turn=attrs.evolve(active, **changes))


@_handles(ResponsePartAdded)
def _response_part(state: ChatState, action: ResponsePartAdded, now_ms: int) -> ChatState:
    active = state.active_turn
    if active is None or active.id != action.turn_id:
        return state
    return _with_active(state, action.turn_id, response_parts=(*active.response_parts, action.part))


@_handles(AssistantDelta)
def _delta(state: ChatState, action: AssistantDelta, now_ms: int) -> ChatState:
    active = state.active_turn
    if active is None or active.id != action.turn_id:
        return state
    parts = tuple(
        attrs.evolve(part, content=part.content + action.text)
        if part.id == action.part_id and isinstance(part, MarkdownPart)
        else part
        for part in active.response_parts
    )
    return _with_active(state, action.turn_id, response_parts=parts)


@_handles(UsageReported)
def _usage(state: ChatState, action: UsageReported, now_ms: int) -> ChatState:
    return _with_active(state, action.turn_id, usage=action.usage)


def _end_turn(
    state: ChatState,
    turn_id: str,
    turn_state: TurnState,
    now_ms: int,
    error: AgentHostError | None = None,
) -> ChatState:
    active = state.active_turn
    if active is None or active.id != turn_id:
        return state
    turn = Turn(
        id=active.id,
        message=active.message,
        response_parts=active.response_parts,
        usage=active.usage,
        steering=active.steering,
        state=turn_state,
        error=error,
    )
    return attrs.evolve(
        state,
        turns=(*state.turns, turn),
        active_turn=None,
        status=ChatStatus.ERROR if turn_state is TurnState.ERROR else ChatStatus.IDLE,
        modified_at=now_ms,
    )


@_handles(TurnCompleted)
def _complete(state: ChatState, action: TurnCompleted, now_ms: int) -> ChatState:
    return _end_turn(state, action.turn_id, TurnState.COMPLETE, now_ms)


@_handles(TurnCancelled)
def _cancelled(state: ChatState, action: TurnCancelled, now_ms: int) -> ChatState:
    return _end_turn(state, action.turn_id, TurnState.CANCELLED, now_ms)


@_handles(TurnFailed)
def _failed(state: ChatState, action: TurnFailed, now_ms: int) -> ChatState:
    return _end_turn(state, action.turn_id, TurnState.ERROR, now_ms, action.error)


def _pending_of(state: ChatState, kind: PendingKind) -> tuple[PendingMessage, ...]:
    return state.steering_messages if kind is PendingKind.STEERING else state.queued_messages


def _with_pending(
    state: ChatState, kind: PendingKind, messages: tuple[PendingMessage, ...]
) -> ChatState:
    if kind is PendingKind.STEERING:
        return attrs.evolve(state, steering_messages=messages)
    return attrs.evolve(state, queued_messages=messages)


@_handles(PendingMessageAdded)
def _pending_set(state: ChatState, action: PendingMessageAdded, now_ms: int) -> ChatState:
    """Upsert: an existing id is replaced in place, a new one appended."""
    pending = action.pending
    current = _pending_of(state, pending.kind)
    if any(m.id == pending.id for m in current):
        return _with_pending(
            state, pending.kind, tuple(pending if m.id == pending.id else m for m in current)
        )
    return _with_pending(state, pending.kind, (*current, pending))


@_handles(PendingMessageRemoved)
def _pending_removed(state: ChatState, action: PendingMessageRemoved, now_ms: int) -> ChatState:
    current = _pending_of(state, action.kind)
    kept = tuple(m for m in current if m.id != action.pending_id)
    return state if len(kept) == len(current) else _with_pending(state, action.kind, kept)


@_handles(QueuedMessagesReordered)
def _reordered(state: ChatState, action: QueuedMessagesReordered, now_ms: int) -> ChatState:
    """Listed ids first, in the listed order; the rest keep theirs. Unknown and
    repeated ids are ignored."""
    by_id = {m.id: m for m in state.queued_messages}
    first: list[PendingMessage] = []
    for pending_id in action.order:
        message = by_id.pop(pending_id, None)
        if message is not None:
            first.append(message)
    rest = [m for m in state.queued_messages if m.id in by_id]
    return attrs.evolve(state, queued_messages=(*first, *rest))


@_handles(SteeringRecorded)
def _steering_recorded(state: ChatState, action: SteeringRecorded, now_ms: int) -> ChatState:
    """A steering message the provider folded into the running turn leaves pending
    and is recorded in that turn, once."""
    active = state.active_turn
    if active is None or active.id != action.turn_id:
        return state
    if any(m.id == action.pending.id for m in active.steering):
        return state
    steering = tuple(m for m in state.steering_messages if m.id != action.pending.id)
    return attrs.evolve(
        state,
        steering_messages=steering,
        active_turn=attrs.evolve(active, steering=(*active.steering, action.pending)),
    )


@_handles(Truncated)
def _truncated(state: ChatState, action: Truncated, now_ms: int) -> ChatState:
    if action.turn_id is None:
        turns: tuple[Turn, ...] = ()
    else:
        ids = [t.id for t in state.turns]
        if action.turn_id not in ids:
            return state
        turns = state.turns[: ids.index(action.turn_id) + 1]
    return attrs.evolve(
        state, turns=turns, active_turn=None, status=ChatStatus.IDLE, modified_at=now_ms
    )
