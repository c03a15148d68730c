"""Subagents: a tool call spawns a chat of its own; resolved spawns end with their
parent's turn, background ones run on, and a cancel ends them all."""

from pathlib import Path

import pytest

from agenthost.actors import Chat, Host, Session
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState, TurnState
from agenthost.messages.events import TurnCompleted, TurnStarted
from agenthost.messages.state import ChatOriginKind, ToolCallPart
from agenthost.providers.scripted import Gate, Say, ScriptedProvider, SpawnSubagent
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.fakes.events import drain_events


@pytest.fixture
def start(start_host):  # type: ignore[no-untyped-def]
    return start_host


def subagent_chat(session: Session, parent: Chat) -> Chat:
    [part] = [p for p in parent.state().turns[-1].response_parts if isinstance(p, ToolCallPart)]
    assert part.tool_call.subagent_chat_id is not None
    return session.chat(part.tool_call.subagent_chat_id)


def wait_for(sub, kind: type) -> None:  # type: ignore[no-untyped-def]
    while not isinstance(sub.next(10), kind):
        pass


def test_a_subagent_answers_in_a_chat_of_its_own(start) -> None:
    provider = ScriptedProvider().on("go", SpawnSubagent("look it up"), Say("done"))
    session = start(provider).create_session()
    parent = session.chat()
    assert parent.send("go").result(timeout=10).text == "done"
    child = subagent_chat(session, parent)
    drain_events(child.subscribe(), turns=1)
    state = child.state()
    assert state.origin.kind is ChatOriginKind.TOOL
    assert state.origin.chat_id == parent.id
    assert [(t.user_text, t.assistant_text, t.state) for t in state.turns] == [
        ("look it up", "echo: look it up", TurnState.COMPLETE)
    ]
    with pytest.raises(AgentHostError) as caught:
        child.send("hello")
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


def test_a_resolved_subagent_whose_end_was_lost_ends_with_its_parent(start) -> None:
    provider = ScriptedProvider().on("go", SpawnSubagent("sub", drop_end=True), Say("done"))
    session = start(provider).create_session()
    parent = session.chat()
    assert parent.send("go").result(timeout=10).state is OutcomeState.COMPLETE
    child = subagent_chat(session, parent)
    drain_events(child.subscribe(), turns=1)
    [turn] = child.state().turns
    assert turn.state is TurnState.COMPLETE
    assert turn.assistant_text == "echo: sub"


def test_a_background_subagent_outlives_its_parents_turn(start) -> None:
    provider = ScriptedProvider()
    provider.on("go", SpawnSubagent("work", background=True), Say("started"))
    provider.on("work", Say("working "), Gate("bg"), Say("finished"))
    session = start(provider).create_session()
    parent = session.chat()
    assert parent.send("go").result(timeout=10).text == "started"
    child = subagent_chat(session, parent)
    sub = child.subscribe()
    provider.wait_reached("bg")
    state = sub.next(10).state
    if state.active_turn is None:
        wait_for(sub, TurnStarted)
    assert child.state().active_turn is not None  # the parent's end left it running
    provider.open("bg")
    wait_for(sub, TurnCompleted)
    [turn] = child.state().turns
    assert (turn.assistant_text, turn.state) == ("working finished", TurnState.COMPLETE)


def test_a_cancel_ends_the_parent_and_every_subagent_it_spawned(start) -> None:
    provider = ScriptedProvider()
    provider.on("go", SpawnSubagent("work", background=True), Gate("parent"))
    provider.on("work", Say("working"), Gate("bg"))
    session = start(provider).create_session()
    parent = session.chat()
    turn = parent.send("go")
    provider.wait_reached("parent")
    provider.wait_reached("bg")
    parent.cancel()
    assert turn.result(timeout=10).state is OutcomeState.CANCELLED
    child = subagent_chat(session, parent)
    drain_events(child.subscribe(), turns=1)
    [subagent_turn] = child.state().turns
    assert subagent_turn.state is TurnState.CANCELLED


def test_a_restarted_host_restores_subagent_chats_as_history(db_path: Path) -> None:
    provider = ScriptedProvider().on("go", SpawnSubagent("look it up"), Say("done"))
    host = Host.start(
        store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
    )
    session = host.create_session()
    parent = session.chat()
    parent.send("go").result(timeout=10)
    child = subagent_chat(session, parent)
    drain_events(child.subscribe(), turns=1)
    child_id = child.id
    host.stop()
    host = Host.start(
        store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
    )
    try:
        restored = host.open_session(session.id)
        child = restored.chat(child_id)
        assert child.state().origin.kind is ChatOriginKind.TOOL
        assert [t.assistant_text for t in child.state().turns] == ["echo: look it up"]
        assert restored.chat().send("again").result(timeout=10).state is OutcomeState.COMPLETE
    finally:
        host.stop()
