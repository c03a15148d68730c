"""Claude end to end: the public host surface, the real SDK, the stand-in CLI."""

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("claude_agent_sdk")

from agenthost.actors import FakeClock, Host
from agenthost.messages import OutcomeState, TurnState
from agenthost.messages.events import AssistantDelta
from agenthost.store import SqliteStore
from tests.fakes.events import drain_events
from tests.providers.claude.standin import WAIT_S, StandIn


@pytest.fixture
def standin(tmp_path: Path) -> StandIn:
    return StandIn(tmp_path / "cli")


@pytest.fixture
def start(db_path: Path, clock: FakeClock, standin: StandIn) -> Iterator[Callable[[], Host]]:
    hosts: list[Host] = []

    def started() -> Host:
        host = Host.start(
            store=SqliteStore(db_path), providers={"claude": standin.provider()}, clock=clock
        )
        hosts.append(host)
        return host

    yield started
    for host in hosts:
        host.stop()


def test_a_turn_completes_and_its_reply_is_stored(start: Callable[[], Host]) -> None:
    host = start()
    session = host.create_session(provider="claude")
    chat = session.chat()
    outcome = chat.send("hi").result(timeout=WAIT_S)
    assert outcome.state is OutcomeState.COMPLETE
    assert outcome.text == "echo: hi"
    host.stop()

    restarted = start()
    [turn] = restarted.open_session(session.id).chat(chat.id).state().turns
    assert (turn.user_text, turn.assistant_text, turn.state) == (
        "hi",
        "echo: hi",
        TurnState.COMPLETE,
    )


def test_steering_is_folded_into_the_running_turn(
    start: Callable[[], Host], standin: StandIn
) -> None:
    standin.script({"first": [{"say": ["a"]}, {"block": True}, {"tool": "Bash"}, {"say": ["b"]}]})
    chat = start().create_session(provider="claude").chat()
    sub = chat.subscribe()
    first = chat.send("first")
    while not isinstance(sub.next(WAIT_S), AssistantDelta):
        pass
    steering = chat.steer("steer me")
    assert first.result(timeout=WAIT_S).text == "ab"
    drain_events(chat.subscribe(), turns=1)
    [turn] = chat.state().turns
    assert [(m.id, m.text) for m in turn.steering] == [(steering.id, "steer me")]
    assert chat.state().pending == ()
    assert standin.received() == ["first", "steer me"]


def test_no_prompt_carries_an_earlier_user_message(
    start: Callable[[], Host], standin: StandIn
) -> None:
    standin.script({"fails": [{"error": "API Error: 500"}]})
    chat = start().create_session(provider="claude").chat()
    states = [chat.send(text).result(timeout=WAIT_S).state for text in ("one", "fails", "three")]
    assert states == [OutcomeState.COMPLETE, OutcomeState.ERROR, OutcomeState.COMPLETE]
    # The stored history ends in a user message after the failed turn; the next
    # prompt is still only its own text.
    assert standin.received() == ["one", "fails", "three"]
    assert chat.state().turns[1].error is not None
    assert chat.state().turns[1].error.message == "API Error: 500"
