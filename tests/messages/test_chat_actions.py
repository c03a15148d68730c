"""The chat reducer on AHP 1.1's tool-call, input-request, resume and chat-field
actions (the reducer module docstring's invariants 3-8)."""

import attrs

from agenthost.messages.common import (
    AuthRequiredReason,
    ConfirmationOption,
    ConfirmationOptionKind,
    ContentRef,
    ContributorKind,
    McpAuthRequirement,
    ProtectedResourceMetadata,
    ToolCallContributor,
    Unknown,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    ActivityChanged,
    AssistantDelta,
    ChatIsArchivedChanged,
    ChatIsReadChanged,
    InputAnswerChanged,
    InputCompleted,
    InputRequested,
    ResponsePartAdded,
    ToolCallAuthRequired,
    ToolCallAuthResolved,
    ToolCallCompleted,
    ToolCallConfirmed,
    ToolCallContentChanged,
    ToolCallReady,
    ToolCallResultConfirmed,
    ToolCallStarted,
    Truncated,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnResumed,
    TurnsLoaded,
    TurnStarted,
)
from agenthost.messages.fields import Json
from agenthost.messages.inputs import (
    AnswerState,
    AnswerValue,
    AnswerValueKind,
    ChatInputRequest,
    InputAnswer,
    InputResponseKind,
)
from agenthost.messages.reducers import reduce_chat
from agenthost.messages.state import (
    ChatState,
    ChatStatus,
    ErrorPart,
    MarkdownPart,
    ToolCall,
    ToolCallPart,
    ToolCallStatus,
    Turn,
    TurnState,
    UserMessage,
)
from agenthost.messages.wire import to_wire

NOW = 9_999
MCP = ToolCallContributor(kind=ContributorKind.MCP, customization_id="mcp-1")
ONCE = ConfirmationOption(id="once", label="Approve", kind=ConfirmationOptionKind.APPROVE)
NEVER = ConfirmationOption(id="never", label="Deny", kind=ConfirmationOptionKind.DENY)
AUTH = McpAuthRequirement(
    reason=AuthRequiredReason.INSUFFICIENT_SCOPE,
    resource=ProtectedResourceMetadata(resource="https://mcp.example"),
)


def run(*actions: object, state: ChatState | None = None) -> ChatState:
    state = state or reduce_chat(
        ChatState(resource="ahp-chat:/c"), TurnStarted(turn_id="t", message=UserMessage(text="go"))
    )
    for action in actions:
        state = reduce_chat(state, action, NOW)  # type: ignore[arg-type]
    return state


def call(state: ChatState, tool_call_id: str = "c") -> ToolCall:
    turn = state.active_turn or state.turns[-1]
    return next(
        p.tool_call
        for p in turn.response_parts
        if isinstance(p, ToolCallPart) and p.id == tool_call_id
    )


def start(contributor: ToolCallContributor | None = None) -> ToolCallStarted:
    return ToolCallStarted(turn_id="t", tool_call_id="c", tool_name="bash", contributor=contributor)


def ready(**fields: object) -> ToolCallReady:
    return ToolCallReady(turn_id="t", tool_call_id="c", invocation_message="Run", **fields)  # type: ignore[arg-type]


def test_a_selected_option_comes_from_the_offered_ones_and_stays_to_the_end() -> None:
    state = run(
        start(),
        ready(options=(ONCE, NEVER)),
        ToolCallConfirmed(turn_id="t", tool_call_id="c", approved=True, selected_option_id="once"),
        ToolCallCompleted(turn_id="t", tool_call_id="c", requires_result_confirmation=True),
        ToolCallResultConfirmed(turn_id="t", tool_call_id="c", approved=True),
    )
    done = call(state)
    assert (done.status, done.selected_option, done.options) == (
        ToolCallStatus.COMPLETED,
        ONCE,
        None,
    )


def test_a_denial_keeps_its_selected_option_and_an_unknown_option_id_selects_nothing() -> None:
    state = run(
        start(),
        ready(options=(ONCE, NEVER)),
        ToolCallConfirmed(
            turn_id="t", tool_call_id="c", approved=False, selected_option_id="never"
        ),
    )
    assert (call(state).status, call(state).selected_option) == (ToolCallStatus.CANCELLED, NEVER)
    other = run(
        start(),
        ready(options=(ONCE,)),
        ToolCallConfirmed(turn_id="t", tool_call_id="c", approved=True, selected_option_id="gone"),
    )
    assert call(other).selected_option is None


def test_an_edited_input_replaces_an_inline_input_but_not_a_reference() -> None:
    edit = ToolCallConfirmed(
        turn_id="t", tool_call_id="c", approved=True, edited_tool_input="ls /tmp"
    )
    assert call(run(start(), ready(tool_input="ls"), edit)).tool_input == "ls /tmp"
    ref = ContentRef(uri="file:///input.json")
    assert call(run(start(), ready(tool_input=ref), edit)).tool_input == ref


