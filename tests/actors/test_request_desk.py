"""actors/requests.py without actors: the active turn's requests to the host
(permissions, questions, client tools), their answers, and DESIGN.md rule 6."""

from typing import Any

import structlog

from agenthost.actors.active_turn import ActiveTurn, AssistantStream
from agenthost.actors.requests import RequestDesk
from agenthost.messages.commands import AnswerRequest
from agenthost.messages.errors import ErrorCode
from agenthost.messages.events import (
    ChatEvent,
    RequestClosed,
    RequestOpened,
    RequestOutcome,
    ToolCallConfirmed,
    ToolCallReady,
)
from agenthost.messages.provider import HostRequestKind, HostRequestOpened
from agenthost.messages.state import RequestKind


class Desk:
    def __init__(self, owners: dict[str, str] | None = None) -> None:
        self.answers: list[dict[str, Any]] = []
        self.actions: list[ChatEvent] = []
        self.desk = RequestDesk(
            dict(owners or {}),
            lambda request_id, **answer: self.answers.append({"id": request_id, **answer}),
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
        RequestClosed(request_id="r", outcome=RequestOutcome.ANSWERED),
    ]
    assert d.turn.requests == {}


def test_a_denial_closes_the_request_as_denied() -> None:
    d = Desk()
    d.open(HostRequestKind.PERMISSION, tool_call_id="c1")
    d.answer(approved=False)
    assert d.actions[-1] == RequestClosed(request_id="r", outcome=RequestOutcome.DENIED)
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
    assert d.answers == [{"id": "r", "answer": "main.py"}]


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
    assert d.actions == [RequestClosed(request_id="c1", outcome=RequestOutcome.FAILED)]
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
    assert d.actions == [RequestClosed(request_id="r", outcome=RequestOutcome.CANCELLED)]
    assert d.turn.requests == {}
