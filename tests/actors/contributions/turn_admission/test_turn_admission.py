"""turn_admission: archived sessions and read-only chats refuse turns."""

import pytest

from agenthost.actors import Host
from agenthost.actors.contributions.turn_admission import ARCHIVED, READ_ONLY
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.providers.scripted import ScriptedProvider
from tests.actors.contributions.conftest import Start


def test_an_archived_session_refuses_turns_until_it_is_unarchived(
    host: Host, provider: ScriptedProvider
) -> None:
    session = host.create_session()
    chat = session.chat()
    assert session.archive().archived
    refused = chat.send("hello").result(timeout=10)
    assert refused.state is OutcomeState.REJECTED and refused.error is not None
    assert (refused.error.code, refused.error.message) == (ErrorCode.READ_ONLY, ARCHIVED)
    with pytest.raises(AgentHostError, match="archived"):
        chat.steer("and this")
    assert provider.prompts == [] and chat.state().turns == ()
    session.unarchive()
    assert chat.send("hello").result(timeout=10).state is OutcomeState.COMPLETE


def test_a_read_only_chat_refuses_turns(host: Host) -> None:
    chat = host.create_session().chat()
    chat.set_read_only(True)
    refused = chat.send("hello").result(timeout=10)
    assert refused.error is not None and refused.error.message == READ_ONLY
    chat.set_read_only(False)
    assert chat.send("hello").result(timeout=10).state is OutcomeState.COMPLETE


def test_read_only_and_archived_survive_a_restart(start: Start) -> None:
    host = start(ScriptedProvider())
    session = host.create_session()
    session.chat().set_read_only(True)
    second = session.create_chat()
    session_id, second_id = session.id, second.id
    host.stop()
    session = start(ScriptedProvider()).open_session(session_id)
    assert session.chat().send("x").result(timeout=10).state is OutcomeState.REJECTED
    assert session.chat(second_id).send("x").result(timeout=10).state is OutcomeState.COMPLETE
