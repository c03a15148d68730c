"""What survives a restart, and what subscribers may see before it is durable."""

import itertools
import sqlite3
from pathlib import Path

import pytest

from agenthost.actors import Host, use_runtime
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState, TurnState
from agenthost.messages.events import TurnCompleted
from agenthost.messages.state import Attachment, OriginKind, Usage, with_attachments
from agenthost.providers.scripted import Gate, NoFinishReason, Reject, Say, ScriptedProvider
from agenthost.store import SqliteStore, Store
from agenthost.store.sql import migrations
from agenthost.testing import DeterministicRunner, FakeClock
from tests.fakes.events import drain_events
from tests.fakes.stores import GatedCommitStore, StoreFactory


def start(
    stores: StoreFactory, provider: ScriptedProvider | None = None, store: Store | None = None
) -> Host:
    return Host.start(
        store=store or stores(),
        providers={"scripted": provider or ScriptedProvider()},
        clock=FakeClock(),
    )


def stored_turn(stores: StoreFactory, turn_id: str) -> tuple[str | None, str]:
    """Read a turn row as another process would: committed data only."""
    rows = stores.query("SELECT state, assistant_text FROM turns WHERE id = ?", (turn_id,))
    return (None, "") if not rows else (rows[0][0], rows[0][1])


def test_a_restarted_host_restores_every_session_and_turn(store_factory: StoreFactory) -> None:
    provider = ScriptedProvider().on("fail", Say("some"), Reject("no"))
    host = start(store_factory, provider)
    expected = {}
    for n in range(3):
        session = host.create_session()
        chat = session.chat()
        for text in (f"s{n} one", f"s{n} two", "fail"):
            chat.send(text).result(timeout=10)
        expected[session.id] = [
            (t.user_text, t.assistant_text, t.state) for t in chat.state().turns
        ]
    host.stop()

    host = start(store_factory, provider)
    try:
        assert {s.id for s in host.list_sessions()} == set(expected)
        for session_id, turns in expected.items():
            state = host.open_session(session_id).chat().state()
            assert [(t.user_text, t.assistant_text, t.state) for t in state.turns] == turns
            assert turns[0][1] == turns[0][0].replace("s", "echo: s", 1)
            assert turns[-1][2] is TurnState.ERROR
        chat = host.open_session(next(iter(expected))).chat()
        assert chat.send("after restart").result(timeout=10).state is OutcomeState.COMPLETE
    finally:
        host.stop()


def test_the_final_assistant_text_is_stored_when_the_stream_has_no_finish_reason(
    store_factory: StoreFactory,
) -> None:
    provider = ScriptedProvider().on("q", Say("the "), Say("answer"), NoFinishReason())
    host = start(store_factory, provider)
    session = host.create_session()
    turn = session.chat().send("q")
    assert turn.result(timeout=10).state is OutcomeState.COMPLETE
    host.stop()
    assert stored_turn(store_factory, turn.id) == ("complete", "the answer")
    host = start(store_factory, provider)
    try:
        assert host.open_session(session.id).chat().state().turns[0].assistant_text == "the answer"
    finally:
        host.stop()


def test_a_turn_end_reaches_subscribers_only_after_it_is_committed(
    store_factory: StoreFactory,
) -> None:
    store = GatedCommitStore(store_factory())
    with use_runtime(DeterministicRunner(own_threads=True)) as runner:
        host = start(store_factory, store=store)
        chat = host.create_session().chat()
        sub = chat.subscribe()
        turn = chat.send("hello")
        runner.run(until=store.blocked.is_set)
        seen = []
        while (event := sub.next_nowait()) is not None:
            seen.append(event)
        assert not any(isinstance(e, TurnCompleted) for e in seen)
        assert stored_turn(store_factory, turn.id)[0] is None
        assert not turn.done()
        store.release()
        assert turn.result(timeout=10).state is OutcomeState.COMPLETE
        assert stored_turn(store_factory, turn.id) == ("complete", "echo: hello")
        while not isinstance(event := sub.next(10), TurnCompleted):
            pass
        host.stop()


