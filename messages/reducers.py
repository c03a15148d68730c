"""The pure reducers: `reduce(state, action, now_ms=...) -> state`.

The chat reducer is AHP's chat reducer over our frozen types; the session
and root reducers (session_reducer.py) are AHP's session and root reducers.
This is where the state's invariants live, and no reducer raises on a
well-typed action:

1. A terminal action (complete, cancelled, error) whose turn id is not the
   active turn's is a no-op, so every turn ends exactly once (DESIGN.md rule
   2). Its `duration` is recorded, never below zero.
2. A turn start taken from a pending message removes that message from the
   steering list, the legacy slot and the queue; a start naming the active
   turn again is a no-op (AHP's idempotent turnStarted).
3. Every action about a turn, a part or a tool call names the active turn;
   one naming another turn is a no-op. A delta or reasoning chunk goes to the
   first part with its id (parts without an id are skipped) and only when
   that part is markdown, or reasoning.
4. Tool calls follow one state machine: streaming -> pending-confirmation or
   running; running -> pending-confirmation (a re-check) or auth-required
   (only an MCP server's call) -> running; pending-confirmation -> running
   (approved; an edited input replaces an inline one), cancelled (denied)
   or completed (done without asking: confirmed "not-needed"); running ->
   completed or pending-result-confirmation -> completed / cancelled
   (result-denied); auth-required -> completed only with a failed result.
   An action that does not fit the call's status is a no-op. A selected
   confirmation option is resolved from the call's offered options and
   carried to the call's end.
5. A turn's end cancels (skipped) every tool call not in a terminal state,
   closes its open requests and drops the chat's open input requests; a
   cancelled call keeps only what AHP's cancelled state has (its identity,
   invocation, input, and why).
6. The status's activity bits are derived: error after a failed turn;
   input-needed while an input request, an open request or a tool call
   waits for the user (confirmation, result confirmation, authentication);
   else in progress during a turn; else idle. Its flags (IsRead,
   IsArchived, unknown bits) are kept, except that a turn start, a resume
   and an input request clear IsRead.
7. chat/turnResume reopens the latest turn only when no turn is active and
   that turn stopped at a resumable error; its parts, errors included, stay.
8. Input requests upsert by id (an update without answers keeps the synced
   ones); answers change one question at a time; a completion or a
   truncation removes requests; nothing about an unknown request id.
9. The session reducer keeps one entry per key (chats by resource, clients
   by id, input requests by id, customizations by id, directories by URI);
   an action naming an entry that is not there is a no-op. AHP's inputNeeded
   makes the session input-needed while an entry awaits the user (a client
   executing a tool does not).
10. Unknown actions, and actions of a type a reducer does not own, are no-ops.
"""

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs
from attrs import AttrsInstance

from agenthost.messages.common import ContributorKind, Unknown
from agenthost.messages.errors import AgentHostError
from agenthost.messages.events import (
    ActivityChanged,
    AssistantDelta,
    ChatChangesetsChanged,
    ChatEvent,
    ChatIsArchivedChanged,
    ChatIsReadChanged,
    ChatTitleChanged,
    ChatWorkingDirectoryRemoved,
    ChatWorkingDirectorySet,
    DraftChanged,
    InputAnswerChanged,
    InputCompleted,
    InputRequested,
    PendingMessageAdded,
    PendingMessageRemoved,
    QueuedMessagesReordered,
    ReasoningDelta,
    RequestClosed,
    RequestOpened,
    ResponsePartAdded,
    SteeringRecorded,
    ToolCallAuthRequired,
    ToolCallAuthResolved,
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
    TurnResumed,
    TurnsLoaded,
    TurnStarted,
    UsageReported,
)
from agenthost.messages.session_reducer import reduce_root, reduce_session
from agenthost.messages.state import (
    ActiveTurn,
    ChatState,
    ChatStatus,
    ConfirmationReason,
    ErrorPart,
    MarkdownPart,
    PendingKind,
    PendingMessage,
    ReasoningPart,
    ResponsePart,
    RootState,
    SessionState,
    ToolCall,
    ToolCallPart,
    ToolCallStatus,
    Turn,
    TurnState,
    part_id,
    with_activity,
)

