"""What a chat hears about what its turn asks, through the sync surface with the
scripted provider: input answers synced while a request is open and taken by
the answer that completes it, a client tool's held result and content, the
resume of a turn stopped at a resumable error, and the chat's flags."""

import pytest

from agenthost.actors import Chat, Host
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.messages.events import (
    TERMINAL_EVENTS,
    InputRequested,
    RequestOpened,
    ToolCallCompleted,
    ToolCallContentChanged,
    ToolCallResultConfirmed,
    TurnCompleted,
    TurnResumed,
)
from agenthost.messages.inputs import AnswerState, InputAnswer
from agenthost.messages.state import ChatStatus, ClientTool, RequestKind, ToolCallStatus
from agenthost.providers.scripted import (
    AskUser,
    ClientToolCall,
    Gate,
    Reject,
    Say,
    ScriptedProvider,
)
from tests.fakes.events import events_until

WAIT_S = 10.0
COLOUR = AskUser("Which colour?", choices=("red", "blue"), freeform=False)


def chat_of(host: Host) -> Chat:
    return host.create_session().chat()


def test_a_synced_answer_is_taken_by_the_answer_that_accepts_the_request(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("ask", COLOUR, Say("ok"))
    chat = chat_of(host)
    sub = chat.subscribe()
    turn = chat.send("ask")
    [asked] = [e for e in events_until(sub, lambda e: isinstance(e, InputRequested))][-1:]
    assert isinstance(asked, InputRequested)
    request = asked.request
    question = request.questions[0].id  # type: ignore[index]
    draft = InputAnswer(state=AnswerState.DRAFT)
    chat.set_input_answer(request.id, question, draft)
    assert chat.state().input_requests[0].answers == ((question, draft),)
    chat.set_input_answer(request.id, question, "blue")  # a submitted one replaces it
    with pytest.raises(AgentHostError) as refused:
        chat.set_input_answer(request.id, "nope", "red")
    assert refused.value.code is ErrorCode.INVALID_ARGUMENT
    chat.answer(request.id, answers={})  # nothing of its own: the synced answer
    assert turn.result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    assert provider.model_inputs[-1] == "blue"
    with pytest.raises(AgentHostError) as late:
        chat.set_input_answer(request.id, question, "red")
    assert late.value.code is ErrorCode.NOT_FOUND


def test_a_held_result_reaches_the_provider_only_once_confirmed(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("fetch", ClientToolCall("fetch"), Say("done"))
    session = host.create_session()
    session.set_client_tools("page", [ClientTool(name="fetch")])
    chat = session.chat()
    sub = chat.subscribe()
    turn = chat.send("fetch")
    [opened] = events_until(sub, lambda e: isinstance(e, RequestOpened))[-1:]
    assert isinstance(opened, RequestOpened) and opened.request.kind is RequestKind.CLIENT_TOOL
    call_id = opened.request.request_id
    with pytest.raises(AgentHostError):  # only the client that executes it
        chat.change_tool_content(call_id, '[{"type": "text", "text": "x"}]', client_id="other")
    chat.change_tool_content(call_id, '[{"type": "text", "text": "half"}]', client_id="page")
    chat.answer(call_id, result="all", client_id="page", confirm_result=True)
    events = events_until(sub, lambda e: isinstance(e, ToolCallCompleted))
    assert any(isinstance(e, ToolCallContentChanged) for e in events)
    parts = chat.state().active_turn.response_parts  # type: ignore[union-attr]
    [call] = [p.tool_call for p in parts if hasattr(p, "tool_call")]  # type: ignore[attr-defined]
    assert call.status is ToolCallStatus.PENDING_RESULT_CONFIRMATION
    assert provider.answers == []
    chat.confirm_tool_result(call_id, approved=True)
    assert turn.result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    assert [a.result for a in provider.answers] == ["all"]
    assert any(
        isinstance(e, ToolCallResultConfirmed)
        for e in events_until(sub, lambda e: isinstance(e, ToolCallResultConfirmed))
    )


def test_a_resumed_turn_runs_again_and_ends_once(host: Host, provider: ScriptedProvider) -> None:
    provider.on("go", Say("first "), Reject("overloaded", resumable=True))
    chat = chat_of(host)
    sub = chat.subscribe()
    first = chat.send("go").result(timeout=WAIT_S)
    assert first.state is OutcomeState.ERROR and first.error is not None and first.error.resumable
    turn_id = first.turn_id or ""
    provider.on("go", Gate("back"), Say("then back"))
    chat.resume(turn_id)
    events_until(sub, lambda e: isinstance(e, TurnResumed))
    assert chat.state().active_turn_id == turn_id
    with pytest.raises(AgentHostError, match="is running"):  # one run at a time
        chat.resume(turn_id)
    provider.open("back")
    ended = events_until(sub, lambda e: isinstance(e, TERMINAL_EVENTS))
    assert [type(e) for e in ended if isinstance(e, TERMINAL_EVENTS)] == [TurnCompleted]
    [turn] = chat.state().turns
    assert (turn.id, turn.assistant_text) == (turn_id, "first then back")
    assert provider.prompts.count("go") == 2


def test_a_chat_is_marked_unread_and_archived(host: Host) -> None:
    chat = chat_of(host)
    status = chat.set_flags(read=False, archived=True)
    assert int(status) & int(ChatStatus.IS_READ) == 0
    assert int(status) & int(ChatStatus.IS_ARCHIVED)
    assert chat.set_flags(archived=False) & ChatStatus.IS_ARCHIVED == 0
