"""actors/requests.py without actors: the active turn's requests to the host
(permissions, questions, client tools), their answers, and DESIGN.md rule 6."""

from typing import Any

import attrs
import structlog

from agenthost.actors.active_turn import ActiveTurn, AssistantStream
from agenthost.actors.input_answers import given
from agenthost.actors.requests import TEXT_QUESTION, RequestDesk
from agenthost.messages.commands import AnswerRequest
from agenthost.messages.common import ConfirmationOption, ConfirmationOptionKind, Markdown
from agenthost.messages.errors import ErrorCode
from agenthost.messages.events import (
    ChatEvent,
    InputCompleted,
    InputRequested,
    RequestClosed,
    RequestOpened,
    RequestOutcome,
    ToolCallConfirmed,
    ToolCallReady,
)
from agenthost.messages.fields import Json
from agenthost.messages.inputs import (
    AnswerState,
    AnswerValue,
    AnswerValueKind,
    ChatInputRequest,
    InputAnswer,
    InputOption,
    InputQuestion,
    InputQuestionKind,
    InputResponseKind,
)
from agenthost.messages.provider import HostRequestKind, HostRequestOpened
from agenthost.messages.state import RequestKind


class Desk:
    def __init__(self, owners: dict[str, str] | None = None) -> None:
        self.answers: list[dict[str, Any]] = []
        self.actions: list[ChatEvent] = []
        self.desk = RequestDesk(
            dict(owners or {}),
            lambda request_id, **answer: self.answers.append(
                {"id": request_id, **{k: v for k, v in answer.items() if v is not None}}
            ),
            self.actions.append,
            structlog.get_logger(),
        )
        self.turn = ActiveTurn(
            turn_id="t", key="run", text="hi", stream=AssistantStream("s", "c", "t")
        )

    def open(self, kind: HostRequestKind, request_id: str = "r", **fields: Any) -> None:
        self.desk.opened(
            self.turn, HostRequestOpened(turn_id="run", request_id=request_id, kind=kind, **fields)
        )

    def answer(self, request_id: str = "r", **fields: Any) -> Any:
        return self.desk.answer(self.turn, AnswerRequest(request_id=request_id, **fields))


def test_a_permission_for_a_tool_call_parks_and_makes_the_call_wait_for_confirmation() -> None:
    d = Desk()
    d.open(HostRequestKind.PERMISSION, tool_call_id="c1", tool_name="rm", arguments='{"p": 1}')
    assert "r" in d.turn.requests
    ready, opened = d.actions
    assert ready == ToolCallReady(
        turn_id="t", tool_call_id="c1", invocation_message="rm", tool_input='{"p": 1}'
    )
    assert isinstance(opened, RequestOpened) and opened.request.kind is RequestKind.PERMISSION
    assert d.answers == []


def test_an_approval_goes_to_the_provider_and_confirms_the_tool_call() -> None:
    d = Desk()
    d.open(HostRequestKind.PERMISSION, tool_call_id="c1", tool_name="rm")
    d.actions.clear()
    assert d.answer(approved=True) is None
    assert d.answers == [{"id": "r", "approved": True}]
    assert d.actions == [
        ToolCallConfirmed(turn_id="t", tool_call_id="c1", approved=True, confirmed="user-action"),
        RequestClosed(request_id="r", kind=RequestKind.PERMISSION, outcome=RequestOutcome.ANSWERED),
    ]
    assert d.turn.requests == {}


def test_a_denial_closes_the_request_as_denied() -> None:
    d = Desk()
    d.open(HostRequestKind.PERMISSION, tool_call_id="c1")
    d.answer(approved=False)
    assert d.actions[-1] == RequestClosed(
        request_id="r", kind=RequestKind.PERMISSION, outcome=RequestOutcome.DENIED
    )
    assert d.actions[-2] == ToolCallConfirmed(
        turn_id="t", tool_call_id="c1", approved=False, reason="denied"
    )


def test_an_answer_of_the_wrong_kind_is_refused_and_the_request_stays_open() -> None:
    d = Desk()
    d.open(HostRequestKind.PERMISSION)
    error = d.answer(answer="yes")
    assert error is not None and error.code is ErrorCode.INVALID_ARGUMENT
    assert "r" in d.turn.requests and d.answers == []


def test_a_question_is_answered_with_text() -> None:
    d = Desk()
    d.open(HostRequestKind.USER_INPUT, question="Which file?")
    assert d.answer(answer="main.py") is None
    [answer] = d.answers
    assert (answer["approved"], answer["answer"]) == (True, "main.py")
    assert answer["answers"] == (("answer", given("main.py")),)


def test_an_answer_to_a_request_that_is_not_open_is_not_found() -> None:
    d = Desk()
    error = d.answer("nope", approved=True)
    assert error is not None and error.code is ErrorCode.NOT_FOUND


def test_a_call_to_a_tool_no_client_provides_is_answered_with_an_error_at_once() -> None:
    d = Desk()
    d.open(HostRequestKind.CLIENT_TOOL, "c1", tool_call_id="c1", tool_name="fetch")
    assert d.turn.requests == {}
    assert d.answers == [{"id": "c1", "error": "No connected client provides the tool 'fetch'."}]