__all__ = ["reduce", "reduce_chat", "reduce_root", "reduce_session"]

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
reduce.register(SessionState, reduce_session)
reduce.register(RootState, reduce_root)


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


# -- status --------------------------------------------------------------------------


def _waits_for_user(state: ChatState) -> bool:
    if state.input_requests or state.open_requests:
        return True
    active = state.active_turn
    return active is not None and any(
        isinstance(p, ToolCallPart) and p.tool_call.status.waits_for_user
        for p in active.response_parts
    )


def _derived_status(state: ChatState, *, failed: bool = False) -> ChatStatus:
    """The activity bits from the chat's work (invariant 6); the flags kept."""
    if failed:
        activity = ChatStatus.ERROR
    elif _waits_for_user(state):
        activity = ChatStatus.INPUT_NEEDED
    elif state.active_turn is not None:
        activity = ChatStatus.IN_PROGRESS
    else:
        activity = ChatStatus.IDLE
    return with_activity(state.status, activity)


def _with_status(state: ChatState, *, unread: bool = False) -> ChatState:
    status = _derived_status(state)
    if unread:
        status = with_activity(status, status, read=False)
    return state if state.status == status else attrs.evolve(state, status=status)


# -- the turn --------------------------------------------------------------------------


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
    started = attrs.evolve(
        state,
        active_turn=ActiveTurn(
            id=action.turn_id, message=action.message, started_at=action.started_at
        ),
        steering_messages=steering,
        queued_messages=queued,
        steering_message=slot,
        modified_at=now_ms,
    )
    return _with_status(started, unread=True)


def _with_active(state: ChatState, turn_id: str, **changes: Any) -> ChatState:
    active = state.active_turn
    if active is None or active.id != turn_id:
        return state
    return _replace(state, active_turn=_replace(active, **changes))


@_handles(ResponsePartAdded)
def _response_part(state: ChatState, action: ResponsePartAdded, now_ms: int) -> ChatState:
    active = state.active_turn
    if active is None or active.id != action.turn_id or isinstance(action.part, ErrorPart):
        return state  # an error part comes only with the error that ends its turn
    return _with_active(state, action.turn_id, response_parts=(*active.response_parts, action.part))


def _append_to_part(
    state: ChatState, turn_id: str, target: str, kind: type[MarkdownPart | ReasoningPart], text: str
) -> ChatState:
    """`text` appended to the first part with id `target`, if that part is a `kind`."""
    active = state.active_turn
    if active is None or active.id != turn_id:
        return state
    parts = active.response_parts
    for index, part in enumerate(parts):
        found = getattr(part, "id", None)  # the streaming path: part_id() without its checks
        if found is None and isinstance(part, Unknown):
            found = part_id(part)
        if found == target:
            if not isinstance(part, kind):
                return state
            changed = _replace(part, content=part.content + text)
            updated = (*parts[:index], changed, *parts[index + 1 :])
            return _with_active(state, turn_id, response_parts=updated)
    return state


@_handles(AssistantDelta)
def _delta(state: ChatState, action: AssistantDelta, now_ms: int) -> ChatState:
    return _append_to_part(state, action.turn_id, action.part_id, MarkdownPart, action.text)


@_handles(ReasoningDelta)
def _reasoning(state: ChatState, action: ReasoningDelta, now_ms: int) -> ChatState:
    return _append_to_part(state, action.turn_id, action.part_id, ReasoningPart, action.content)


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


@_handles(UsageReported)
def _usage(state: ChatState, action: UsageReported, now_ms: int) -> ChatState:
    return _with_active(state, action.turn_id, usage=action.usage)


