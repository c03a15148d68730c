"""End-to-end turns through the public surface, for each provider shape."""

import asyncio
from pathlib import Path

import pytest

from agenthost.actors import Host
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState, TurnState
from agenthost.messages.events import (
    AssistantDelta,
    ChatSnapshot,
    PendingMessageAdded,
    ResponsePartAdded,
    TurnCancelled,
    TurnCompleted,
    TurnStarted,
)
from agenthost.providers.scripted import (
    Crash,
    DropCompletion,
    Gate,
    NoFinishReason,
    Reject,
    Say,
    ScriptedProvider,
)
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.fakes.events import events_until, events_until_turn_end

SHAPES = ["copilot", "claude", "codex"]


@pytest.fixture(params=SHAPES)
def shaped(request: pytest.FixtureRequest, db_path: Path, clock: FakeClock):
    provider = ScriptedProvider(shape=request.param)
    host = Host.start(store=SqliteStore(db_path), providers={"scripted": provider}, clock=clock)
    yield host, provider
    host.stop()


def test_a_turn_streams_and_completes_for_every_shape(shaped) -> None:
    host, _ = shaped
    chat = host.create_session(provider="scripted").chat()
    sub = chat.subscribe()
    turn = chat.send("hello")
    outcome = turn.result(timeout=10)
    assert outcome.state is OutcomeState.COMPLETE
    assert outcome.text == "echo: hello"
    events = events_until_turn_end(sub, turn.id)
    assert isinstance(events[0], ChatSnapshot)
    assert isinstance(events[1], TurnStarted) and events[1].message.text == "hello"
    assert isinstance(events[2], ResponsePartAdded)
    deltas = [e.text for e in events if isinstance(e, AssistantDelta)]
    assert len(deltas) > 1 and "".join(deltas) == "echo: hello"
    assert isinstance(events[-1], TurnCompleted)
    assert all(e.session_id == chat.session.id and e.chat_id == chat.id for e in events)


def test_scripted_steps_stream_in_order(shaped) -> None:
    host, provider = shaped
    provider.on("story", Say("once "), Say("upon "), Say("a time"))
    chat = host.create_session().chat()
    assert chat.send("story").result(timeout=10).text == "once upon a time"
    state = chat.state()
    assert [(t.user_text, t.assistant_text, t.state) for t in state.turns] == [
        ("story", "once upon a time", TurnState.COMPLETE)
    ]
    assert state.active_turn_id is None


def test_a_rejected_send_fails_the_turn_with_the_providers_own_error(shaped) -> None:
    host, provider = shaped
    provider.on("bad", Say("partial"), Reject("model overloaded"))
    chat = host.create_session().chat()
    outcome = chat.send("bad").result(timeout=10)
    assert outcome.state is OutcomeState.ERROR
    assert outcome.error == AgentHostError(
        code=ErrorCode.PROVIDER_ERROR, message="model overloaded"
    )
    assert outcome.text == "partial"


def test_a_gated_turn_stays_active_until_the_gate_opens(shaped) -> None:
    host, provider = shaped
    provider.on("wait", Say("a"), Gate("g"), Say("b"))
    chat = host.create_session().chat()
    turn = chat.send("wait")
    provider.wait_reached("g", timeout=10)
    assert chat.state().active_turn_id == turn.id
    with pytest.raises(TimeoutError):
        turn.result(timeout=0.05)
    provider.open("g")
    assert turn.result(timeout=10).text == "ab"


def test_cancel_ends_the_running_turn_as_cancelled(shaped) -> None:
    host, provider = shaped
    provider.on("long", Say("start"), Gate("never"))
    chat = host.create_session().chat()
    sub = chat.subscribe()
    turn = chat.send("long")
    provider.wait_reached("never", timeout=10)
    # The user saw "start" before cancelling (it may still be on its way to the
    # chat when the provider reaches the gate).
    events_until(sub, lambda e: isinstance(e, AssistantDelta) and e.text == "start")
    assert chat.cancel() is True
    outcome = turn.result(timeout=10)
    assert outcome.state is OutcomeState.CANCELLED
    assert outcome.text == "start"
    assert isinstance(events_until_turn_end(sub, turn.id)[-1], TurnCancelled)
    assert chat.cancel() is False
    assert chat.send("next").result(timeout=10).state is OutcomeState.COMPLETE


def test_a_crash_mid_turn_abandons_the_turn_and_the_next_send_works(shaped) -> None:
    host, provider = shaped
    provider.on("boom", Say("half"), Gate("g"), Crash())
    chat = host.create_session().chat()
    crashing = chat.send("boom")
    provider.wait_reached("g")
    queued = chat.send("queued")
    provider.open("g")
    outcome = crashing.result(timeout=10)
    assert outcome.state is OutcomeState.ERROR
    assert outcome.error is not None and outcome.error.code is ErrorCode.EXECUTION_ABANDONED
    assert [m.text for m in chat.state().pending] == ["queued"]  # the queue survives
    assert chat.send("again").result(timeout=10).text == "echo: again"
    assert queued.result(timeout=10).text == "echo: queued"
    assert len(host.list_sessions()) == 1


