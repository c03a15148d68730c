"""The pure reducers: `reduce(state, action, now_ms=...) -> state`.

The chat reducer is AHP's chat reducer over our frozen types. It is where the
chat's invariants live, and it never raises on a well-typed action:
- a terminal action (complete, cancelled, error) whose turn id is not the
  active turn's is a no-op, so every turn ends exactly once (DESIGN.md rule 2);
- a turn start taken from a pending message removes that message from the
  steering list and the queue;
- tool calls follow one state machine: streaming -> pending-confirmation or
  running; running -> pending-confirmation (a re-check); approved -> running;
  denied -> cancelled(denied); complete -> completed, or
  pending-result-confirmation -> completed / cancelled(result-denied). An
  action that does not fit the call's status is a no-op;
- a turn's end cancels (skipped) every tool call not in a terminal state and
  closes its open requests; a cancelled call keeps only what AHP's cancelled
  state has (no confirmation, no result);
- the status's activity bits are input-needed while a request is open or a
  tool call waits for the user, else in-progress during a turn, else idle or
  error; its flags (IsRead, IsArchived, unknown bits) are kept, except that
  a turn start clears IsRead;
- unknown actions are no-ops.
"""

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs
from attrs import AttrsInstance

from agenthost.messages.errors import AgentHostError
from agenthost.messages.events import (
    ActiveClientRemoved,
    ActiveClientSet,
    AssistantDelta,
    ChatAdded,
    ChatEvent,
    ChatRemoved,
    ChatTitleChanged,
    ChatUpdated,
    ConfigChanged,
    DefaultChatChanged,
    DraftChanged,
    InputNeededRemoved,
    InputNeededSet,
    IsArchivedChanged,
    IsReadChanged,
    PendingMessageAdded,
    PendingMessageRemoved,
    QueuedMessagesReordered,
    ReasoningDelta,
    RequestClosed,
    RequestOpened,
    ResponsePartAdded,
    SessionCreationFailed,
    SessionEvent,
    SessionReady,
    SessionTitleChanged,
    SteeringRecorded,
    ToolCallCompleted,
    ToolCallConfirmed,
    ToolCallContentChanged,
    ToolCallDelta,
    ToolCallReady,
    ToolCallResultConfirmed,
    ToolCallStarted,
    ToolCallSubagentStarted,
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
    ChatSummary,
    MarkdownPart,
    PendingKind,
    PendingMessage,
    ReasoningPart,
    ResponsePart,
    SessionLifecycle,
    SessionState,
    ToolCall,
    ToolCallPart,
    ToolCallStatus,
    Turn,
    TurnState,
    with_activity,
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


@_handles(DraftChanged)
def _draft(state: ChatState, action: DraftChanged, now_ms: int) -> ChatState:
    return attrs.evolve(state, draft=action.draft or None, modified_at=now_ms)


@_handles(ChatTitleChanged)
def _chat_title(state: ChatState, action: ChatTitleChanged, now_ms: int) -> ChatState:
    return attrs.evolve(state, title=action.title, modified_at=now_ms)


def reduce_session(state: SessionState, action: SessionEvent, now_ms: int = 0) -> SessionState:
    """The session reducer: a derived title only fills an empty one; input
    needed is a set of chats; unknown actions are no-ops."""
    match action:
        case SessionTitleChanged(title=title, by_user=by_user):
            if not by_user and (state.user_titled or state.title):
                return state  # a derived title is the first one, and never the user's
            return attrs.evolve(state, title=title, user_titled=state.user_titled or by_user)
        case IsReadChanged(read=read):
            return attrs.evolve(state, read=read)
        case IsArchivedChanged(archived=archived):
            return attrs.evolve(state, archived=archived)
        case ConfigChanged(config=changes):
            config = dict(state.config)
            for key, value in changes:
                if value:
                    config[key] = value
                else:
                    config.pop(key, None)
            return attrs.evolve(state, config=tuple(sorted(config.items())))
        case InputNeededSet(chat_id=chat_id) if chat_id not in state.input_needed:
            return attrs.evolve(state, input_needed=(*state.input_needed, chat_id))
        case InputNeededRemoved(chat_id=chat_id):
            return attrs.evolve(
                state, input_needed=tuple(c for c in state.input_needed if c != chat_id)
            )
        case SessionReady():
            return attrs.evolve(state, lifecycle=SessionLifecycle.READY)
        case SessionCreationFailed(error=error):
            return attrs.evolve(state, lifecycle=SessionLifecycle.FAILED, creation_error=error)
        case ChatAdded(summary=summary):
            others = tuple(c for c in state.chats if c.resource != summary.resource)
            if len(others) == len(state.chats):
                return attrs.evolve(state, chats=(*state.chats, summary))
            chats = tuple(summary if c.resource == summary.resource else c for c in state.chats)
            return attrs.evolve(state, chats=chats)
        case ChatRemoved(chat=chat):
            return attrs.evolve(state, chats=tuple(c for c in state.chats if c.resource != chat))
        case ChatUpdated(chat=chat):
            chats = tuple(
                _chat_summary_updated(c, action) if c.resource == chat else c for c in state.chats
            )
            return attrs.evolve(state, chats=chats)
        case DefaultChatChanged(default_chat=default_chat):
            return attrs.evolve(state, default_chat=default_chat)
        case ActiveClientSet(active_client=client):
            if any(c.client_id == client.client_id for c in state.active_clients):
                clients = tuple(
                    client if c.client_id == client.client_id else c for c in state.active_clients
                )
                return attrs.evolve(state, active_clients=clients)
            return attrs.evolve(state, active_clients=(*state.active_clients, client))
        case ActiveClientRemoved(client_id=client_id):
            clients = tuple(c for c in state.active_clients if c.client_id != client_id)
            return attrs.evolve(state, active_clients=clients)
    return state


reduce.register(SessionState, reduce_session)


def _chat_summary_updated(summary: ChatSummary, action: ChatUpdated) -> ChatSummary:
    """The fields the action carries replace the summary's; the rest stay."""
    return attrs.evolve(
        summary,
        title=summary.title if action.title is None else action.title,
        status=summary.status if action.status is None else action.status,
        modified_at=summary.modified_at if action.modified_at is None else action.modified_at,
    )


@_handles(TurnStarted)
def _turn_started(state: ChatState, action: TurnStarted, now_ms: int) -> ChatState:
    if state.active_turn is not None and state.active_turn.id == action.turn_id:
        return state  # idempotent per turn id
    steering = state.steering_messages
    queued = state.queued_messages
    slot = state.steering_message
    if action.queued_message_id is not None:
        steering = tuple(m for m in steering if m.id != action.queued_message_id)
        queued = tuple(m for m in queued if m.id != action.queued_message_id)
        if slot is not None and slot.id == action.queued_message_id:
            slot = None
    return attrs.evolve(
        state,
        active_turn=ActiveTurn(
            id=action.turn_id, message=action.message, started_at=action.started_at
        ),
        steering_messages=steering,
        queued_messages=queued,
        steering_message=slot,
        status=with_activity(state.status, ChatStatus.IN_PROGRESS, read=False),
        modified_at=now_ms,
    )


def _with_active(state: ChatState, turn_id: str, **changes: Any) -> ChatState:
    active = state.active_turn
    if active is None or active.id != turn_id:
        return state
    return _replace(state, active_turn=_replace(active, **changes))


T = TypeVar("T", bound=AttrsInstance)
_Layout = tuple[tuple[str, ...], frozenset[str]]
_LAYOUTS: dict[type, _Layout] = {}


def _replace(value: T, **changes: Any) -> T:
    """`attrs.evolve` for the streaming path (three per delta): the unchanged
    fields are copied as they are, without attrs' per-call field lookup. A
    change to a field with a validator or converter goes through evolve."""
    cls = type(value)
    layout = _LAYOUTS.get(cls)
    if layout is None:
        fields = attrs.fields(cls)
        names = tuple(f.name for f in fields)
        checked = frozenset(f.name for f in fields if f.validator or f.converter)
        if not all(f.init for f in fields):  # evolve resets those: always take its path
            checked = frozenset(names)
        layout = _LAYOUTS[cls] = (names, checked)
    names, checked = layout
    if not checked.isdisjoint(changes):
        return attrs.evolve(value, **changes)  # type: ignore[misc]  # the plugin wants a class
    copy = object.__new__(cls)
    for name in names:
        object.__setattr__(copy, name, changes[name] if name in changes else getattr(value, name))
    return copy


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
        _replace(part, content=part.content + action.text)
        if part.id == action.part_id and isinstance(part, MarkdownPart)
        else part
        for part in active.response_parts
    )
    return _with_active(state, action.turn_id, response_parts=parts)