def _base(call: ToolCall, meta: Any = None) -> dict[str, Any]:
    """What every tool-call state has: its identity (and ours, the subagent's chat)."""
    return {
        "tool_call_id": call.tool_call_id,
        "tool_name": call.tool_name,
        "display_name": call.display_name,
        "intention": call.intention,
        "contributor": call.contributor,
        "meta": call.meta if meta is None else meta,
        "subagent_chat_id": call.subagent_chat_id,
    }


def _cancelled(call: ToolCall, reason: str, meta: Any = None, **changes: Any) -> ToolCall:
    """AHP's cancelled state: identity, invocation, input, and why."""
    streaming = call.status is ToolCallStatus.STREAMING
    return ToolCall(
        **_base(call, meta),
        status=ToolCallStatus.CANCELLED,
        invocation_message="" if call.invocation_message is None else call.invocation_message,
        tool_input=None if streaming else call.tool_input,
        reason=reason,
        **changes,
    )


def _confirmed_fields(call: ToolCall) -> dict[str, Any]:
    """What a call past its confirmation carries from state to state."""
    return {
        "invocation_message": call.invocation_message,
        "tool_input": call.tool_input,
        "confirmed": call.confirmed,
        "selected_option": call.selected_option,
        "started_at": call.started_at,
    }


def _skip_unfinished(parts: tuple[ResponsePart, ...]) -> tuple[ResponsePart, ...]:
    return tuple(
        attrs.evolve(part, tool_call=_cancelled(part.tool_call, "skipped"))
        if isinstance(part, ToolCallPart) and not part.tool_call.status.terminal
        else part
        for part in parts
    )


def _end_turn(
    state: ChatState,
    turn_id: str,
    turn_state: TurnState,
    now_ms: int,
    duration: int | None,
    error: AgentHostError | None = None,
    error_part: ErrorPart | None = None,
) -> ChatState:
    active = state.active_turn
    if active is None or active.id != turn_id:
        return state
    parts = _skip_unfinished(active.response_parts)
    turn = Turn(
        id=active.id,
        message=active.message,
        response_parts=parts if error_part is None else (*parts, error_part),
        usage=active.usage,
        steering=active.steering,
        state=turn_state,
        error=error,
        started_at=active.started_at,
        duration=None if duration is None else max(0, duration),
    )
    ended = attrs.evolve(
        state,
        turns=(*state.turns, turn),
        active_turn=None,
        open_requests=tuple(r for r in state.open_requests if r.turn_id != turn_id),
        input_requests=(),
        modified_at=now_ms,
    )
    failed = turn_state is TurnState.ERROR
    return attrs.evolve(ended, status=_derived_status(ended, failed=failed))


@_handles(TurnCompleted)
def _complete(state: ChatState, action: TurnCompleted, now_ms: int) -> ChatState:
    return _end_turn(state, action.turn_id, TurnState.COMPLETE, now_ms, action.duration)


@_handles(TurnCancelled)
def _turn_cancelled(state: ChatState, action: TurnCancelled, now_ms: int) -> ChatState:
    return _end_turn(state, action.turn_id, TurnState.CANCELLED, now_ms, action.duration)


@_handles(TurnFailed)
def _failed(state: ChatState, action: TurnFailed, now_ms: int) -> ChatState:
    return _end_turn(
        state, action.turn_id, TurnState.ERROR, now_ms, action.duration, action.error, action.part
    )


def resumable(turn: Turn) -> bool:
    """The turn stopped at an error a client may resume from (invariant 7)."""
    if turn.state is not TurnState.ERROR:
        return False
    last = turn.response_parts[-1] if turn.response_parts else None
    if isinstance(last, ErrorPart):
        return bool(last.resumable)
    return turn.error is not None and turn.error.resumable


