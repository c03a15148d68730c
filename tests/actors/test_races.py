"""Races driven explicitly on the deterministic runner: the test picks the order.

Mailboxes stay FIFO (the runner refuses anything else); a race is decided by
which message enters an actor's mailbox first, and the test chooses that.
"""

from pathlib import Path

import pytest

from agenthost.actors import DeterministicRunner, FakeClock, Host, use_runtime
from agenthost.actors.protocol import FromProvider
from agenthost.actors.runtime import Delivery
from agenthost.messages import OutcomeState, TurnState
from agenthost.messages.commands import CancelTurn
from agenthost.messages.events import TERMINAL_EVENTS
from agenthost.messages.provider import Idle
from agenthost.providers.scripted import Gate, Say, ScriptedProvider
from agenthost.store import SqliteStore


def is_idle(delivery: Delivery) -> bool:
    return isinstance(delivery.message, FromProvider) and isinstance(delivery.message.event, Idle)


def all_but_idle(pending: list[Delivery], deliverable: list[int]) -> int | None:
    return next((i for i in deliverable if not is_idle(pending[i])), None)


def deliver_first(runner: DeterministicRunner, kind: type) -> None:
    pending = runner.pending()
    runner.deliver(next(i for i in runner.deliverable() if isinstance(pending[i].message, kind)))


@pytest.mark.parametrize("winner", ["idle", "cancel"])
def test_a_cancel_racing_the_providers_idle_ends_the_turn_exactly_once(
    winner: str, db_path: Path
) -> None:
    provider = ScriptedProvider().on("race", Say("x"), Gate("g"))
    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
        )
        chat = host.create_session().chat()
        sub = chat.subscribe()
        turn = chat.send("race")
        runner.run(until=lambda: provider.parked_at("g"))
        runner.run()

        if winner == "idle":  # the provider finishes before the cancel reaches the tracker
            provider.open("g")
            runner.run(until=lambda: any(is_idle(d) for d in runner.pending()), choose=all_but_idle)
            runner.run(choose=all_but_idle)
            chat.cancel_nowait()
            deliver_first(runner, CancelTurn)  # the tracker's cancel queues behind the idle
        else:  # the cancel reaches the tracker before the provider's idle
            chat.cancel_nowait()
            deliver_first(runner, CancelTurn)
            provider.open("g")
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


def is_settled(delivery: Delivery) -> bool:
    from agenthost.messages.provider import CallSettled

    return isinstance(delivery.message, FromProvider) and isinstance(
        delivery.message.event, CallSettled
    )


@pytest.mark.parametrize("winner", ["close", "cancel"])
def test_a_cancel_racing_the_close_of_an_abandoned_turn_ends_it_exactly_once(
    winner: str, db_path: Path
) -> None:
    """Claude-shaped: the call settles without a terminal event, so the host closes
    the turn; the user's cancel races that close."""
    from agenthost.providers.scripted import DropCompletion

    provider = ScriptedProvider(shape="claude").on("race", Say("x"), Gate("g"), DropCompletion())
    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
        )
        chat = host.create_session().chat()
        sub = chat.subscribe()
        turn = chat.send("race")
        runner.run(until=lambda: provider.parked_at("g"))
        runner.run()

        def all_but_settled(pending: list[Delivery], ok: list[int]) -> int | None:
            return next((i for i in ok if not is_settled(pending[i])), None)

        if winner == "close":
            provider.open("g")
            runner.run(
                until=lambda: any(is_settled(d) for d in runner.pending()), choose=all_but_settled
            )
            runner.run(choose=all_but_settled)
            chat.cancel_nowait()
            deliver_first(runner, CancelTurn)  # the cancel queues behind the settlement
        else:
            chat.cancel_nowait()
            deliver_first(runner, CancelTurn)
            provider.open("g")
        outcome = turn.result(timeout=10)
        runner.run()
        expected = OutcomeState.COMPLETE if winner == "close" else OutcomeState.CANCELLED
        assert outcome.state is expected
        ends = []
        while (event := sub.next_nowait()) is not None:
            if isinstance(event, TERMINAL_EVENTS):
                ends.append(event)
        assert len(ends) == 1
        host.stop()