def test_queued_messages_are_durable_with_their_attachments(
    store_factory: StoreFactory, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("the attached notes")
    provider = ScriptedProvider().on("hold", Gate("never"))
    host = start(store_factory, provider)
    session = host.create_session()
    chat = session.chat()
    chat.send("hold")
    chat.send("later", attachments=[notes])
    chat.send("plain")
    provider.wait_reached("never", timeout=10)
    host.stop()

    host = start(store_factory, provider)
    try:
        chat = host.open_session(session.id).chat()
        later, plain = chat.state().pending
        assert (later.text, later.message.attachments) == (
            "later",
            (Attachment(name="notes.txt", text="the attached notes"),),
        )
        assert (plain.text, plain.message.attachments) == ("plain", ())
        events = chat.subscribe()
        chat.send("now").result(timeout=10)  # a success releases the restored queue
        ended = 0
        while ended < 3:  # its own end, then the queued two's (subscribed before it)
            ended += isinstance(events.next(10), TurnCompleted)
        assert provider.model_inputs[-3:] == [
            "now",
            with_attachments("later", later.message.attachments),
            "plain",
        ]
        assert "the attached notes" in provider.model_inputs[-2]
    finally:
        host.stop()


def test_a_turn_running_when_the_host_stopped_is_restored_as_abandoned(
    store_factory: StoreFactory,
) -> None:
    provider = ScriptedProvider().on("hold", Say("partial"), Gate("never"))
    host = start(store_factory, provider)
    session = host.create_session()
    turn = session.chat().send("hold")
    provider.wait_reached("never", timeout=10)
    host.stop()

    host = start(store_factory, provider)
    try:
        state = host.open_session(session.id).chat().state()
        assert state.active_turn is None
        [restored] = state.turns
        assert restored.id == turn.id
        assert restored.state is TurnState.ERROR
        assert restored.error is not None and restored.error.code is ErrorCode.EXECUTION_ABANDONED
    finally:
        host.stop()


def test_a_second_host_on_the_same_sqlite_store_fails_at_once(db_path: Path) -> None:
    host = Host.start(store=SqliteStore(db_path), clock=FakeClock())
    try:
        with pytest.raises(AgentHostError) as caught:
            Host.start(store=SqliteStore(db_path), clock=FakeClock())
        assert caught.value.code is ErrorCode.STORE_ERROR
        assert "in use" in caught.value.message
    finally:
        host.stop()


def test_migrations_are_numbered_and_recorded(store_factory: StoreFactory) -> None:
    store = store_factory()
    store.open()
    store.close()
    assert store.created
    [(version,)] = store_factory.query("SELECT MAX(version) FROM schema_version")
    assert version == migrations()[-1][0]
    store = store_factory()
    store.open()  # reopening applies nothing twice
    store.close()
    assert not store.created
    recorded = store_factory.query("SELECT version FROM schema_version ORDER BY version")
    assert [v for (v,) in recorded] == [number for number, _ in migrations()]


def test_a_sqlite_store_is_kept_in_wal_mode(db_path: Path) -> None:
    store = SqliteStore(db_path)
    store.open()
    store.close()
    with sqlite3.connect(db_path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_each_store_has_the_same_numbered_migrations() -> None:
    numbers = [v for v, _ in migrations()]
    assert numbers == [v for v, _ in migrations("migrations/postgresql")]
    # Rising, each once (numbers other branches hold may be missing here).
    assert numbers[0] == 1 and all(a < b for a, b in itertools.pairwise(numbers))


def write_first_schema(stores: StoreFactory) -> None:
    """A store as the first schema wrote it, with a session, a chat and a turn."""
    stores.write_schema(up_to=1)
    stores.execute("INSERT INTO sessions VALUES ('s1', 'scripted', 'old', 1, 1)", ())
    stores.execute("INSERT INTO chats (id, session_id, position) VALUES ('c1', 's1', 0)", ())
    stores.execute(
        "INSERT INTO turns (id, chat_id, session_id, seq, user_text, assistant_text, state,"
        " started_at) VALUES ('t1', 'c1', 's1', 0, 'hi', 'hello', 'complete', 1)",
        (),
    )


def test_a_store_written_by_the_first_schema_is_upgraded_in_place(
    store_factory: StoreFactory,
) -> None:
    write_first_schema(store_factory)
    host = start(store_factory)
    try:
        chat = host.open_session("s1").chat()
        assert [(t.user_text, t.assistant_text) for t in chat.state().turns] == [("hi", "hello")]
        assert chat.send("again").result(timeout=10).state is OutcomeState.COMPLETE
    finally:
        host.stop()
    [(version,)] = store_factory.query("SELECT MAX(version) FROM schema_version")
    assert version == migrations()[-1][0]


def test_find_session_takes_a_session_id_or_a_chat_id(store_factory: StoreFactory) -> None:
    host = start(store_factory)
    session = host.create_session()
    chat_id = session.chat().id
    host.stop()
    store = store_factory()
    store.open()
    try:
        by_chat = store.find_session(chat_id=chat_id)
        assert by_chat is not None and by_chat.id == session.id
        assert store.find_session(session.id) == by_chat
        assert store.find_session("nope") is None and store.find_session(chat_id="nope") is None
        for neither_or_both in ({}, {"session_id": session.id, "chat_id": chat_id}):
            with pytest.raises(ValueError):
                store.find_session(**neither_or_both)
    finally:
        store.close()


def test_a_turns_usage_kept_as_a_memento_moves_to_the_turn_when_the_store_is_upgraded(
    store_factory: StoreFactory,
) -> None:
    """Before 0009 a turn's usage was a persisted_usage memento; after the
    upgrade it is the turn's own, and the memento is gone."""
    store_factory.write_schema(up_to=8)
    store_factory.execute(
        "INSERT INTO sessions (id, provider, title, created_at, modified_at)"
        " VALUES ('s1', 'scripted', 'old', 1, 1)",
        (),
    )
    store_factory.execute("INSERT INTO chats (id, session_id, position) VALUES ('c1', 's1', 0)", ())
    store_factory.execute(
        "INSERT INTO turns (id, chat_id, session_id, seq, user_text, assistant_text, state,"
        " started_at) VALUES ('t1', 'c1', 's1', 0, 'hi', 'hello', 'complete', 1)",
        (),
    )
    store_factory.execute(
        "INSERT INTO mementos VALUES ('s1', 'c1', 'persisted_usage', ?, '[3, 4]')",
        ("usage\x1ft1",),
    )
    host = start(store_factory)
    try:
        [turn] = host.open_session("s1").chat().state().turns
        assert turn.usage == Usage(prompt_tokens=3, completion_tokens=4)
    finally:
        host.stop()
    assert store_factory.query("SELECT COUNT(*) FROM mementos") == [(0,)]


def test_a_turns_usage_and_its_messages_origin_survive_a_restart(
    store_factory: StoreFactory,
) -> None:
    """Usage is written with the turn's end; a steering message's turn comes
    back as a steering turn (not as a user's)."""
    provider = ScriptedProvider(shape="copilot").on("first", Gate("g"), Say("a"))
    host = Host.start(store=store_factory(), providers={"scripted": provider}, clock=FakeClock())
    session = host.create_session()
    chat = session.chat()
    sub = chat.subscribe()
    first = chat.send("first")
    provider.wait_reached("g")
    chat.steer("steer")
    provider.wait_steered(1)
    provider.open("g")
    first.result(timeout=10)
    drain_events(sub, turns=2)
    live = chat.state().turns
    host.stop()
    assert [t.message.origin.kind for t in live] == [OriginKind.USER, OriginKind.STEERING]
    assert live[-1].usage is not None  # the run that ended reported its usage
    host = Host.start(store=store_factory(), providers={"scripted": provider}, clock=FakeClock())
    try:
        restored = host.open_session(session.id).chat().state().turns
        assert [(t.id, t.message.origin, t.usage) for t in restored] == [
            (t.id, t.message.origin, t.usage) for t in live
        ]
    finally:
        host.stop()
