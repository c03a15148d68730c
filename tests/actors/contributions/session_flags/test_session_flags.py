"""session_flags: read, archived and config are persisted."""

import pytest

from agenthost.messages import AgentHostError
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
