"""The tool-call state machine, over random action sequences (the pure reducer:
reducers.py's invariants 1, 4, 5 and 6)."""

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from agenthost.messages.common import (
    AuthRequiredReason,
    ConfirmationOption,
    ConfirmationOptionKind,
    ContributorKind,
    McpAuthRequirement,
    ProtectedResourceMetadata,
    ToolCallContributor,
)
from agenthost.messages.events import (
    AssistantDelta,
    ReasoningDelta,
    ResponsePartAdded,
    ToolCallAuthRequired,
    ToolCallAuthResolved,
    ToolCallCompleted,
    ToolCallConfirmed,
    ToolCallDelta,
    ToolCallReady,
    ToolCallResultConfirmed,
    ToolCallStarted,
    TurnCancelled,
    TurnCompleted,
    TurnStarted,
    UsageReported,
)
from agenthost.messages.reducers import STATUS_UNCHANGED, reduce_chat
from agenthost.messages.state import (
    ChatState,
    ChatStatus,
    MarkdownPart,
    ReasoningPart,
    ToolCallPart,
    Usage,
    UserMessage,
)
from agenthost.messages.state import (
    ToolCallStatus as S,
)

EDGES = {
    S.STREAMING: {S.PENDING_CONFIRMATION, S.RUNNING},
    S.RUNNING: {
        S.PENDING_CONFIRMATION,
        S.AUTH_REQUIRED,
        S.COMPLETED,
        S.PENDING_RESULT_CONFIRMATION,
    },
    S.AUTH_REQUIRED: {S.RUNNING, S.COMPLETED},
    S.PENDING_CONFIRMATION: {S.RUNNING, S.CANCELLED, S.COMPLETED, S.PENDING_RESULT_CONFIRMATION},
    S.PENDING_RESULT_CONFIRMATION: {S.COMPLETED, S.CANCELLED},
    S.COMPLETED: set(),
    S.CANCELLED: set(),
}
CALLS = st.sampled_from(["a", "b", "c"])
TURN = "t1"
OPTIONS = (
    ConfirmationOption(id="yes", label="Yes", kind=ConfirmationOptionKind.APPROVE),
    ConfirmationOption(id="no", label="No", kind=ConfirmationOptionKind.DENY),
)
MCP = ToolCallContributor(kind=ContributorKind.MCP, customization_id="m")
AUTH = McpAuthRequirement(
    reason=AuthRequiredReason.REQUIRED, resource=ProtectedResourceMetadata(resource="https://m")
)