@_handles(TurnResumed)
def _resumed(state: ChatState, action: TurnResumed, now_ms: int) -> ChatState:
    if state.active_turn is not None or not state.turns:
        return state
    turn = state.turns[-1]
    if turn.id != action.turn_id or not resumable(turn):
        return state
    active = ActiveTurn(
        id=turn.id,
        message=turn.message,
        response_parts=turn.response_parts,
        usage=turn.usage,
        steering=turn.steering,
        started_at=turn.started_at if turn.started_at is not None else state.modified_at,
    )
    resumed = attrs.evolve(state, turns=state.turns[:-1], active_turn=active, modified_at=now_ms)
    return _with_status(resumed, unread=True)


@_handles(TurnsLoaded)
def _turns_loaded(state: ChatState, action: TurnsLoaded, now_ms: int) -> ChatState:
    """Older turns go first, those already loaded once; the cursor is replaced."""
    loaded = {turn.id for turn in state.turns}
    older = tuple(turn for turn in action.turns if turn.id not in loaded)
    return attrs.evolve(
        state, turns=(*older, *state.turns), turns_next_cursor=action.turns_next_cursor
    )


# -- pending messages ------------------------------------------------------------------


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
    dropped = state.active_turn_id
    truncated = attrs.evolve(
        state,
        turns=turns,
        active_turn=None,
        open_requests=tuple(r for r in state.open_requests if r.turn_id != dropped),
        input_requests=(),
        turns_next_cursor=None if action.turn_id is None else state.turns_next_cursor,
        modified_at=now_ms,
    )
    return attrs.evolve(truncated, status=_derived_status(truncated))


# -- the chat's own fields --------------------------------------------------------------


@_handles(DraftChanged)
def _draft(state: ChatState, action: DraftChanged, now_ms: int) -> ChatState:
    return attrs.evolve(state, draft=action.draft or None, modified_at=now_ms)


@_handles(ChatTitleChanged)
def _chat_title(state: ChatState, action: ChatTitleChanged, now_ms: int) -> ChatState:
    return attrs.evolve(state, title=action.title, modified_at=now_ms)


@_handles(ActivityChanged)
def _activity(state: ChatState, action: ActivityChanged, now_ms: int) -> ChatState:
    return attrs.evolve(state, activity=action.activity)


@_handles(ChatIsReadChanged)
def _chat_read(state: ChatState, action: ChatIsReadChanged, now_ms: int) -> ChatState:
    return attrs.evolve(state, status=with_activity(state.status, state.status, read=action.read))


@_handles(ChatIsArchivedChanged)
def _chat_archived(state: ChatState, action: ChatIsArchivedChanged, now_ms: int) -> ChatState:
    bit = int(ChatStatus.IS_ARCHIVED)
    value = int(state.status) | bit if action.archived else int(state.status) & ~bit
    return attrs.evolve(state, status=ChatStatus(value))


@_handles(ChatWorkingDirectorySet)
def _chat_directory_set(
    state: ChatState, action: ChatWorkingDirectorySet, now_ms: int
) -> ChatState:
    directories = state.working_directories or ()
    if action.directory in directories:
        return state
    return attrs.evolve(state, working_directories=(*directories, action.directory))


@_handles(ChatWorkingDirectoryRemoved)
def _chat_directory_removed(
    state: ChatState, action: ChatWorkingDirectoryRemoved, now_ms: int
) -> ChatState:
    directories = state.working_directories
    if directories is None or action.directory not in directories:
        return state
    kept = tuple(d for d in directories if d != action.directory)
    return attrs.evolve(state, working_directories=kept)


@_handles(ChatChangesetsChanged)
def _chat_changesets(state: ChatState, action: ChatChangesetsChanged, now_ms: int) -> ChatState:
    return attrs.evolve(state, changesets=action.changesets)


# -- open requests (ours) and input requests (AHP's) -----------------------------------


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


