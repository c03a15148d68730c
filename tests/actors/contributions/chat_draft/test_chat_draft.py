"""chat_draft: drafts are kept."""

from agenthost.providers.scripted import ScriptedProvider
from tests.actors.contributions.conftest import Start


def test_a_draft_is_kept_and_restored(start: Start) -> None:
    host = start(ScriptedProvider())
    session = host.create_session()
    session.chat().set_draft("half a thought")
    cleared = session.create_chat()
    cleared.set_draft("gone soon")
    cleared.set_draft(None)
    session_id, cleared_id = session.id, cleared.id
    host.stop()
    restored = start(ScriptedProvider()).open_session(session_id)
    assert restored.chat().state().draft == "half a thought"
    assert restored.chat(cleared_id).state().draft is None
