"""mark_unread: turns mark their session unread."""

from pathlib import Path

from agenthost.actors import Host, use_runtime
from agenthost.actors.protocol import ApplySessionAction
from agenthost.messages.events import IsReadChanged
from agenthost.providers import ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.testing import DeterministicRunner, FakeClock
from tests.actors.contributions.conftest import settled


def test_a_turn_marks_its_session_unread_but_a_local_command_or_refusal_does_not(
    host: Host,
) -> None:
    session = host.create_session()
    chat = session.chat()
    assert not session.summary().unread
    chat.send("hi").result(timeout=10)
    settled(chat)
    assert session.summary().unread
    assert not session.mark_read().unread
    chat.send("/help").result(timeout=10)
    chat.set_read_only(True)
    chat.send("refused").result(timeout=10)
    settled(chat)
    assert not session.summary().unread
    assert [s.unread for s in host.list_sessions()] == [False]


def test_a_session_already_unread_is_not_told_again(db_path: Path) -> None:
    """Only the first turn after the session was read costs a message to it; the
    check reads the session's entry as the session last reduced it, so a read
    just before a turn's end is seen."""
    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path),
            providers={"scripted": ScriptedProvider()},
            clock=FakeClock(),
        )
        session = host.create_session()
        chat = session.chat()

        def marks() -> int:
            return sum(
                isinstance(d.message, ApplySessionAction)
                and isinstance(d.message.action, IsReadChanged)
                for d in runner.history
            )

        for text in ("one", "two", "three"):
            chat.send(text).result(timeout=10)
            runner.run()
        assert marks() == 1 and session.summary().unread
        session.mark_read()
        chat.send("four").result(timeout=10)
        runner.run()
        assert marks() == 2 and session.summary().unread
        host.stop()
