"""Input requests over random action sequences (the pure reducer: reducers.py's
invariants 5, 6 and 8)."""

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from agenthost.messages.events import (
    InputAnswerChanged,
    InputCompleted,
    InputRequested,
    Truncated,
    TurnCompleted,
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
from agenthost.messages.state import ChatState, ChatStatus, UserMessage

REQUESTS = st.sampled_from(["a", "b", "c"])
QUESTIONS = st.sampled_from(["q1", "q2"])
ANSWERS = st.one_of(
    st.none(),
    st.builds(
        InputAnswer,
        state=st.sampled_from([AnswerState.DRAFT, AnswerState.SUBMITTED]),
        value=st.builds(
            AnswerValue, kind=st.just(AnswerValueKind.TEXT), value=st.text(max_size=2).map(Json.of)
        ),
    ),
    st.just(InputAnswer(state=AnswerState.SKIPPED)),
)


class InputRequests(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state = ChatState(resource="r")
        self.turn = 0
        self.answers: dict[str, dict[str, InputAnswer]] = {}  # the model: what each open one holds

    def apply(self, action: object) -> None:
        self.state = reduce_chat(self.state, action, 1)  # type: ignore[arg-type]

    @rule()
    def start_turn(self) -> None:
        self.turn += 1
        self.apply(TurnStarted(turn_id=f"t{self.turn}", message=UserMessage(text="go")))

    @rule(request=REQUESTS, resend_answers=st.booleans())
    def request(self, request: str, resend_answers: bool) -> None:
        answers = (("q1", InputAnswer(state=AnswerState.SKIPPED)),) if resend_answers else None
        self.apply(InputRequested(request=ChatInputRequest(id=request, answers=answers)))
        if answers is not None or request not in self.answers:
            self.answers[request] = dict(answers or ())

    @rule(request=REQUESTS, question=QUESTIONS, answer=ANSWERS)
    def answer(self, request: str, question: str, answer: InputAnswer | None) -> None:
        self.apply(InputAnswerChanged(request_id=request, question_id=question, answer=answer))
        if request in self.answers:
            if answer is None:
                self.answers[request].pop(question, None)
            else:
                self.answers[request][question] = answer

    @rule(request=REQUESTS, response=st.sampled_from(InputResponseKind))
    def complete(self, request: str, response: InputResponseKind) -> None:
        self.apply(InputCompleted(request_id=request, response=response))
        self.answers.pop(request, None)

    @rule(truncate=st.booleans())
    def end(self, truncate: bool) -> None:
        ends_a_turn = self.state.active_turn is not None
        self.apply(Truncated() if truncate else TurnCompleted(turn_id=f"t{self.turn}"))
        if truncate or ends_a_turn:  # a turn's end drops the requests; truncation always does
            self.answers.clear()

    @invariant()
    def the_open_requests_hold_exactly_the_answers_synced_since_they_were_asked(self) -> None:
        held = {r.id: dict(r.answers or ()) for r in self.state.input_requests}
        assert held == self.answers

    @invariant()
    def the_chat_is_input_needed_exactly_while_a_request_is_open(self) -> None:
        waiting = self.state.status & ChatStatus.INPUT_NEEDED == ChatStatus.INPUT_NEEDED
        if self.state.input_requests:
            assert waiting
        elif self.state.active_turn is None:
            assert not waiting

    @invariant()
    def a_request_leaves_no_empty_answers_behind(self) -> None:
        assert all(r.answers is None or r.answers for r in self.state.input_requests)


InputRequests.TestCase.settings = settings(max_examples=100, stateful_step_count=25, deadline=None)
test_input_requests_follow_their_lifecycle = InputRequests.TestCase