def test_completing_a_call_that_waited_for_confirmation_records_it_needed_none() -> None:
    state = run(start(), ready(options=(ONCE,)), ToolCallCompleted(turn_id="t", tool_call_id="c"))
    assert (call(state).status, call(state).confirmed) == (ToolCallStatus.COMPLETED, "not-needed")
    assert state.status is ChatStatus.IN_PROGRESS


def test_only_an_mcp_servers_running_call_can_wait_for_authentication() -> None:
    auth = ToolCallAuthRequired(turn_id="t", tool_call_id="c", auth=AUTH)
    mcp = run(start(MCP), ready(confirmed="not-needed"), auth)
    assert (call(mcp).status, call(mcp).auth) == (ToolCallStatus.AUTH_REQUIRED, AUTH)
    assert mcp.status is ChatStatus.INPUT_NEEDED
    assert call(run(start(), ready(confirmed="not-needed"), auth)).status is ToolCallStatus.RUNNING
    assert call(run(start(MCP), ready(), auth)).status is ToolCallStatus.PENDING_CONFIRMATION
    resolved = run(ToolCallAuthResolved(turn_id="t", tool_call_id="c"), state=mcp)
    assert (call(resolved).status, call(resolved).auth) == (ToolCallStatus.RUNNING, None)
    assert resolved.status is ChatStatus.IN_PROGRESS


def test_a_resolved_call_can_be_challenged_again_and_a_turns_end_cancels_a_waiting_one() -> None:
    auth = ToolCallAuthRequired(turn_id="t", tool_call_id="c", auth=AUTH)
    resolved = ToolCallAuthResolved(turn_id="t", tool_call_id="c")
    again = run(start(MCP), ready(confirmed="not-needed"), auth, resolved, auth)
    assert (call(again).status, call(again).auth) == (ToolCallStatus.AUTH_REQUIRED, AUTH)
    assert call(again).confirmed == "not-needed"  # what it had before pausing stays
    assert run(resolved, resolved, state=again) == run(resolved, state=again)  # once only
    ended = run(TurnCancelled(turn_id="t"), state=again)
    assert (call(ended).status, call(ended).reason) == (ToolCallStatus.CANCELLED, "skipped")
    assert ended.status is not ChatStatus.INPUT_NEEDED


def test_a_call_waiting_for_authentication_ends_only_with_a_failure_keeping_its_content() -> None:
    content = Json.of([{"type": "text", "text": "partial"}])
    waiting = run(
        start(MCP),
        ready(confirmed="not-needed"),
        ToolCallContentChanged(turn_id="t", tool_call_id="c", content=content),
        ToolCallAuthRequired(turn_id="t", tool_call_id="c", auth=AUTH),
    )
    succeeded = ToolCallCompleted(turn_id="t", tool_call_id="c", success=True)
    assert run(succeeded, state=waiting) == waiting
    failed = run(
        ToolCallCompleted(
            turn_id="t", tool_call_id="c", success=False, requires_result_confirmation=True
        ),
        state=waiting,
    )
    done = call(failed)
    assert (done.status, done.success, done.content) == (ToolCallStatus.COMPLETED, False, content)


def test_a_ready_call_waiting_for_confirmation_can_be_refined_and_keeps_what_is_not_resent() -> (
    None
):
    state = run(start(), ready(options=(ONCE,), editable=True), ready(confirmation_title="Run it?"))
    refined = call(state)
    assert (refined.options, refined.editable, refined.confirmation_title) == (
        (ONCE,),
        True,
        "Run it?",
    )


def test_a_client_tool_stays_its_clients_whatever_a_later_ready_says() -> None:
    mine = ToolCallContributor(kind=ContributorKind.CLIENT, client_id="a")
    theirs = ToolCallContributor(kind=ContributorKind.CLIENT, client_id="b")
    assert call(run(start(mine), ready(contributor=theirs))).contributor == mine
    assert call(run(start(), ready(contributor=theirs))).contributor is None
    assert call(run(start(), ready(contributor=MCP))).contributor == MCP


def failed(resumable: bool) -> TurnFailed:
    error = AgentHostError(code=ErrorCode.PROVIDER_ERROR, message="rate limited")
    return TurnFailed(
        turn_id="t", error=error, part=ErrorPart(error=error, resumable=resumable), duration=-5
    )


def test_a_resumable_error_reopens_the_latest_turn_with_its_parts() -> None:
    state = run(
        ResponsePartAdded(turn_id="t", part=MarkdownPart(id="p")),
        AssistantDelta(turn_id="t", part_id="p", text="half"),
        failed(resumable=True),
    )
    assert (state.turns[-1].duration, state.status) == (0, ChatStatus.ERROR)
    resumed = run(TurnResumed(turn_id="t"), state=state)
    assert resumed.turns == ()
    assert resumed.active_turn is not None
    assert resumed.active_turn.assistant_text == "half"
    assert isinstance(resumed.active_turn.response_parts[-1], ErrorPart)  # the error stays
    assert resumed.status is ChatStatus.IN_PROGRESS