def test_a_client_tool_call_parks_for_the_client_that_executes_it() -> None:
    d = Desk({"fetch": "browser"})
    d.open(HostRequestKind.CLIENT_TOOL, "c1", tool_call_id="c1", tool_name="fetch")
    assert d.turn.requests["c1"].client_id == "browser"
    refused = d.answer("c1", result="<html>", client_id="other")
    assert refused is not None and refused.code is ErrorCode.INVALID_ARGUMENT
    assert d.answer("c1", result="<html>", client_id="browser") is None
    assert d.answers == [{"id": "c1", "result": "<html>"}]


def test_a_client_tools_early_result_wins_when_its_request_comes() -> None:
    d = Desk({"fetch": "browser"})
    d.turn.tool_calls["c1"] = "fetch"  # the call started; its request is still on its way
    assert d.answer("c1", result="early") is None
    d.open(HostRequestKind.CLIENT_TOOL, "c1", tool_call_id="c1", tool_name="fetch")
    assert d.answers == [{"id": "c1", "result": "early"}]
    assert d.turn.requests == {}


def test_a_removed_client_fails_every_call_it_left_parked() -> None:
    d = Desk({"fetch": "browser", "ls": "shell"})
    d.open(HostRequestKind.CLIENT_TOOL, "c1", tool_call_id="c1", tool_name="fetch")
    d.open(HostRequestKind.CLIENT_TOOL, "c2", tool_call_id="c2", tool_name="ls")
    d.actions.clear()
    d.desk.client_removed(d.turn, "browser")
    assert d.answers == [{"id": "c1", "error": "The client 'browser' is gone."}]
    assert d.actions == [
        RequestClosed(request_id="c1", kind=RequestKind.CLIENT_TOOL, outcome=RequestOutcome.FAILED)
    ]
    assert list(d.turn.requests) == ["c2"]
    assert d.desk.owners == {"ls": "shell"}


def test_a_request_for_a_turn_no_longer_active_is_denied_not_dropped() -> None:
    d = Desk()
    d.desk.stale(HostRequestOpened(turn_id="old", request_id="r", kind=HostRequestKind.PERMISSION))
    assert d.answers == [
        {
            "id": "r",
            "approved": False,
            "error": "The turn this request belongs to is no longer active.",
        }
    ]


def test_the_turns_end_refuses_and_closes_whatever_it_left_open() -> None:
    d = Desk()
    d.open(HostRequestKind.USER_INPUT, question="?")
    d.actions.clear()
    d.desk.turn_ended(d.turn)
    assert d.answers == [{"id": "r", "approved": False, "error": "The turn ended."}]
    assert d.actions == [
        RequestClosed(request_id="r", kind=RequestKind.USER_INPUT, outcome=RequestOutcome.CANCELLED)
    ]
    assert d.turn.requests == {}


# -- AHP 1.1: confirmation options, edited input, input requests -------------------------

ALLOW = ConfirmationOption(
    id="allow-session", label="Allow this session", kind=ConfirmationOptionKind.APPROVE
)
REJECT = ConfirmationOption(id="reject", label="No", kind=ConfirmationOptionKind.DENY)


def test_a_permissions_options_are_offered_on_the_waiting_tool_call() -> None:
    d = Desk()
    d.open(HostRequestKind.PERMISSION, tool_call_id="c1", options=(ALLOW, REJECT), editable=True)
    ready, opened = d.actions
    assert isinstance(ready, ToolCallReady)
    assert (ready.options, ready.editable) == ((ALLOW, REJECT), True)
    assert isinstance(opened, RequestOpened) and opened.request.options == (ALLOW, REJECT)


def test_a_denials_reason_and_words_go_to_the_provider_and_into_the_action() -> None:
    d = Desk()
    d.open(HostRequestKind.PERMISSION, tool_call_id="c1")
    d.actions.clear()
    words = Markdown(markdown="use **make**")
    assert d.answer(approved=False, reason="skipped", reason_message=words) is None
    assert d.answers == [
        {"id": "r", "approved": False, "reason": "skipped", "reason_message": "use **make**"}
    ]
    confirmed = d.actions[0]
    assert isinstance(confirmed, ToolCallConfirmed)
    assert (confirmed.reason, confirmed.reason_message) == ("skipped", words)


def test_an_option_chosen_approves_by_its_kind_and_is_named_to_the_provider() -> None:
    d = Desk()
    d.open(HostRequestKind.PERMISSION, tool_call_id="c1", options=(ALLOW, REJECT))
    d.actions.clear()
    assert d.answer(option="allow-session") is None
    assert d.answers == [{"id": "r", "approved": True, "option": "allow-session"}]
    confirmed = d.actions[0]
    assert isinstance(confirmed, ToolCallConfirmed)
    assert (confirmed.approved, confirmed.selected_option_id) == (True, "allow-session")


