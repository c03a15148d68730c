"""session_title: derived and user titles."""

import pytest

from agenthost.actors.contributions.session_title import title_from
from agenthost.messages import AgentHostError, ErrorCode
from agenthost.providers.scripted import ScriptedProvider
from tests.actors.contributions.conftest import Start, settled


def test_the_title_comes_from_the_first_message_and_the_users_title_wins(start: Start) -> None:
    host = start(ScriptedProvider())
    session = host.create_session()
    chat = session.chat()
    chat.send("Fix the login bug\nit fails on Safari").result(timeout=10)
    chat.send("another question").result(timeout=10)
    assert session.summary().title == "Fix the login bug"
    assert session.rename("Login").title == "Login"
    chat.send("/rename Auth work").result(timeout=10)
    other = session.create_chat()
    other.send("/rename Side chat").result(timeout=10)  # not the default chat: no cascade
    settled(chat)
    settled(other)
    assert session.summary().title == "Auth work"
    with pytest.raises(AgentHostError) as bad:
        session.rename("   ")
    assert bad.value.code is ErrorCode.INVALID_ARGUMENT
    session_id, other_id = session.id, other.id
    host.stop()
    restored = start(ScriptedProvider()).open_session(session_id)
    assert restored.summary().title == "Auth work"
    assert restored.chat(other_id).state().title == "Side chat"


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("\n\n  Fix   the bug \nrest", "Fix the bug"),
        ("   ", ""),
        ("word " * 200_000, ("word " * 12).strip()[:59].rstrip() + "…"),  # a megabyte, one line
        ("x" * 2000 + "\nsecond", "x" * 59 + "…"),
    ],
    ids=["first line", "blank", "one huge line", "a long first line"],
)
def test_a_title_is_the_first_line_shortened(text: str, title: str) -> None:
    assert title_from(text) == title