class ToolCalls(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state = reduce_chat(
            ChatState(resource="r"), TurnStarted(turn_id=TURN, message=UserMessage(text="go"))
        )
        self.seen: dict[str, S] = {}
        self.ended = False

    def apply(self, action: object) -> None:
        before = self.state
        self.state = reduce_chat(self.state, action)  # type: ignore[arg-type]
        if isinstance(action, STATUS_UNCHANGED):  # what input_needed need not observe
            assert self.state.status == before.status, type(action).__name__
        for call in self.calls():
            before = self.seen.get(call.tool_call_id)
            if before is not None and before is not call.status:
                allowed = EDGES[before] | ({S.CANCELLED} if self.ended else set())
                assert call.status in allowed, f"{before} -> {call.status}"
            self.seen[call.tool_call_id] = call.status

    def calls(self):  # type: ignore[no-untyped-def]
        turn = self.state.active_turn or (self.state.turns[-1] if self.state.turns else None)
        if turn is None:
            return []
        return [p.tool_call for p in turn.response_parts if isinstance(p, ToolCallPart)]

    @rule(call=CALLS, mcp=st.booleans())
    def start(self, call: str, mcp: bool) -> None:
        contributor = MCP if mcp else None
        self.apply(
            ToolCallStarted(turn_id=TURN, tool_call_id=call, tool_name="t", contributor=contributor)
        )

    @rule(call=CALLS)
    def delta(self, call: str) -> None:
        self.apply(ToolCallDelta(turn_id=TURN, tool_call_id=call, content="x"))

    @rule(call=CALLS, confirmed=st.sampled_from([None, "not-needed"]), options=st.booleans())
    def ready(self, call: str, confirmed: str | None, options: bool) -> None:
        offered = OPTIONS if options else None
        self.apply(
            ToolCallReady(turn_id=TURN, tool_call_id=call, confirmed=confirmed, options=offered)
        )

    @rule(call=CALLS, approved=st.booleans(), option=st.sampled_from([None, "yes", "no", "x"]))
    def confirm(self, call: str, approved: bool, option: str | None) -> None:
        self.apply(
            ToolCallConfirmed(
                turn_id=TURN, tool_call_id=call, approved=approved, selected_option_id=option
            )
        )

    @rule(call=CALLS, check=st.booleans(), success=st.booleans())
    def complete(self, call: str, check: bool, success: bool) -> None:
        self.apply(
            ToolCallCompleted(
                turn_id=TURN,
                tool_call_id=call,
                requires_result_confirmation=check,
                success=success,
            )
        )

    @rule(call=CALLS)
    def need_auth(self, call: str) -> None:
        self.apply(ToolCallAuthRequired(turn_id=TURN, tool_call_id=call, auth=AUTH))

    @rule(call=CALLS)
    def auth_resolved(self, call: str) -> None:
        self.apply(ToolCallAuthResolved(turn_id=TURN, tool_call_id=call))

    @rule(call=CALLS, approved=st.booleans())
    def confirm_result(self, call: str, approved: bool) -> None:
        self.apply(ToolCallResultConfirmed(turn_id=TURN, tool_call_id=call, approved=approved))

    @rule(text=st.sampled_from(["a", "b"]), part=st.sampled_from(["md", "call-a"]))
    def stream(self, text: str, part: str) -> None:
        self.apply(AssistantDelta(turn_id=TURN, part_id=part, text=text))
        self.apply(ReasoningDelta(turn_id=TURN, part_id=part, content=text))

    @rule(part=st.sampled_from(["md", "r"]))
    def add_part(self, part: str) -> None:
        added = MarkdownPart(id=part) if part == "md" else ReasoningPart(id=part)
        self.apply(ResponsePartAdded(turn_id=TURN, part=added))

    @rule(tokens=st.integers(0, 5))
    def usage(self, tokens: int) -> None:
        self.apply(UsageReported(turn_id=TURN, usage=Usage(prompt_tokens=tokens)))

    @rule(cancel=st.booleans())
    def end_turn(self, cancel: bool) -> None:
        self.ended = True
        self.apply(TurnCancelled(turn_id=TURN) if cancel else TurnCompleted(turn_id=TURN))

    @invariant()
    def a_finished_turn_leaves_no_tool_call_running(self) -> None:
        if self.ended:
            assert all(call.status.terminal for call in self.calls())
            assert self.state.open_requests == ()

    @invariant()
    def input_needed_exactly_while_a_tool_call_waits_for_the_user(self) -> None:
        if self.state.active_turn is not None:
            waiting = any(call.status.waits_for_user for call in self.calls())
            assert (self.state.status is ChatStatus.INPUT_NEEDED) == waiting

    @invariant()
    def denied_and_skipped_calls_say_why(self) -> None:
        for call in self.calls():
            if call.status is S.CANCELLED:
                assert call.reason in ("denied", "skipped", "result-denied")

    @invariant()
    def only_an_mcp_servers_call_waits_for_authentication_and_only_then_has_a_challenge(
        self,
    ) -> None:
        for call in self.calls():
            waiting = call.status is S.AUTH_REQUIRED
            assert (call.auth is not None) == waiting
            if waiting:
                assert call.contributor == MCP

    @invariant()
    def a_selected_option_is_one_the_call_offered_and_only_after_its_confirmation(
        self,
    ) -> None:
        for call in self.calls():
            if call.selected_option is not None:
                assert call.selected_option in OPTIONS
                assert call.status not in (S.STREAMING, S.PENDING_CONFIRMATION)
            if call.options is not None:  # options belong to the pending confirmation
                assert call.status is S.PENDING_CONFIRMATION

    @invariant()
    def a_call_past_its_confirmation_says_how_it_was_confirmed(self) -> None:
        for call in self.calls():
            if call.status.confirmed_before:
                assert call.confirmed is not None


ToolCalls.TestCase.settings = settings(max_examples=200, stateful_step_count=30, deadline=None)
test_tool_calls_follow_one_state_machine = ToolCalls.TestCase
