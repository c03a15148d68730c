"""The pure reducers: `reduce(state, action, now_ms=...) -> state`.

The chat reducer is AHP's chat reducer over our frozen types: its table and
shared helpers are in reduction.py, its tool-call state machine in
tool_reducer.py, the rest here. The session and root reducers
(session_reducer.py) are AHP's session and root reducers. This is where the
state's invariants live, and no reducer raises on a well-typed action:

1. A terminal action (complete, cancelled, error) whose turn id is not the
   active turn's is a no-op, so every turn ends exactly once (design rule
   2, docs/design-rules.md). Its `duration` is recorded, never below zero.
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
from collections.abc import Sequence

import attrs

from agenthost.messages import tool_reducer
from agenthost.messages.common import Unknown
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
    Truncated,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnResumed,
    TurnsLoaded,
    TurnStarted,
    UsageReported,
)
from agenthost.messages.reduction import (
    CHAT_REDUCERS,
    derived_status,
    handles,
    handles_active,
    reduce_chat,
    replace,
    settle_status,
    with_status,
)
from agenthost.messages.session_reducer import reduce_root, reduce_session
from agenthost.messages.state import (
    ActiveTurn,
    ChatState,
    ChatStatus,
    ErrorPart,
    MarkdownPart,
    PendingKind,
    PendingMessage,
    ReasoningPart,
    ResponsePart,
    RootState,
    SessionState,
    Turn,
    TurnState,
    part_id,
    with_activity,
)
from agenthost.messages.tool_reducer import skip_unfinished

__all__ = [
    "STATUS_ACTIONS",
    "STATUS_UNCHANGED",
    "delta_runs",
    "ended_parts",
    "joined_delta",
    "reduce",
    "reduce_chat",
    "reduce_root",
    "reduce_session",
    "resumable",
]

_replace = replace  # the streaming path's copy (tests hold it to attrs.evolve)
assert tool_reducer  # imported for the tool-call handlers it registers


@functools.singledispatch
def reduce(state: object, action: ChatEvent, now_ms: int = 0) -> object:
    """Reduce any state value by the reducer for its type."""
    raise TypeError(f"no reducer for {type(state).__name__}")


reduce.register(ChatState, reduce_chat)
reduce.register(SessionState, reduce_session)
reduce.register(RootState, reduce_root)


# -- the turn --------------------------------------------------------------------------


@handles(TurnStarted)
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
    started = replace(
        state,
        active_turn=ActiveTurn(
            id=action.turn_id, message=action.message, started_at=action.started_at
        ),
        steering_messages=steering,
        queued_messages=queued,
        steering_message=slot,
        modified_at=now_ms,
    )
    return settle_status(started, unread=True)


@handles_active(ResponsePartAdded)
def _response_part(active: ActiveTurn, action: ResponsePartAdded) -> ActiveTurn:
    if isinstance(action.part, ErrorPart):
        return active  # an error part comes only with the error that ends its turn
    return replace(active, response_parts=(*active.response_parts, action.part))


def _append_to_part(
    active: ActiveTurn, target: str, kind: type[MarkdownPart | ReasoningPart], text: str
) -> ActiveTurn:
    """`text` appended to the first part with id `target`, if that part is a `kind`."""
    parts = active.response_parts
    for index, part in enumerate(parts):
        found = getattr(part, "id", None)  # the streaming path: part_id() without its checks
        if found is None and isinstance(part, Unknown):
            found = part_id(part)
        if found == target:
            if not isinstance(part, kind):
                return active
            changed = replace(part, content=part.content + text)
            return replace(active, response_parts=(*parts[:index], changed, *parts[index + 1 :]))
    return active


@handles_active(AssistantDelta)
def _delta(active: ActiveTurn, action: AssistantDelta) -> ActiveTurn:
    return _append_to_part(active, action.part_id, MarkdownPart, action.text)


@handles_active(ReasoningDelta)
def _reasoning(active: ActiveTurn, action: ReasoningDelta) -> ActiveTurn:
    return _append_to_part(active, action.part_id, ReasoningPart, action.content)


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
            and action.part_id == last.part_id
            and action.turn_id == last.turn_id
        ):
            runs[-1].append(action)
        else:
            runs.append([action])
    return runs


def joined_delta(run: Sequence[AssistantDelta]) -> AssistantDelta:
    """One delta carrying a run's text."""
    return replace(run[0], text="".join([delta.text for delta in run]))


