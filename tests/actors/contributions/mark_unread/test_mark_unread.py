"""mark_unread: turns mark their session unread."""

from agenthost.actors import Host
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
