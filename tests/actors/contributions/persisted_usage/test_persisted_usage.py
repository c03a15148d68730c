"""persisted_usage: token usage per turn is kept."""

from agenthost.actors.contributions import ChatKey, TurnEnd, TurnEndReason
from agenthost.actors.contributions.persisted_usage import PersistedUsage
from agenthost.messages import ChatState
from agenthost.messages.state import (
    SessionState,
    Turn,
    TurnState,
    Usage,
    UserMessage,
)
from agenthost.providers.scripted import ScriptedProvider
from tests.actors.contributions.conftest import Start


def test_token_usage_per_turn_survives_a_restart(start: Start) -> None:
    host = start(ScriptedProvider())
    session = host.create_session()
    session.chat().send("count these three").result(timeout=10)
    live = session.chat().state().turns[0].usage
    assert live == Usage(prompt_tokens=3, completion_tokens=4)  # "echo: count these three"
    session_id = session.id
    host.stop()
    restored = start(ScriptedProvider()).open_session(session_id)
    assert restored.chat().state().turns[0].usage == live


class FakeMementos:
    def __init__(self) -> None:
        self.values: dict[tuple[str, ...], object] = {}

    def set(self, chat: object, *key: str, value: object) -> None:
        self.values[key] = value


def test_a_subagents_chat_keeps_no_usage() -> None:
    mementos = FakeMementos()
    usage = PersistedUsage(mementos=mementos)  # type: ignore[arg-type]
    turn = Turn(
        id="t",
        message=UserMessage(text="x"),
        state=TurnState.COMPLETE,
        usage=Usage(prompt_tokens=1),
    )
    chat = ChatKey(session_id="s", chat_id="c")
    for subagent in (True, False):
        usage.on_turn_end(
            TurnEnd(
                chat=chat,
                reason=TurnEndReason.SUCCESS,
                state=ChatState(resource="r"),
                session=SessionState(),
                turn=turn,
                subagent=subagent,
            )
        )
    assert mementos.values == {("usage", "t"): [1, 0]}