@handles_active(UsageReported)
def _usage(active: ActiveTurn, action: UsageReported) -> ActiveTurn:
    return replace(active, usage=action.usage)


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
    turn = Turn(
        id=active.id,
        message=active.message,
        response_parts=ended_parts(active.response_parts, error_part),
        usage=active.usage,
        steering=active.steering,
        state=turn_state,
        error=error,
        started_at=active.started_at,
        duration=None if duration is None else max(0, duration),
    )
    ended = replace(
        state,
        turns=(*state.turns, turn),
        active_turn=None,
        open_requests=state.open_requests
        and tuple(r for r in state.open_requests if r.turn_id != turn_id),
        input_requests=(),
        modified_at=now_ms,
    )
    return settle_status(ended, failed=turn_state is TurnState.ERROR)


def ended_parts(
    parts: tuple[ResponsePart, ...], error_part: ErrorPart | None = None
) -> tuple[ResponsePart, ...]:
    """A turn's response parts as its end leaves them (invariant 5): every tool
    call not in a terminal state skipped, and the error's part, if any, last."""
    ended = skip_unfinished(parts)
    return ended if error_part is None else (*ended, error_part)


@handles(TurnCompleted)
def _complete(state: ChatState, action: TurnCompleted, now_ms: int) -> ChatState:
    return _end_turn(state, action.turn_id, TurnState.COMPLETE, now_ms, action.duration)


@handles(TurnCancelled)
def _turn_cancelled(state: ChatState, action: TurnCancelled, now_ms: int) -> ChatState:
    return _end_turn(state, action.turn_id, TurnState.CANCELLED, now_ms, action.duration)


@handles(TurnFailed)
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


@handles(TurnResumed)
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
    return with_status(resumed, unread=True)


@handles(TurnsLoaded)
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


@handles(PendingMessageAdded)
def _pending_set(state: ChatState, action: PendingMessageAdded, now_ms: int) -> ChatState:
    """Upsert: an existing id is replaced in place, a new one appended."""
    pending = action.pending
    current = _pending_of(state, pending.kind)
    if any(m.id == pending.id for m in current):
        return _with_pending(
            state, pending.kind, tuple(pending if m.id == pending.id else m for m in current)
        )
    return _with_pending(state, pending.kind, (*current, pending))


@handles(PendingMessageRemoved)
def _pending_removed(state: ChatState, action: PendingMessageRemoved, now_ms: int) -> ChatState:
    slot = state.steering_message
    if action.kind is PendingKind.STEERING and slot is not None and slot.id == action.pending_id:
        state = attrs.evolve(state, steering_message=None)
    current = _pending_of(state, action.kind)
    kept = tuple(m for m in current if m.id != action.pending_id)
    return state if len(kept) == len(current) else _with_pending(state, action.kind, kept)


@handles(QueuedMessagesReordered)
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


@handles(SteeringRecorded)
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


@handles(Truncated)
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
    return attrs.evolve(truncated, status=derived_status(truncated))


# -- the chat's own fields --------------------------------------------------------------


@handles(DraftChanged)
def _draft(state: ChatState, action: DraftChanged, now_ms: int) -> ChatState:
    return attrs.evolve(state, draft=action.draft or None, modified_at=now_ms)


@handles(ChatTitleChanged)
def _chat_title(state: ChatState, action: ChatTitleChanged, now_ms: int) -> ChatState:
    return attrs.evolve(state, title=action.title, modified_at=now_ms)


