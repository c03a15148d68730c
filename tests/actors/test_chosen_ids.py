"""Turn ids a client chooses (actors/chosen_ids.py): new to their chat, kept by
a send queued while the chat is busy, and named by a cancel that says what it did."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from agenthost.actors import Chat, Host
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.messages.events import PendingMessageRemoved, RemovalReason, TurnStarted
from agenthost.providers.scripted import Gate, Say, ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.fakes.events import drain_events


def start(db_path: Path, provider: ScriptedProvider) -> Host:
    return Host.start(
        store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
    )


@pytest.fixture
def gated() -> ScriptedProvider:
    return ScriptedProvider().on("hold", Gate("g"), Say("held"))


@pytest.fixture
def busy(db_path: Path, gated: ScriptedProvider) -> Iterator[Chat]:
    """A chat whose first turn waits at gate "g"."""
    host = start(db_path, gated)
    chat = host.create_session().chat()
    chat.send("hold", turn_id="first")
    gated.wait_reached("g")
    yield chat
    host.stop()


def test_a_send_queued_with_a_chosen_turn_id_runs_under_that_id(
    busy: Chat, gated: ScriptedProvider
) -> None:
    events = busy.subscribe()
    later = busy.send("later", turn_id="mine")
    assert later.id is None and later.pending_id is not None
    [queued] = busy.state().queued_messages
    assert (queued.id, queued.turn_id) == (later.pending_id, "mine")
    gated.open("g")
    outcome = later.result(timeout=10)
    assert (outcome.state, outcome.text, later.id) == (OutcomeState.COMPLETE, "echo: later", "mine")
    started = [e for e in drain_events(events, turns=2) if isinstance(e, TurnStarted)]
    assert [(e.turn_id, e.queued_message_id) for e in started] == [("mine", later.pending_id)]
    assert [t.id for t in busy.state().turns] == ["first", "mine"]


def test_a_queued_send_keeps_its_chosen_turn_id_across_a_restart(
    db_path: Path, gated: ScriptedProvider
) -> None:
    host = start(db_path, gated)
    session = host.create_session()
    session.chat().send("hold")
    gated.wait_reached("g")
    session.chat().send("later", turn_id="mine")
    host.stop()
    host = start(db_path, ScriptedProvider())
    try:
        chat = host.open_session(session.id).chat()
        assert [m.turn_id for m in chat.state().queued_messages] == ["mine"]
        events = chat.subscribe()
        chat.send("now").result(timeout=10)  # a success releases the restored queue
        drain_events(events, turns=3)
        assert [(t.id, t.user_text) for t in chat.state().turns][1:] == [
            (chat.state().turns[1].id, "now"),
            ("mine", "later"),
        ]
    finally:
        host.stop()


def test_a_chosen_turn_id_already_waiting_in_the_queue_is_refused(busy: Chat) -> None:
    busy.send("later", turn_id="mine")
    for taken in ("mine", "first"):
        with pytest.raises(AgentHostError) as refused:
            busy.send("again", turn_id=taken)
        assert refused.value.code is ErrorCode.INVALID_ARGUMENT and taken in refused.value.message
    assert len(busy.state().queued_messages) == 1


def test_cancelling_a_queued_turn_by_its_id_removes_it_before_it_runs(
    busy: Chat, gated: ScriptedProvider
) -> None:
    events = busy.subscribe()
    later = busy.send("later", turn_id="mine")
    assert busy.cancel("mine") is True
    assert later.result(timeout=10).state is OutcomeState.REMOVED
    assert busy.state().queued_messages == ()
    gated.open("g")
    seen = drain_events(events, turns=1)
    removed = [e for e in seen if isinstance(e, PendingMessageRemoved)]
    assert [(e.pending_id, e.reason) for e in removed] == [(later.pending_id, RemovalReason.CLIENT)]
    assert "later" not in gated.model_inputs
    assert [t.id for t in busy.state().turns] == ["first"]


def test_a_cancel_naming_the_running_turn_cancels_it(busy: Chat) -> None:
    assert busy.cancel("first") is True
    assert [t.state.value for t in busy.state().turns] == ["cancelled"]


def test_a_cancel_naming_another_turn_while_one_runs_says_which_runs(busy: Chat) -> None:
    with pytest.raises(AgentHostError) as refused:
        busy.cancel("other")
    assert (refused.value.code, refused.value.message) == (
        ErrorCode.NOT_FOUND,
        "turn other is not running (turn first is)",
    )
    assert busy.state().active_turn_id == "first"


def test_a_cancel_naming_an_ended_or_unknown_turn_says_which(host: Host) -> None:
    chat = host.create_session().chat()
    chat.send("hi", turn_id="done").result(timeout=10)
    for named, reason in (
        ("done", "turn done already ended (complete)"),
        ("never", "turn never is neither running nor queued"),
    ):
        with pytest.raises(AgentHostError) as refused:
            chat.cancel(named)
        assert refused.value.message == reason
    assert chat.cancel() is False  # without an id, as before: nothing runs
