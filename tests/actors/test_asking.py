"""AHP 1.1 through the host, with the scripted provider: reasoning in the
turn's parts, tool confirmations with options and an edited input, questions
with choices as the chat's input requests and the session's inputNeeded, and
the answers going back to the provider as the user gave them."""

import asyncio
import inspect
from pathlib import Path
from typing import Any

import pytest

from agenthost.actors import Chat, Host, Session, Subscription
from agenthost.actors.aio import AsyncChat, AsyncSession
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.messages.common import ConfirmationOption, ConfirmationOptionKind
from agenthost.messages.events import (
    ChatEvent,
    InputCompleted,
    InputRequested,
    ReasoningDelta,
    RequestOpened,
    ResponsePartAdded,
    ToolCallConfirmed,
    ToolCallReady,
)
from agenthost.messages.inputs import AnswerValueKind, InputResponseKind
from agenthost.messages.state import (
    MarkdownPart,
    ReasoningPart,
    SessionInputKind,
    ToolCallPart,
    ToolCallStatus,
)
from agenthost.providers.scripted import AskUser, Gate, Say, ScriptedProvider, Think, ToolCall
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.fakes.events import events_until

ONCE = ConfirmationOption(id="once", label="Allow once", kind=ConfirmationOptionKind.APPROVE)
SESSION = ConfirmationOption(
    id="session", label="Allow in this session", kind=ConfirmationOptionKind.APPROVE
)
NO = ConfirmationOption(id="no", label="Deny", kind=ConfirmationOptionKind.DENY)
WAIT_S = 10.0


def opened(sub: Subscription) -> RequestOpened:
    event = events_until(sub, lambda e: isinstance(e, RequestOpened))[-1]
    assert isinstance(event, RequestOpened)
    return event


def chat_of(host: Host) -> tuple[Session, Chat]:
    session = host.create_session()
    return session, session.chat()


# -- reasoning ----------------------------------------------------------------------------