def delta_runs(actions: Sequence[ChatEvent]) -> list[list[ChatEvent]]:
    """`actions` cut into runs: consecutive deltas to one part form a run, any
    other action is a run of its own. Reducing a run's `joined_delta` gives the
    state reducing its deltas one by one would (text appends)."""
    runs: list[list[ChatEvent]] = []
    for action in actions:
        last = runs[-1][-1] if runs else None
        if (
            type(action) is AssistantDelta
            and type(last) is AssistantDelta
            and (action.turn_id, action.part_id) == (last.turn_id, last.part_id)
        ):
            runs[-1].append(action)
        else:
            runs.append([action])
    return runs


def joined_delta(run: Sequence[AssistantDelta]) -> AssistantDelta:
    """One delta carrying a run's text."""
    return attrs.evolve(run[0], text="".join(delta.text for delta in run))


@_handles(ReasoningDelta)
def _reasoning(state: ChatState, action: ReasoningDelta, now_ms: int) -> ChatState:
    active = state.active_turn
    if active is None or active.id != action.turn_id:
        return state
    parts = tuple(
        attrs.evolve(part, content=part.content + action.content)
        if part.id == action.part_id and isinstance(part, ReasoningPart)
        else part
        for part in active.response_parts
    )
    return _with_active(state, action.turn_id, response_parts=parts)


