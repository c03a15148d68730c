"""How many actor messages a turn, a steering removal and a queue drain take,
counted on the deterministic runner (every delivery is in its history).

The bounds are today's counts; at commit 398386c (before issue 17) a turn
took 15 messages, a removal 8 until its settlement, and a turn's end with a
queued message behind it 18 until the next turn's end was committed. A change
that adds a hop fails here and says which messages the path took."""

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agenthost.actors import Chat, Host, use_runtime
from agenthost.actors.protocol import SteeringRemovalSettled
from agenthost.messages.provider import SteerAnswered
from agenthost.providers.scripted import Gate, Say, ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.testing import DeterministicRunner, FakeClock
from tests.fakes.runner import delivered, from_provider


@pytest.fixture
def gated(db_path: Path) -> Iterator[tuple[DeterministicRunner, ScriptedProvider, Chat]]:
    provider = ScriptedProvider(shape="copilot")
    provider.on("first", Say("a"), Gate("g"), Say("b"))
    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
        )
        chat = host.create_session().chat()
        warm_up = chat.send("warm up")  # the first turn also names the session
        runner.run(until=warm_up.done)
        runner.run()
        yield runner, provider, chat
        host.stop()


def _path(
    runner: DeterministicRunner, act: Callable[[], object], until: Callable[[], bool]
) -> list[str]:
    """The messages delivered from `act` until `until` holds and nothing is left."""
    start = len(runner.history)
    act()
    runner.run(until=until)
    runner.run()
    return [f"{d.actor}.{type(d.message).__name__}" for d in runner.history[start:]]


def test_a_turn_on_an_idle_chat_takes_at_most_eight_messages(gated: tuple) -> None:
    runner, _, chat = gated
    handles = []
    path = _path(runner, lambda: handles.append(chat.send("hello")), lambda: handles[0].done())
    assert len(path) <= 8, path


def test_removing_steering_the_provider_holds_settles_in_at_most_six_messages(
    gated: tuple,
) -> None:
    runner, provider, chat = gated
    chat.send("first")
    runner.run(until=lambda: provider.parked_at("g"))
    steering = chat.steer("later")
    runner.run(until=delivered(runner, from_provider(SteerAnswered)))  # the provider holds it
    runner.run()
    start = len(runner.history)
    removal = chat.remove_pending_nowait(steering.id)
    runner.run(
        until=lambda: any(
            isinstance(d.message, SteeringRemovalSettled) for d in runner.history[start:]
        )
    )
    path = [f"{d.actor}.{type(d.message).__name__}" for d in runner.history[start:]]
    assert len(path) <= 6, path
    runner.run()
    assert removal.result(timeout=0) is True


def test_a_turns_end_with_a_queued_message_behind_it_takes_at_most_thirteen_messages(
    gated: tuple,
) -> None:
    runner, provider, chat = gated
    chat.send("first")
    runner.run(until=lambda: provider.parked_at("g"))
    queued = chat.send("queued")
    runner.run()
    path = _path(runner, lambda: provider.open("g"), queued.done)
    assert len(path) <= 13, path
    assert queued.result(timeout=0).text == "echo: queued"