def test_reasoning_streams_into_a_reasoning_part_apart_from_the_reply(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("think", Think("Let me see."), Think(" Yes."), Say("Four."))
    _, chat = chat_of(host)
    sub = chat.subscribe()
    outcome = chat.send("think").result(timeout=WAIT_S)
    assert (outcome.state, outcome.text) == (OutcomeState.COMPLETE, "Four.")
    events = events_until(sub, lambda e: isinstance(e, ResponsePartAdded) and _md(e))
    [added] = [e for e in events if isinstance(e, ResponsePartAdded)][:1]
    assert isinstance(added.part, ReasoningPart)
    assert [e.content for e in events if isinstance(e, ReasoningDelta)] == ["Let me see.", " Yes."]
    [turn] = chat.state().turns
    assert [(type(p).__name__, p.content) for p in turn.response_parts] == [  # type: ignore[union-attr]
        ("ReasoningPart", "Let me see. Yes."),
        ("MarkdownPart", "Four."),
    ]


def _md(event: ResponsePartAdded) -> bool:
    return isinstance(event.part, MarkdownPart)


def test_reasoning_between_two_runs_of_text_sits_between_their_parts(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("go", Say("a"), Think("hmm"), Say("b"))
    _, chat = chat_of(host)
    assert chat.send("go").result(timeout=WAIT_S).text == "ab"
    [turn] = chat.state().turns
    kinds = [type(p) for p in turn.response_parts]
    assert kinds == [MarkdownPart, ReasoningPart, MarkdownPart]


# -- tool confirmations --------------------------------------------------------------------


def test_a_permission_offers_its_options_and_the_chosen_one_reaches_the_provider(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("rm", ToolCall("rm", '{"path": "x"}', options=(ONCE, SESSION, NO)), Say("done"))
    _, chat = chat_of(host)
    sub = chat.subscribe()
    turn = chat.send("rm")
    request = opened(sub).request
    assert request.options == (ONCE, SESSION, NO)
    [call] = _tool_calls(chat)
    assert (call.status, call.options) == (ToolCallStatus.PENDING_CONFIRMATION, (ONCE, SESSION, NO))
    chat.answer(request.request_id, option="session")
    assert turn.result(timeout=WAIT_S).text == "done"
    [answer] = provider.answers
    assert (answer.approved, answer.option) == (True, "session")
    [call] = _tool_calls(chat, ended=True)
    assert call.status is ToolCallStatus.COMPLETED
    assert call.selected_option is not None and call.selected_option.id == "session"


def test_a_deny_option_denies_and_the_tool_does_not_run(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("rm", ToolCall("rm", options=(ONCE, NO)), Say("left it"))
    _, chat = chat_of(host)
    sub = chat.subscribe()
    turn = chat.send("rm")
    chat.answer(opened(sub).request.tool_call_id or "", option="no")  # by its tool call id
    assert turn.result(timeout=WAIT_S).text == "left it"
    assert provider.answers[0].approved is False
    [call] = _tool_calls(chat, ended=True)
    assert call.status is ToolCallStatus.CANCELLED


def test_an_edited_input_is_what_the_tool_runs_with(host: Host, provider: ScriptedProvider) -> None:
    provider.on("write", ToolCall("write", '{"path": "a.txt"}', editable=True), Say("ok"))
    _, chat = chat_of(host)
    sub = chat.subscribe()
    turn = chat.send("write")
    request = opened(sub).request
    assert request.editable
    chat.answer(request.request_id, approved=True, edited_input='{"path": "b.txt"}')
    assert turn.result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    assert provider.answers[0].edited_input == '{"path": "b.txt"}'
    [call] = _tool_calls(chat, ended=True)
    assert call.tool_input == '{"path": "b.txt"}'


def test_wrong_answers_to_a_permission_are_refused_and_it_stays_open(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("rm", ToolCall("rm", options=(ONCE, NO)), Say("ok"))
    _, chat = chat_of(host)
    sub = chat.subscribe()
    turn = chat.send("rm")
    request_id = opened(sub).request.request_id
    for wrong in ({"option": "always"}, {"approved": True, "edited_input": "{}"}):
        with pytest.raises(AgentHostError) as refused:
            chat.answer(request_id, **wrong)
        assert refused.value.code is ErrorCode.INVALID_ARGUMENT
    chat.answer(request_id, approved=True)
    assert turn.result(timeout=WAIT_S).text == "ok"


def _tool_calls(chat: Chat, *, ended: bool = False) -> list[Any]:
    state = chat.state()
    turn = state.turns[-1] if ended else state.active_turn
    assert turn is not None
    return [p.tool_call for p in turn.response_parts if isinstance(p, ToolCallPart)]


# -- questions -----------------------------------------------------------------------------


def test_a_question_with_choices_is_an_input_request_answered_by_a_choice(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("ask", AskUser("Which file?", choices=("main.py", "util.py")), Say("ok"))
    _, chat = chat_of(host)
    sub = chat.subscribe()
    turn = chat.send("ask")
    events = events_until(sub, lambda e: isinstance(e, InputRequested))
    [asked] = [e.request for e in events if isinstance(e, InputRequested)]
    [question] = asked.questions or ()
    assert [o.label for o in question.options or ()] == ["main.py", "util.py"]
    assert chat.state().input_requests == (asked,)
    chat.answer(asked.id, answer="util.py")
    assert turn.result(timeout=WAIT_S).text == "ok"
    completed = _completed(sub, asked.id)
    assert completed.response == InputResponseKind.ACCEPT
    [(question_id, answer)] = completed.answers or ()
    assert question_id == question.id and answer.value is not None
    assert (answer.value.kind, answer.value.value.value) == (AnswerValueKind.SELECTED, "c2")
    assert provider.model_inputs[-1] == "util.py"  # the model read the choice's label


def test_answers_by_question_id_and_freeform_text(host: Host, provider: ScriptedProvider) -> None:
    provider.on("ask", AskUser("Which file?", choices=("main.py",)), Say("ok"))
    _, chat = chat_of(host)
    sub = chat.subscribe()
    turn = chat.send("ask")
    request = opened(sub).request
    [question] = request.questions
    chat.answer(request.request_id, answers={question.id: "other.py"})
    assert turn.result(timeout=WAIT_S).text == "ok"
    assert provider.model_inputs[-1] == "other.py"


def test_a_declined_question_tells_the_provider_so(host: Host, provider: ScriptedProvider) -> None:
    provider.on("ask", AskUser("Which file?"), Say("fine"))
    _, chat = chat_of(host)
    sub = chat.subscribe()
    turn = chat.send("ask")
    request_id = opened(sub).request.request_id
    chat.answer(request_id, approved=False)
    assert turn.result(timeout=WAIT_S).text == "fine"
    assert _completed(sub, request_id).response == InputResponseKind.DECLINE
    assert provider.answers[0].approved is False


def _completed(sub: Subscription, request_id: str) -> InputCompleted:
    def done(event: ChatEvent) -> bool:
        return isinstance(event, InputCompleted) and event.request_id == request_id

    event = events_until(sub, done)[-1]
    assert isinstance(event, InputCompleted)
    return event


def test_the_session_lists_what_its_chats_wait_on_the_user_for_until_answered(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("go", ToolCall("rm", options=(ONCE, NO)), AskUser("Sure?"), Gate("end"))
    session, chat = chat_of(host)
    sub = chat.subscribe()
    chat.send("go")
    request = opened(sub).request
    [entry] = session.state().input_requests
    assert (entry.kind, entry.chat) == (SessionInputKind.TOOL_CONFIRMATION, chat.state().resource)
    assert entry.tool_call is not None and entry.tool_call.options == (ONCE, NO)
    chat.answer(request.request_id, option="once")
    question = opened(sub).request
    [entry] = session.state().input_requests
    assert entry.kind == SessionInputKind.CHAT_INPUT
    assert entry.request is not None and entry.request.id == question.request_id
    chat.answer(question.request_id, answer="yes")
    provider.wait_reached("end")
    chat.state()  # what the chat told its session is ahead of the next ask
    assert session.state().input_requests == ()
    provider.open("end")


def test_a_turns_end_removes_its_entries_from_the_session(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("go", AskUser("Sure?"))
    session, chat = chat_of(host)
    sub = chat.subscribe()
    chat.send("go")
    opened(sub)
    assert len(session.state().input_requests) == 1
    chat.cancel()
    chat.state()
    assert session.state().input_requests == ()


# -- both surfaces ----------------------------------------------------------------------


def test_answer_takes_the_same_parameters_on_both_surfaces() -> None:
    sync, aio = inspect.signature(Chat.answer), inspect.signature(AsyncChat.answer)
    assert list(sync.parameters) == list(aio.parameters)
    for name, parameter in sync.parameters.items():
        assert (parameter.kind, parameter.default) == (
            aio.parameters[name].kind,
            aio.parameters[name].default,
        )
    assert list(inspect.signature(Session.state).parameters) == list(
        inspect.signature(AsyncSession.state).parameters
    )


def test_the_async_surface_answers_with_an_option(db_path: Path, clock: FakeClock) -> None:
    provider = ScriptedProvider().on("rm", ToolCall("rm", options=(ONCE, NO)), Say("done"))

    async def main() -> None:
        from agenthost.actors.aio import AsyncHost

        async with await AsyncHost.start(
            store=SqliteStore(db_path), providers={"scripted": provider}, clock=clock
        ) as host:
            chat = await (await host.create_session()).chat()
            events = await chat.subscribe()
            turn = await chat.send("rm")
            async for event in events:
                if isinstance(event, ToolCallReady) and event.options:
                    await chat.answer(event.tool_call_id, option="once")
                if isinstance(event, ToolCallConfirmed):
                    assert event.selected_option_id == "once"
                    break
            assert (await turn).text == "done"

    asyncio.run(asyncio.wait_for(main(), 30))