@_handles(UsageReported)
def _usage(state: ChatState, action: UsageReported, now_ms: int) -> ChatState:
    return _with_active(state, action.turn_id, usage=action.usage)


def _cancel_call(call: ToolCall, reason: str, **changes: Any) -> ToolCall:
    """The call cancelled: AHP's cancelled state has its invocation and input,
    and no confirmation or result."""
    return attrs.evolve(
        call,
        status=ToolCallStatus.CANCELLED,
        reason=reason,
        confirmed=None,
        success=None,
        past_tense_message=None,
        partial_input=None,
        content=None,
        structured_content=None,
        error=None,
        **changes,
    )


def _skip_unfinished(parts: tuple[ResponsePart, ...]) -> tuple[ResponsePart, ...]:
    return tuple(
        attrs.evolve(part, tool_call=_cancel_call(part.tool_call, "skipped"))
        if isinstance(part, ToolCallPart) and not part.tool_call.status.terminal
        else part
        for part in parts
    )


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
        response_parts=_skip_unfinished(active.response_parts),
        usage=active.usage,
        steering=active.steering,
        state=turn_state,
        error=error,
        started_at=active.started_at,
    )
    activity = ChatStatus.ERROR if turn_state is TurnState.ERROR else ChatStatus.IDLE
    return attrs.evolve(
        state,
        turns=(*state.turns, turn),
        active_turn=None,
        open_requests=tuple(r for r in state.open_requests if r.turn_id != turn_id),
        status=with_activity(state.status, activity),
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
    slot = state.steering_message
    if action.kind is PendingKind.STEERING and slot is not None and slot.id == action.pending_id:
        state = attrs.evolve(state, steering_message=None)
    current = _pending_of(state, action.kind)
    kept = tuple(m for m in current if m.id != action.pending_id)
    return state if len(kept) == len(current) else _with_pending(state, action.kind, kept)


def _with_status(state: ChatState) -> ChatState:
    """In progress, or input-needed while the user is waited on."""
    active = state.active_turn
    if active is None:
        return state
    waiting = bool(state.open_requests) or any(
        isinstance(p, ToolCallPart) and p.tool_call.status.waits_for_user
        for p in active.response_parts
    )
    status = with_activity(
        state.status, ChatStatus.INPUT_NEEDED if waiting else ChatStatus.IN_PROGRESS
    )
    return state if state.status is status else attrs.evolve(state, status=status)


def _update_tool(
    state: ChatState, turn_id: str, tool_call_id: str, change: Callable[[ToolCall], ToolCall | None]
) -> ChatState:
    """Apply `change` to one tool call of the active turn; None means "does not fit"."""
    active = state.active_turn
    if active is None or active.id != turn_id:
        return state
    parts = list(active.response_parts)
    for index, part in enumerate(parts):
        if isinstance(part, ToolCallPart) and part.tool_call.tool_call_id == tool_call_id:
            changed = change(part.tool_call)
            if changed is None:
                return state
            parts[index] = attrs.evolve(part, tool_call=changed)
            updated = attrs.evolve(
                state, active_turn=attrs.evolve(active, response_parts=tuple(parts))
            )
            return _with_status(updated)
    return state


@_handles(ToolCallStarted)
def _tool_started(state: ChatState, action: ToolCallStarted, now_ms: int) -> ChatState:
    active = state.active_turn
    if active is None or active.id != action.turn_id:
        return state
    if any(
        isinstance(p, ToolCallPart) and p.id == action.tool_call_id for p in active.response_parts
    ):
        return state
    call = ToolCall(
        tool_call_id=action.tool_call_id,
        tool_name=action.tool_name,
        display_name=action.display_name,
        intention=action.intention,
        contributor=action.contributor,
        meta=action.meta,
    )
    return _with_active(
        state, action.turn_id, response_parts=(*active.response_parts, ToolCallPart(tool_call=call))
    )


@_handles(ToolCallDelta)
def _tool_delta(state: ChatState, action: ToolCallDelta, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        if call.status is not ToolCallStatus.STREAMING:
            return None
        return attrs.evolve(
            call,
            partial_input=(call.partial_input or "") + action.content,
            invocation_message=action.invocation_message or call.invocation_message,
            meta=action.meta or call.meta,
        )

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@_handles(ToolCallReady)
def _tool_ready(state: ChatState, action: ToolCallReady, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        if call.status not in (ToolCallStatus.STREAMING, ToolCallStatus.RUNNING):
            return None
        status = ToolCallStatus.RUNNING if action.confirmed else ToolCallStatus.PENDING_CONFIRMATION
        return attrs.evolve(
            call,
            status=status,
            invocation_message=action.invocation_message,
            tool_input=action.tool_input if action.tool_input is not None else call.tool_input,
            confirmed=action.confirmed,  # a call waiting for confirmation has none
            partial_input=None,
            meta=action.meta or call.meta,
        )

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@_handles(ToolCallConfirmed)
def _tool_confirmed(state: ChatState, action: ToolCallConfirmed, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        if call.status is not ToolCallStatus.PENDING_CONFIRMATION:
            return None
        if action.approved:
            return attrs.evolve(
                call,
                status=ToolCallStatus.RUNNING,
                confirmed=action.confirmed or "user-action",
                meta=action.meta or call.meta,
            )
        return _cancel_call(
            call,
            action.reason or "denied",
            reason_message=action.reason_message,
            user_suggestion=action.user_suggestion,
            meta=action.meta or call.meta,
        )

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@_handles(ToolCallCompleted)
def _tool_completed(state: ChatState, action: ToolCallCompleted, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        if call.status is not ToolCallStatus.RUNNING:
            return None
        status = (
            ToolCallStatus.PENDING_RESULT_CONFIRMATION
            if action.requires_result_confirmation
            else ToolCallStatus.COMPLETED
        )
        return attrs.evolve(
            call,
            status=status,
            success=action.success,
            past_tense_message=action.past_tense_message,
            content=action.content if action.content is not None else call.content,
            structured_content=action.structured_content,
            error=action.error,
            meta=action.meta or call.meta,
        )

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@_handles(ToolCallResultConfirmed)
def _tool_result_confirmed(
    state: ChatState, action: ToolCallResultConfirmed, now_ms: int
) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        if call.status is not ToolCallStatus.PENDING_RESULT_CONFIRMATION:
            return None
        if action.approved:
            return attrs.evolve(call, status=ToolCallStatus.COMPLETED)
        return _cancel_call(call, "result-denied")

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@_handles(ToolCallContentChanged)
def _tool_content(state: ChatState, action: ToolCallContentChanged, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        if call.status is not ToolCallStatus.RUNNING:
            return None
        return attrs.evolve(call, content=action.content)

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@_handles(ToolCallSubagentStarted)
def _tool_subagent(state: ChatState, action: ToolCallSubagentStarted, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        return attrs.evolve(call, subagent_chat_id=action.subagent_chat_id)

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@_handles(RequestOpened)
def _request_opened(state: ChatState, action: RequestOpened, now_ms: int) -> ChatState:
    request = action.request
    if state.active_turn_id != request.turn_id:
        return state
    if any(r.request_id == request.request_id for r in state.open_requests):
        return state
    return _with_status(attrs.evolve(state, open_requests=(*state.open_requests, request)))


@_handles(RequestClosed)
def _request_closed(state: ChatState, action: RequestClosed, now_ms: int) -> ChatState:
    kept = tuple(r for r in state.open_requests if r.request_id != action.request_id)
    if len(kept) == len(state.open_requests):
        return state
    return _with_status(attrs.evolve(state, open_requests=kept))


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
        state,
        turns=turns,
        active_turn=None,
        status=with_activity(state.status, ChatStatus.IDLE),
        modified_at=now_ms,
    )


STATUS_UNCHANGED: tuple[type, ...] = (
    ResponsePartAdded,
    AssistantDelta,
    ReasoningDelta,
    UsageReported,
)
"""Streamed content: their reducers never change a chat's status (a property
test holds them to it), so what watches the status need not see them."""

STATUS_ACTIONS: tuple[type, ...] = tuple(t for t in _CHAT_REDUCERS if t not in STATUS_UNCHANGED)
"""Every other chat action: its reducer may change the chat's status."""
