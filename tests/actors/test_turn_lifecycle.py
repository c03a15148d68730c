"""Tools, permissions, user input, client tools and closing abandoned turns
(DESIGN.md rules 2 and 6)."""

from pathlib import Path

import pytest

from agenthost.actors import Chat, Host
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.messages.commands import CallState
from agenthost.messages.events import RequestClosed, RequestOpened, RequestOutcome
from agenthost.messages.state import (
    ChatStatus,
    ClientTool,
    RequestKind,
    ToolCallPart,
    ToolCallStatus,
)
from agenthost.providers.scripted import (
    AskUser,
    ClientToolCall,
    DropCompletion,
    Gate,
    Reject,
    Say,
    ScriptedProvider,
    SettleCall,
    ToolCall,
)
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.fakes.runner import delivered, from_provider


@pytest.fixture
def start(start_host):  # type: ignore[no-untyped-def]
    return start_host


def next_of(sub, kind: type, timeout: float = 10.0):  # type: ignore[no-untyped-def]
    while not isinstance(event := sub.next(timeout), kind):
        pass
    return event


def tool_calls(chat: Chat) -> list[tuple[str, ToolCallStatus, str | None]]:
    turn = chat.state().turns[-1]
    return [
        (p.tool_call.tool_name, p.tool_call.status, p.tool_call.reason)
        for p in turn.response_parts
        if isinstance(p, ToolCallPart)
    ]


# -- tools and permissions -----------------------------------------------------------------


def test_a_tool_without_permission_runs_and_completes(start) -> None:
    provider = ScriptedProvider().on("go", ToolCall("ls", needs_permission=False), Say("done"))
    chat = start(provider).create_session().chat()
    assert chat.send("go").result(timeout=10).text == "done"
    assert tool_calls(chat) == [("ls", ToolCallStatus.COMPLETED, None)]


@pytest.mark.parametrize("approved", [True, False])
def test_a_permission_request_waits_for_the_user_and_the_answer_drives_the_tool(
    start, approved: bool
) -> None:
    provider = ScriptedProvider().on("go", ToolCall("rm", needs_permission=True), Say("after"))
    session = start(provider).create_session()
    chat = session.chat()
    sub = chat.subscribe()
    turn = chat.send("go")
    opened = next_of(sub, RequestOpened)
    assert opened.request.kind is RequestKind.PERMISSION
    assert opened.request.tool_name == "rm"
    assert chat.state().status is ChatStatus.INPUT_NEEDED
    assert session.status() is ChatStatus.INPUT_NEEDED
    chat.answer(opened.request.request_id, approved=approved)
    closed = next_of(sub, RequestClosed)
    assert closed.outcome is (RequestOutcome.ANSWERED if approved else RequestOutcome.DENIED)
    assert turn.result(timeout=10).state is OutcomeState.COMPLETE
    expected = (
        ("rm", ToolCallStatus.COMPLETED, None)
        if approved
        else ("rm", ToolCallStatus.CANCELLED, "denied")
    )
    assert tool_calls(chat) == [expected]
    assert session.status() is ChatStatus.IDLE


def test_a_turn_end_skips_unfinished_tool_calls_and_closes_open_requests(start) -> None:
    provider = ScriptedProvider().on("go", ToolCall("rm"), Say("never"))
    chat = start(provider).create_session().chat()
    sub = chat.subscribe()
    turn = chat.send("go")
    opened = next_of(sub, RequestOpened)
    chat.cancel()
    assert turn.result(timeout=10).state is OutcomeState.CANCELLED
    assert next_of(sub, RequestClosed).outcome is RequestOutcome.CANCELLED
    assert tool_calls(chat) == [("rm", ToolCallStatus.CANCELLED, "skipped")]
    assert chat.state().open_requests == ()
    with pytest.raises(AgentHostError) as caught:
        chat.answer(opened.request.request_id, approved=True)
    assert caught.value.code is ErrorCode.NOT_FOUND