def test_a_deny_option_denies() -> None:
    d = Desk()
    d.open(HostRequestKind.PERMISSION, tool_call_id="c1", options=(ALLOW, REJECT))
    d.answer(option="reject")
    assert d.answers == [{"id": "r", "approved": False, "option": "reject", "reason": "denied"}]
    assert d.actions[-1] == RequestClosed(
        request_id="r", kind=RequestKind.PERMISSION, outcome=RequestOutcome.DENIED
    )


def test_an_option_not_offered_or_contradicting_approved_is_refused() -> None:
    d = Desk()
    d.open(HostRequestKind.PERMISSION, tool_call_id="c1", options=(ALLOW, REJECT))
    for answer in ({"option": "always"}, {"option": "reject", "approved": True}):
        error = d.answer(**answer)
        assert error is not None and error.code is ErrorCode.INVALID_ARGUMENT
    assert "r" in d.turn.requests and d.answers == []


def test_an_edited_input_goes_to_the_provider_and_overrides_the_calls_input() -> None:
    d = Desk()
    d.open(HostRequestKind.PERMISSION, tool_call_id="c1", editable=True, arguments='{"p": 1}')
    d.actions.clear()
    assert d.answer(approved=True, edited_input='{"p": 2}') is None
    assert d.answers == [{"id": "r", "approved": True, "edited_input": '{"p": 2}'}]
    confirmed = d.actions[0]
    assert isinstance(confirmed, ToolCallConfirmed) and confirmed.edited_tool_input == '{"p": 2}'


def test_an_edited_input_is_refused_where_the_call_takes_none_or_it_is_not_an_object() -> None:
    plain, editable = Desk(), Desk()
    plain.open(HostRequestKind.PERMISSION, tool_call_id="c1")
    editable.open(HostRequestKind.PERMISSION, tool_call_id="c1", editable=True)
    for desk, answer in (
        (plain, {"approved": True, "edited_input": "{}"}),
        (editable, {"approved": True, "edited_input": "[1]"}),
        (editable, {"approved": False, "edited_input": "{}"}),
    ):
        error = desk.answer(**answer)
        assert error is not None and error.code is ErrorCode.INVALID_ARGUMENT
    assert plain.answers == [] and editable.answers == []


def test_a_permission_is_found_by_its_tool_calls_id() -> None:
    d = Desk()
    d.open(HostRequestKind.PERMISSION, "r-42", tool_call_id="c1")
    assert d.answer("c1", approved=True) is None
    assert d.answers == [{"id": "r-42", "approved": True}]


def test_a_question_is_the_chats_input_request_a_bare_one_with_one_text_question() -> None:
    d = Desk()
    d.open(HostRequestKind.USER_INPUT, question="Which file?")
    requested = d.actions[-1]
    assert isinstance(requested, InputRequested)
    assert requested.request == ChatInputRequest(
        id="r",
        message="Which file?",
        questions=(
            InputQuestion(id=TEXT_QUESTION, kind=InputQuestionKind.TEXT, message="Which file?"),
        ),
    )


PICK = InputQuestion(
    id="file",
    kind=InputQuestionKind.SINGLE_SELECT,
    message="Which file?",
    options=(InputOption(id="a", label="main.py"), InputOption(id="b", label="util.py")),
)


def test_a_choice_answered_by_its_label_is_selected_by_id_and_completes_the_request() -> None:
    d = Desk()
    d.open(HostRequestKind.USER_INPUT, questions=(PICK,))
    d.actions.clear()
    assert d.answer(answer="util.py") is None
    selected = InputAnswer(
        state=AnswerState.SUBMITTED,
        value=AnswerValue(kind=AnswerValueKind.SELECTED, value=Json.of("b")),
    )
    [answer] = d.answers
    assert (answer["answer"], answer["answers"]) == ("util.py", (("file", selected),))
    assert d.actions == [
        InputCompleted(
            request_id="r", response=InputResponseKind.ACCEPT, answers=(("file", selected),)
        ),
        RequestClosed(request_id="r", kind=RequestKind.USER_INPUT, outcome=RequestOutcome.ANSWERED),
    ]


def test_an_answer_outside_the_choices_is_refused_unless_freeform_is_allowed() -> None:
    strict, free = Desk(), Desk()
    strict.open(HostRequestKind.USER_INPUT, questions=(PICK,))
    free.open(
        HostRequestKind.USER_INPUT, questions=(attrs.evolve(PICK, allow_freeform_input=True),)
    )
    error = strict.answer(answers=(("file", given("other.py")),))
    assert error is not None and error.code is ErrorCode.INVALID_ARGUMENT
    assert free.answer(answers=(("file", given("other.py")),)) is None
    assert free.answers[0]["answer"] == "other.py"


def test_a_declined_question_is_completed_as_declined() -> None:
    d = Desk()
    d.open(HostRequestKind.USER_INPUT, questions=(PICK,))
    d.actions.clear()
    assert d.answer(approved=False) is None
    assert d.answers == [{"id": "r", "approved": False, "error": "The user declined to answer."}]
    assert d.actions[0] == InputCompleted(request_id="r", response=InputResponseKind.DECLINE)