@_handles(InputRequested)
def _input_requested(state: ChatState, action: InputRequested, now_ms: int) -> ChatState:
    request = action.request
    requests = list(state.input_requests)
    ids = [r.id for r in requests]
    if request.id in ids:
        index = ids.index(request.id)
        if request.answers is None:
            request = attrs.evolve(request, answers=requests[index].answers)
        requests[index] = request
    else:
        requests.append(request)
    updated = attrs.evolve(state, input_requests=tuple(requests), modified_at=now_ms)
    return _with_status(updated, unread=True)


@_handles(InputAnswerChanged)
def _input_answer(state: ChatState, action: InputAnswerChanged, now_ms: int) -> ChatState:
    requests = state.input_requests
    ids = [r.id for r in requests]
    if action.request_id not in ids:
        return state
    index = ids.index(action.request_id)
    changed = requests[index].with_answer(action.question_id, action.answer)
    updated = (*requests[:index], changed, *requests[index + 1 :])
    return attrs.evolve(state, input_requests=updated, modified_at=now_ms)


@_handles(InputCompleted)
def _input_completed(state: ChatState, action: InputCompleted, now_ms: int) -> ChatState:
    kept = tuple(r for r in state.input_requests if r.id != action.request_id)
    if len(kept) == len(state.input_requests):
        return state
    completed = attrs.evolve(state, input_requests=kept, modified_at=now_ms)
    return attrs.evolve(completed, status=_derived_status(completed))


# -- tool calls -------------------------------------------------------------------------


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
        streamed = call.partial_input
        if action.content is not None:
            streamed = (streamed or "") + action.content
        return attrs.evolve(
            call,
            partial_input=streamed,
            invocation_message=action.invocation_message or call.invocation_message,
            meta=action.meta or call.meta,
        )

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


def _refined_contributor(call: ToolCall, action: ToolCallReady) -> Any:
    """toolCallReady may refine who contributes a call, never who executes it: a
    client's call stays that client's, and no call becomes a client's late."""
    current, offered = call.contributor, action.contributor
    if offered is None:
        return current
    if current is not None and current.kind == ContributorKind.CLIENT:
        same = offered.kind == ContributorKind.CLIENT and offered.client_id == current.client_id
        return offered if same else current
    return current if offered.kind == ContributorKind.CLIENT else offered