@handles(ActivityChanged)
def _activity(state: ChatState, action: ActivityChanged, now_ms: int) -> ChatState:
    return attrs.evolve(state, activity=action.activity)


@handles(ChatIsReadChanged)
def _chat_read(state: ChatState, action: ChatIsReadChanged, now_ms: int) -> ChatState:
    return attrs.evolve(state, status=with_activity(state.status, state.status, read=action.read))


@handles(ChatIsArchivedChanged)
def _chat_archived(state: ChatState, action: ChatIsArchivedChanged, now_ms: int) -> ChatState:
    bit = int(ChatStatus.IS_ARCHIVED)
    value = int(state.status) | bit if action.archived else int(state.status) & ~bit
    return attrs.evolve(state, status=ChatStatus(value))


@handles(ChatWorkingDirectorySet)
def _chat_directory_set(
    state: ChatState, action: ChatWorkingDirectorySet, now_ms: int
) -> ChatState:
    directories = state.working_directories or ()
    if action.directory in directories:
        return state
    return attrs.evolve(state, working_directories=(*directories, action.directory))


@handles(ChatWorkingDirectoryRemoved)
def _chat_directory_removed(
    state: ChatState, action: ChatWorkingDirectoryRemoved, now_ms: int
) -> ChatState:
    directories = state.working_directories
    if directories is None or action.directory not in directories:
        return state
    kept = tuple(d for d in directories if d != action.directory)
    return attrs.evolve(state, working_directories=kept)


@handles(ChatChangesetsChanged)
def _chat_changesets(state: ChatState, action: ChatChangesetsChanged, now_ms: int) -> ChatState:
    return attrs.evolve(state, changesets=action.changesets)


# -- open requests (ours) and input requests (AHP's) -----------------------------------


@handles(RequestOpened)
def _request_opened(state: ChatState, action: RequestOpened, now_ms: int) -> ChatState:
    request = action.request
    if state.active_turn_id != request.turn_id:
        return state
    if any(r.request_id == request.request_id for r in state.open_requests):
        return state
    return with_status(attrs.evolve(state, open_requests=(*state.open_requests, request)))


@handles(RequestClosed)
def _request_closed(state: ChatState, action: RequestClosed, now_ms: int) -> ChatState:
    kept = tuple(r for r in state.open_requests if r.request_id != action.request_id)
    if len(kept) == len(state.open_requests):
        return state
    return with_status(attrs.evolve(state, open_requests=kept))


@handles(InputRequested)
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
    return with_status(updated, unread=True)


@handles(InputAnswerChanged)
def _input_answer(state: ChatState, action: InputAnswerChanged, now_ms: int) -> ChatState:
    requests = state.input_requests
    ids = [r.id for r in requests]
    if action.request_id not in ids:
        return state
    index = ids.index(action.request_id)
    changed = requests[index].with_answer(action.question_id, action.answer)
    updated = (*requests[:index], changed, *requests[index + 1 :])
    return attrs.evolve(state, input_requests=updated, modified_at=now_ms)


@handles(InputCompleted)
def _input_completed(state: ChatState, action: InputCompleted, now_ms: int) -> ChatState:
    kept = tuple(r for r in state.input_requests if r.id != action.request_id)
    if len(kept) == len(state.input_requests):
        return state
    completed = attrs.evolve(state, input_requests=kept, modified_at=now_ms)
    return attrs.evolve(completed, status=derived_status(completed))


STATUS_UNCHANGED: tuple[type, ...] = (
    ResponsePartAdded,
    AssistantDelta,
    ReasoningDelta,
    UsageReported,
)
"""Streamed content: their reducers never change a chat's status (a property
test holds them to it), so what watches the status need not see them."""

STATUS_ACTIONS: tuple[type, ...] = tuple(t for t in CHAT_REDUCERS if t not in STATUS_UNCHANGED)
"""Every other chat action: its reducer may change the chat's status."""
