"""The built-ins as registered: their sequence, and memento eviction."""

import sqlite3
from pathlib import Path

from agenthost.actors import Host
from agenthost.actors.contributions.builtin import BUILTINS
from agenthost.actors.protocol import Flush
from agenthost.providers.scripted import ScriptedProvider
from tests.actors.contributions.conftest import Start, settled


def test_the_built_in_sequence_is_pinned(host: Host) -> None:
    dispatcher = host.services.contributions
    assert [c.id for c in BUILTINS] == dispatcher.ids()
    assert [(c.id, c.order) for c in dispatcher.contributions] == [
        ("local_command", 50),
        ("turn_admission", 100),
        ("queue_drain", 200),
        ("input_needed", 200),
        ("session_instructions", 300),
        ("session_title", 400),
        ("mark_unread", 500),
        ("chat_draft", 600),
        ("session_flags", 700),
    ]
    assert dispatcher.ids("on_incoming_request") == ["local_command", "turn_admission"]
    assert dispatcher.ids("on_turn_end") == ["queue_drain", "mark_unread"]
    assert dispatcher.ids("on_outgoing_turn") == ["session_instructions"]
    assert dispatcher.ids("on_hydrate_turns") == []
    assert dispatcher.ids("on_hydrate_chat") == ["chat_draft"]


def test_mementos_of_a_disposed_chat_or_session_are_evicted(db_path: Path, start: Start) -> None:
    def rows() -> set[tuple[str, str, str]]:
        with sqlite3.connect(db_path) as db:
            return set(db.execute("SELECT session_id, chat_id, contribution FROM mementos"))

    host = start(ScriptedProvider())
    session = host.create_session()
    kept = session.chat()
    kept.set_draft("keep")
    doomed = session.create_chat()
    doomed.set_draft("drop")
    doomed.send("a turn").result(timeout=10)
    other = host.create_session()
    other_chat = other.chat()
    other_chat.set_draft("other")
    settled(doomed)
    host.services.store.ask(Flush(), timeout=10)
    assert (session.id, doomed.id, "chat_draft") in rows()
    session.dispose_chat(doomed.id)
    host.stop()
    assert rows() == {(session.id, kept.id, "chat_draft"), (other.id, other_chat.id, "chat_draft")}
    host = start(ScriptedProvider())
    host.open_session(other.id).dispose()
    host.stop()
    assert rows() == {(session.id, kept.id, "chat_draft")}