def test_a_question_to_the_user_is_answered_with_text(start) -> None:
    provider = ScriptedProvider().on("go", AskUser("Which file?"), Say("ok"))
    chat = start(provider).create_session().chat()
    sub = chat.subscribe()
    turn = chat.send("go")
    opened = next_of(sub, RequestOpened)
    assert (opened.request.kind, opened.request.question) == (RequestKind.USER_INPUT, "Which file?")
    with pytest.raises(AgentHostError) as wrong_kind:
        chat.answer(opened.request.request_id, approved=True)
    assert wrong_kind.value.code is ErrorCode.INVALID_ARGUMENT
    chat.answer(opened.request.request_id, answer="main.py")
    assert turn.result(timeout=10).text == "ok"
    assert "main.py" in provider.model_inputs


# -- client tools ----------------------------------------------------------------------------


def test_a_client_tool_call_waits_for_its_client_and_nothing_is_answered_twice(start) -> None:
    provider = ScriptedProvider().on("go", ClientToolCall("fetch", '{"url": "x"}'), Say("got it"))
    session = start(provider).create_session()
    session.set_client_tools("browser", [ClientTool(name="fetch")])
    chat = session.chat()
    sub = chat.subscribe()
    turn = chat.send("go")
    opened = next_of(sub, RequestOpened)
    assert (opened.request.kind, opened.request.client_id) == (RequestKind.CLIENT_TOOL, "browser")
    with pytest.raises(AgentHostError) as other_client:
        chat.answer(opened.request.request_id, result="forged", client_id="intruder")
    assert other_client.value.code is ErrorCode.INVALID_ARGUMENT
    chat.answer(opened.request.request_id, result="<html>", client_id="browser")
    with pytest.raises(AgentHostError) as twice:
        chat.answer(opened.request.request_id, result="again", client_id="browser")
    assert twice.value.code is ErrorCode.NOT_FOUND
    assert turn.result(timeout=10).text == "got it"
    answers = [a for a in provider.answers if a.request_id == opened.request.request_id]
    assert [a.result for a in answers] == ["<html>"]


def test_removing_a_client_fails_every_call_it_left_parked(start) -> None:
    provider = ScriptedProvider().on("go", ClientToolCall("fetch"), Say("went on"))
    session = start(provider).create_session()
    session.set_client_tools("browser", [ClientTool(name="fetch")])
    chat = session.chat()
    sub = chat.subscribe()
    turn = chat.send("go")
    opened = next_of(sub, RequestOpened)
    session.remove_client("browser")
    assert next_of(sub, RequestClosed).outcome is RequestOutcome.FAILED
    assert turn.result(timeout=10).text == "went on"
    [answer] = [a for a in provider.answers if a.request_id == opened.request.request_id]
    assert answer.error is not None and "browser" in answer.error
    assert tool_calls(chat) == [("fetch", ToolCallStatus.COMPLETED, None)]


def test_a_call_to_a_tool_nobody_provides_is_answered_at_once_never_parked(start) -> None:
    provider = ScriptedProvider().on("go", ClientToolCall("fetch"), Say("went on"))
    session = start(provider).create_session()
    session.set_client_tools("browser", [ClientTool(name="fetch")])
    session.remove_client("browser")
    chat = session.chat()
    sub = chat.subscribe()
    assert chat.send("go").result(timeout=10).text == "went on"
    seen = []
    while (event := sub.next_nowait()) is not None:
        seen.append(event)
    assert not any(isinstance(e, RequestOpened) for e in seen)
    [answer] = provider.answers
    assert answer.error is not None and "fetch" in answer.error


def test_a_client_result_that_arrives_before_its_request_still_wins(start) -> None:
    provider = ScriptedProvider().on("go", ClientToolCall("fetch", gate="asked"), Say("done"))
    session = start(provider).create_session()
    session.set_client_tools("browser", [ClientTool(name="fetch")])
    chat = session.chat()
    sub = chat.subscribe()
    turn = chat.send("go")
    provider.wait_reached("asked")
    from agenthost.messages.events import ToolCallStarted

    call_id = next_of(sub, ToolCallStarted).tool_call_id
    chat.answer(call_id, result="early", client_id="browser")
    provider.open("asked")
    assert turn.result(timeout=10).text == "done"
    assert [(a.request_id, a.result) for a in provider.answers] == [(call_id, "early")]


# -- stale requests ----------------------------------------------------------------------------


