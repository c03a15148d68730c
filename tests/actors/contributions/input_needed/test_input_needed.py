"""input_needed: the session shows a chat waiting on the user."""

from agenthost.actors import Host
from agenthost.messages import OutcomeState
from agenthost.messages.events import RequestOpened
from agenthost.providers.scripted import AskUser, Say, ScriptedProvider
from tests.actors.contributions.conftest import settled


def test_a_session_is_input_needed_while_a_chat_waits_on_the_user(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("go", AskUser("Which file?"), Say("ok"))
    session = host.create_session()
    chat = session.chat()
    sub = chat.subscribe()
    turn = chat.send("go")
    while not isinstance(event := sub.next(10), RequestOpened):
        pass
    settled(chat)
    assert session.summary().input_needed
    chat.answer(event.request.request_id, answer="main.py")
    assert turn.result(timeout=10).state is OutcomeState.COMPLETE
    settled(chat)
    assert not session.summary().input_needed
