"""session_flags: read, archived and config are persisted."""

import pytest

from agenthost.messages import AgentHostError
from agenthost.messages.state import ChatStatus
from agenthost.providers.scripted import ScriptedProvider
from tests.actors.contributions.conftest import Start


def test_flags_and_config_are_persisted_and_rejected_changes_are_not(start: Start) -> None:
    host = start(ScriptedProvider())
    session = host.create_session()
    session.archive()
    session.set_config({"model": "large", "effort": "high"})
    session.set_config({"effort": ""})
    with pytest.raises(AgentHostError):
        session.set_config({"": "x"})
    session_id = session.id
    host.stop()
    host = start(ScriptedProvider())
    [listed] = host.list_sessions()
    assert listed.archived
    restored = host.open_session(session_id)
    assert restored.summary().archived
    assert restored.config() == {"model": "large"}


def test_a_chats_read_and_archived_flags_survive_a_restart(start: Start) -> None:
    host = start(ScriptedProvider())
    session = host.create_session()
    chat = session.chat()
    chat.set_flags(read=True, archived=True)
    chat.set_flags(archived=False)
    chat.set_flags(archived=True)
    session_id = session.id
    host.stop()
    host = start(ScriptedProvider())
    status = host.open_session(session_id).chat().state().status
    assert status & ChatStatus.IS_READ and status & ChatStatus.IS_ARCHIVED


def test_a_turn_clearing_a_chats_read_flag_is_kept_too(start: Start) -> None:
    host = start(ScriptedProvider())
    session = host.create_session()
    session.chat().set_flags(read=True)
    session_id = session.id
    host.stop()
    host = start(ScriptedProvider())
    chat = host.open_session(session_id).chat()
    assert chat.state().status & ChatStatus.IS_READ
    chat.send("hello").result(timeout=10)  # the host's turn start clears IsRead
    host.stop()
    host = start(ScriptedProvider())
    assert not host.open_session(session_id).chat().state().status & ChatStatus.IS_READ