def test_a_permission_request_for_a_turn_no_longer_active_is_denied_not_dropped(start) -> None:
    provider = ScriptedProvider(obeys_cancel=False)
    provider.on("go", Say("a"), Gate("g"), ToolCall("rm"), Gate("answered"))
    chat = start(provider).create_session().chat()
    turn = chat.send("go")
    provider.wait_reached("g")
    chat.cancel()
    assert turn.result(timeout=10).state is OutcomeState.CANCELLED
    provider.open("g")  # the old run goes on and asks for a permission
    provider.wait_reached("answered")  # it got an answer: it was not dropped
    provider.open("answered")
    assert chat.send("next").result(timeout=10).state is OutcomeState.COMPLETE
    [denial] = provider.answers
    assert denial.approved is False and denial.error is not None
    assert chat.state().open_requests == ()


# -- closing abandoned turns (claude: the call settles with the turn) ---------------------------


def test_a_call_the_provider_never_started_fails_as_execution_abandoned(start) -> None:
    provider = ScriptedProvider(shape="claude").on("go", Reject("refused", before_start=True))
    chat = start(provider).create_session().chat()
    outcome = chat.send("go").result(timeout=10)
    assert outcome.error is not None
    assert outcome.error.code is ErrorCode.EXECUTION_ABANDONED
    assert outcome.error.message == "refused"  # the provider's own words
    assert outcome.error.resumable is False


def test_a_rejected_call_the_provider_took_keeps_its_own_error(start) -> None:
    provider = ScriptedProvider(shape="claude").on("go", Say("half"), Reject("rate limited"))
    chat = start(provider).create_session().chat()
    outcome = chat.send("go").result(timeout=10)
    assert outcome.error == AgentHostError(code=ErrorCode.PROVIDER_ERROR, message="rate limited")


def test_a_pending_call_is_left_alone(start, clock: FakeClock) -> None:
    provider = ScriptedProvider(shape="claude").on("go", Say("a"), Gate("g"))
    chat = start(provider).create_session().chat()
    turn = chat.send("go")
    provider.wait_reached("g")
    clock.advance(3600)
    diagnostics = chat.diagnostics()
    assert diagnostics is not None and diagnostics.call_state is CallState.PENDING
    assert not turn.done()
    provider.open("g")
    assert turn.result(timeout=10).state is OutcomeState.COMPLETE


def test_a_turn_parked_on_a_visible_request_is_never_closed(db_path: Path) -> None:
    from agenthost.actors import use_runtime
    from agenthost.messages.provider import CallSettled, HostRequestOpened
    from agenthost.testing import DeterministicRunner

    provider = ScriptedProvider(shape="claude").on("go", Say("a"), SettleCall(), AskUser("sure?"))

    def arrived(kind: type):  # type: ignore[no-untyped-def]
        return delivered(runner, from_provider(kind))

    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
        )
        chat = host.create_session().chat()
        turn = chat.send("go")
        runner.run(until=arrived(HostRequestOpened))
        runner.run(until=arrived(CallSettled))  # the call settled while the request is open
        runner.run()
        diagnostics = chat.diagnostics()
        assert diagnostics is not None
        assert diagnostics.call_state is CallState.RESOLVED
        [request_id] = diagnostics.parked_user_input
        assert chat.state().active_turn_id == turn.id  # ... and the turn stays open
        chat.answer(request_id, answer="yes")
        assert turn.result(timeout=10).state is OutcomeState.COMPLETE
        host.stop()


def test_a_turn_whose_backend_never_idles_stays_active_and_says_why(db_path: Path) -> None:
    from agenthost.actors import use_runtime
    from agenthost.messages.provider import CallSettled
    from agenthost.testing import DeterministicRunner

    clock = FakeClock()
    provider = ScriptedProvider(shape="copilot").on("go", Say("a"), DropCompletion())
    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(store=SqliteStore(db_path), providers={"scripted": provider}, clock=clock)
        chat = host.create_session().chat()
        turn = chat.send("go")
        runner.run(until=delivered(runner, from_provider(CallSettled)))
        clock.advance(120)
        diagnostics = chat.diagnostics()
        assert diagnostics is not None
        assert diagnostics.call_state is CallState.RESOLVED
        assert diagnostics.provider_started is True
        assert diagnostics.quiet_s >= 120
        assert dict(diagnostics.provider)["running"] == "False"
        assert not turn.done()  # no wall clock closes it
        chat.cancel()
        assert turn.result(timeout=10).state is OutcomeState.CANCELLED
        host.stop()