def test_resume_is_refused_for_an_unresumable_error_another_turn_or_a_running_turn() -> None:
    unresumable = run(failed(resumable=False))
    assert run(TurnResumed(turn_id="t"), state=unresumable) == unresumable
    resumable = run(failed(resumable=True))
    assert run(TurnResumed(turn_id="other"), state=resumable) == resumable
    running = run(TurnStarted(turn_id="u", message=UserMessage(text="next")), state=resumable)
    assert run(TurnResumed(turn_id="t"), state=running) == running


def test_an_error_part_cannot_be_added_by_itself() -> None:
    error = AgentHostError(code=ErrorCode.INTERNAL, message="x")
    state = run()
    assert run(ResponsePartAdded(turn_id="t", part=ErrorPart(error=error)), state=state) == state


def test_a_delta_goes_to_the_first_part_with_its_id_and_skips_parts_without_one() -> None:
    future = Unknown(data=Json.of({"kind": "chart", "points": [1, 2]}))
    state = run(
        ResponsePartAdded(turn_id="t", part=future),
        ResponsePartAdded(turn_id="t", part=MarkdownPart(id="p", content="old")),
        AssistantDelta(turn_id="t", part_id="p", text=" new"),
    )
    assert state.active_turn is not None
    assert state.active_turn.response_parts == (future, MarkdownPart(id="p", content="old new"))


def question_request(request_id: str = "r") -> ChatInputRequest:
    return ChatInputRequest(id=request_id, message="Which runtime?")


DRAFT = InputAnswer(
    state=AnswerState.DRAFT,
    value=AnswerValue(kind=AnswerValueKind.SELECTED, value=Json.of("node")),
)


def test_an_input_request_makes_the_chat_input_needed_and_unread() -> None:
    state = run(state=ChatState(resource="r", status=ChatStatus.IDLE | ChatStatus.IS_READ))
    state = run(InputRequested(request=question_request()), state=state)
    assert state.status is ChatStatus.INPUT_NEEDED
    assert state.modified_at == NOW


def test_answers_sync_one_question_at_a_time_and_survive_a_resent_request() -> None:
    state = run(
        InputRequested(request=question_request()),
        InputAnswerChanged(request_id="r", question_id="q1", answer=DRAFT),
        InputRequested(request=question_request()),  # no answers: the synced ones stay
    )
    assert state.input_requests[0].answers == (("q1", DRAFT),)
    cleared = run(InputAnswerChanged(request_id="r", question_id="q1"), state=state)
    assert cleared.input_requests[0].answers is None
    assert run(InputAnswerChanged(request_id="x", question_id="q1", answer=DRAFT), state=state) == (
        state
    )


def test_completing_one_request_leaves_the_others_and_the_turn_ends_the_rest() -> None:
    state = run(
        InputRequested(request=question_request("a")),
        InputRequested(request=question_request("b")),
        InputCompleted(request_id="a", response=InputResponseKind.DECLINE),
    )
    assert [r.id for r in state.input_requests] == ["b"]
    assert state.status is ChatStatus.INPUT_NEEDED
    unknown = InputCompleted(request_id="zz", response=InputResponseKind.ACCEPT)
    assert run(unknown, state=state) == state
    ended = run(TurnCompleted(turn_id="t"), state=state)
    assert (ended.input_requests, ended.status) == ((), ChatStatus.IDLE)
    truncated = run(Truncated(), state=state)
    assert (truncated.input_requests, truncated.status) == ((), ChatStatus.IDLE)


def test_answers_are_an_object_keyed_by_question_on_the_wire() -> None:
    request = question_request().with_answer("q1", DRAFT)
    assert to_wire(request)["answers"] == {
        "q1": {"state": "draft", "value": {"kind": "selected", "value": "node"}}
    }


def test_older_turns_load_before_the_window_once_each() -> None:
    def turn(turn_id: str) -> Turn:
        return Turn(id=turn_id, message=UserMessage(text=turn_id), state=TurnState.COMPLETE)

    state = ChatState(resource="r", turns=(turn("c"),), turns_next_cursor="p1")
    state = run(
        TurnsLoaded(turns=(turn("a"), turn("b"), turn("c")), turns_next_cursor="p2"), state=state
    )
    assert ([t.id for t in state.turns], state.turns_next_cursor) == (["a", "b", "c"], "p2")
    state = run(TurnsLoaded(turns=()), state=state)
    assert state.turns_next_cursor is None
    assert (
        run(Truncated(), state=attrs.evolve(state, turns_next_cursor="p3")).turns_next_cursor
        is None
    )


def test_a_chats_read_and_archived_flags_and_activity_leave_its_work_alone() -> None:
    state = run(
        ChatIsArchivedChanged(archived=True),
        ChatIsReadChanged(read=True),
        ActivityChanged(activity="Thinking"),
    )
    assert state.status == ChatStatus.IN_PROGRESS | ChatStatus.IS_ARCHIVED | ChatStatus.IS_READ
    assert state.activity == "Thinking"
    state = run(ChatIsArchivedChanged(archived=False), ChatIsReadChanged(read=False), state=state)
    assert state.status is ChatStatus.IN_PROGRESS