@_handles(ToolCallReady)
def _tool_ready(state: ChatState, action: ToolCallReady, now_ms: int) -> ChatState:
    ready_from = (
        ToolCallStatus.STREAMING,
        ToolCallStatus.RUNNING,
        ToolCallStatus.PENDING_CONFIRMATION,
    )

    def change(call: ToolCall) -> ToolCall | None:
        if call.status not in ready_from:
            return None
        base = _base(call, action.meta)
        base["contributor"] = _refined_contributor(call, action)
        base["intention"] = action.intention or call.intention
        streaming = call.status is ToolCallStatus.STREAMING
        tool_input = action.tool_input
        if tool_input is None and not streaming:
            tool_input = call.tool_input
        if action.confirmed:
            return ToolCall(
                **base,
                status=ToolCallStatus.RUNNING,
                invocation_message=action.invocation_message,
                tool_input=tool_input,
                confirmed=action.confirmed,
                started_at=action.started_at or call.started_at,
            )
        pending = call.status is ToolCallStatus.PENDING_CONFIRMATION

        def kept(new: Any, old: Any) -> Any:
            return new if new is not None or not pending else old

        return ToolCall(
            **base,
            status=ToolCallStatus.PENDING_CONFIRMATION,
            invocation_message=action.invocation_message,
            tool_input=tool_input,
            confirmation_title=kept(action.confirmation_title, call.confirmation_title),
            risk_assessment=kept(action.risk_assessment, call.risk_assessment),
            edits=kept(action.edits, call.edits),
            editable=kept(action.editable, call.editable),
            options=kept(action.options, call.options),
            started_at=action.started_at or call.started_at,
        )

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@_handles(ToolCallConfirmed)
def _tool_confirmed(state: ChatState, action: ToolCallConfirmed, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        if call.status is not ToolCallStatus.PENDING_CONFIRMATION:
            return None
        selected = next((o for o in call.options or () if o.id == action.selected_option_id), None)
        if action.approved:
            edited = action.edited_tool_input
            inline = call.tool_input is None or isinstance(call.tool_input, str)
            return ToolCall(
                **_base(call, action.meta),
                status=ToolCallStatus.RUNNING,
                invocation_message=call.invocation_message,
                tool_input=edited if edited is not None and inline else call.tool_input,
                confirmed=action.confirmed or ConfirmationReason.USER_ACTION.value,
                selected_option=selected,
                started_at=call.started_at,
            )
        return _cancelled(
            call,
            action.reason or "denied",
            action.meta,
            reason_message=action.reason_message,
            user_suggestion=action.user_suggestion,
            selected_option=selected,
        )

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@_handles(ToolCallCompleted)
def _tool_completed(state: ChatState, action: ToolCallCompleted, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        status = call.status
        if status is ToolCallStatus.AUTH_REQUIRED and action.success:
            return None  # it never ran after its challenge: only a failure ends it
        if status not in (
            ToolCallStatus.RUNNING,
            ToolCallStatus.PENDING_CONFIRMATION,
            ToolCallStatus.AUTH_REQUIRED,
        ):
            return None
        fields = _confirmed_fields(call)
        if status is ToolCallStatus.PENDING_CONFIRMATION:  # done without asking
            fields.update(confirmed=ConfirmationReason.NOT_NEEDED.value, selected_option=None)
        content = call.content if status is ToolCallStatus.AUTH_REQUIRED else None
        confirm = action.requires_result_confirmation and status is not ToolCallStatus.AUTH_REQUIRED
        return ToolCall(
            **_base(call, action.meta),
            **fields,
            status=(
                ToolCallStatus.PENDING_RESULT_CONFIRMATION if confirm else ToolCallStatus.COMPLETED
            ),
            success=action.success,
            past_tense_message=action.past_tense_message,
            content=action.content if action.content is not None else content,
            structured_content=action.structured_content,
            error=action.error,
            duration=action.duration,
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
            return attrs.evolve(
                call, status=ToolCallStatus.COMPLETED, meta=action.meta or call.meta
            )
        return _cancelled(call, "result-denied", action.meta, selected_option=call.selected_option)

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@_handles(ToolCallContentChanged)
def _tool_content(state: ChatState, action: ToolCallContentChanged, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        if call.status is not ToolCallStatus.RUNNING:
            return None
        return attrs.evolve(call, content=action.content, meta=action.meta or call.meta)

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@_handles(ToolCallAuthRequired)
def _tool_auth_required(state: ChatState, action: ToolCallAuthRequired, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        contributor = call.contributor
        if call.status is not ToolCallStatus.RUNNING:
            return None
        if contributor is None or contributor.kind != ContributorKind.MCP:
            return None  # only an MCP server's call can wait for authentication
        return ToolCall(
            **_base(call, action.meta),
            **_confirmed_fields(call),
            status=ToolCallStatus.AUTH_REQUIRED,
            content=call.content,
            auth=action.auth,
        )

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@_handles(ToolCallAuthResolved)
def _tool_auth_resolved(state: ChatState, action: ToolCallAuthResolved, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        if call.status is not ToolCallStatus.AUTH_REQUIRED:
            return None
        return ToolCall(
            **_base(call, action.meta),
            **_confirmed_fields(call),
            status=ToolCallStatus.RUNNING,
            content=call.content,
        )

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@_handles(ToolCallSubagentStarted)
def _tool_subagent(state: ChatState, action: ToolCallSubagentStarted, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        return attrs.evolve(call, subagent_chat_id=action.subagent_chat_id)

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


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