def test_a_send_while_a_turn_runs_is_queued_and_runs_after_it(shaped) -> None:
    host, provider = shaped
    provider.on("first", Gate("g"), Say("one"))
    chat = host.create_session().chat()
    sub = chat.subscribe()
    first = chat.send("first")
    second = chat.send("second")
    assert second.id is None and second.pending_id is not None
    assert [m.text for m in chat.state().pending] == ["second"]
    provider.open("g")
    assert first.result(timeout=10).text == "one"
    outcome = second.result(timeout=10)
    assert outcome.text == "echo: second"
    assert second.id == outcome.turn_id
    assert chat.state().pending == ()
    events = events_until_turn_end(sub, second.id)
    assert any(isinstance(e, PendingMessageAdded) for e in events)
    started = [e for e in events if isinstance(e, TurnStarted)]
    assert started[1].queued_message_id == second.pending_id


def test_the_queue_holds_after_a_cancelled_turn(shaped) -> None:
    host, provider = shaped
    provider.on("first", Gate("never"))
    chat = host.create_session().chat()
    first = chat.send("first")
    queued = chat.send("queued")
    provider.wait_reached("never", timeout=10)
    chat.cancel()
    assert first.result(timeout=10).state is OutcomeState.CANCELLED
    assert [m.text for m in chat.state().pending] == ["queued"]
    assert not queued.done()
    direct = chat.send("direct")
    assert direct.result(timeout=10).state is OutcomeState.COMPLETE
    assert queued.result(timeout=10).text == "echo: queued"


def test_turns_reach_the_provider_one_prompt_each(shaped) -> None:
    host, provider = shaped
    session = host.create_session()
    chat = session.chat()
    for text in ("one", "two", "three"):
        chat.send(text).result(timeout=10)
    assert provider.prompts_for(session.id) == ["one", "two", "three"]


def test_dropped_completion_closes_a_turn_whose_call_settles_with_it(
    db_path: Path, clock: FakeClock
) -> None:
    provider = ScriptedProvider(shape="claude").on("drop", Say("kept"), DropCompletion())
    with Host.start(
        store=SqliteStore(db_path), providers={"scripted": provider}, clock=clock
    ) as host:
        outcome = host.create_session().chat().send("drop").result(timeout=10)
    assert outcome.state is OutcomeState.COMPLETE
    assert outcome.text == "kept"


@pytest.mark.parametrize("shape", ["copilot", "codex"])
def test_dropped_completion_leaves_an_early_returning_turn_active_until_cancel(
    shape: str, db_path: Path, clock: FakeClock
) -> None:
    provider = ScriptedProvider(shape=shape).on("drop", Say("x"), DropCompletion(), Say("y"))
    with Host.start(
        store=SqliteStore(db_path), providers={"scripted": provider}, clock=clock
    ) as host:
        chat = host.create_session().chat()
        sub = chat.subscribe()
        turn = chat.send("drop")
        seen = [sub.next(10) for _ in range(5)]  # snapshot, started, part, x, y
        assert [e.text for e in seen if isinstance(e, AssistantDelta)] == ["x", "y"]
        clock.advance(3600)
        assert chat.state().active_turn_id == turn.id
        chat.cancel()
        assert turn.result(timeout=10).state is OutcomeState.CANCELLED


def test_no_finish_reason_still_completes_with_the_streamed_text(shaped) -> None:
    host, provider = shaped
    provider.on("nf", Say("tail "), Say("text"), NoFinishReason())
    chat = host.create_session().chat()
    assert chat.send("nf").result(timeout=10).text == "tail text"


def test_unknown_provider_and_unknown_session_are_clear_errors(host: Host) -> None:
    with pytest.raises(AgentHostError) as unknown_provider:
        host.create_session(provider="nope")
    assert unknown_provider.value.code is ErrorCode.INVALID_ARGUMENT
    assert "scripted" in unknown_provider.value.message
    with pytest.raises(AgentHostError) as unknown_session:
        host.open_session("missing")
    assert unknown_session.value.code is ErrorCode.NOT_FOUND


def test_list_sessions_counts_turns(host: Host) -> None:
    first = host.create_session()
    second = host.create_session()
    first.chat().send("a").result(timeout=10)
    summaries = {s.id: s for s in host.list_sessions()}
    assert summaries[first.id].turn_count == 1
    assert summaries[second.id].turn_count == 0
    assert summaries[first.id].provider == "scripted"


def test_a_stopped_host_fails_calls_clearly(host: Host) -> None:
    chat = host.create_session().chat()
    host.stop()
    with pytest.raises(AgentHostError) as caught:
        chat.send("late")
    assert caught.value.code is ErrorCode.HOST_STOPPED


def test_turn_handles_and_subscriptions_work_from_asyncio(host: Host) -> None:
    chat = host.create_session().chat()
    sub = chat.subscribe()

    async def main() -> tuple[str, list[str]]:
        outcome = await chat.send("async")
        names = []
        async for event in sub:
            names.append(type(event).__name__)
            if isinstance(event, TurnCompleted):
                break
        return outcome.text, names

    text, names = asyncio.run(asyncio.wait_for(main(), 10))
    assert text == "echo: async"
    assert names[0] == "ChatSnapshot" and names[-1] == "TurnCompleted"
