"""Races driven explicitly on the deterministic runner: the test picks the order."""

from pathlib import Path

import pytest

from agenthost.actors import DeterministicRunner, FakeClock, Host, use_runtime
from agenthost.actors.protocol import CancelActiveTurn, FromProvider
from agenthost.actors.runtime import Delivery
from agenthost.messages import OutcomeState, TurnState
from agenthost.messages.commands import CancelTurn
from agenthost.messages.events import TERMINAL_EVENTS
from agenthost.messages.provider import Idle
from agenthost.providers.scripted import ScriptedProvider
from agenthost.store import SqliteStore


def is_idle(delivery: Delivery) -> bool:
    return isinstance(delivery.message, FromProvider) and isinstance(delivery.message.event, Idle)


def index_of(runner: DeterministicRunner, kind: type) -> int:
    pending = runner.pending()
    return next(i for i, d in enumerate(pending) if isinstance(d.message, kind))


def all_but_idle(pending: list[Delivery]) -> int:
    return next(i for i, d in enumerate(pending) if not is_idle(d))


@pytest.mark.parametrize("winner", ["idle", "cancel"])
def test_a_cancel_racing_the_providers_idle_ends_the_turn_exactly_once(
    winner: str, db_path: Path
) -> None:
    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path),
            providers={"scripted": ScriptedProvider()},
            clock=FakeClock(),
        )
        chat = host.create_session().chat()
        sub = chat.subscribe()
        turn = chat.send("race")
        runner.run(until=lambda: any(is_idle(d) for d in runner.pending()), choose=all_but_idle)

        chat.cancel_nowait()
        if winner == "idle":
            runner.deliver(next(i for i, d in enumerate(runner.pending()) if is_idle(d)))
        else:
            runner.deliver(index_of(runner, CancelTurn))
            runner.deliver(index_of(runner, CancelActiveTurn))
        outcome = turn.result(timeout=10)
        runner.run()

        expected = OutcomeState.COMPLETE if winner == "idle" else OutcomeState.CANCELLED
        assert outcome.state is expected
        ends = []
        while (event := sub.next_nowait()) is not None:
            if isinstance(event, TERMINAL_EVENTS):
                ends.append(event)
        assert len(ends) == 1
        [stored] = chat.state().turns
        assert stored.state is TurnState(expected.value)
        assert chat.send("after").result(timeout=10).state is OutcomeState.COMPLETE
        host.stop()
