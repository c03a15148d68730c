"""Races driven explicitly on the deterministic runner: the test picks the order.

Mailboxes stay FIFO (the runner refuses anything else); a race is decided by
which message enters an actor's mailbox first, and the test chooses that.
"""

from collections.abc import Callable
from pathlib import Path

import pykka
import pytest

from agenthost.actors import Host, use_runtime
from agenthost.actors.protocol import EndTurn
from agenthost.messages import OutcomeState, TurnState
from agenthost.messages.commands import CancelTurn
from agenthost.messages.events import TERMINAL_EVENTS
from agenthost.messages.provider import CallSettled, Idle
from agenthost.providers.scripted import DropCompletion, Gate, Say, ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.testing import Delivery, DeterministicRunner, FakeClock
from tests.fakes.runner import from_provider, holding, unbatched


def carries(kind: type) -> Callable[[Delivery], bool]:
    def test(delivery: Delivery) -> bool:
        return from_provider(kind)(delivery.message)

    return test


def deliver_first(runner: DeterministicRunner, kind: type) -> None:
    pending = runner.pending()
    runner.deliver(next(i for i in runner.deliverable() if isinstance(pending[i].message, kind)))


RACES = {
    # A copilot-shaped turn ends on the provider's idle.
    "idle": ("copilot", (Say("x"), Gate("g")), Idle),
    # A claude-shaped turn whose call settles without a terminal event is closed by the host.
    "close": ("claude", (Say("x"), Gate("g"), DropCompletion()), CallSettled),
}


@pytest.mark.parametrize("winner", ["provider", "cancel"])
@pytest.mark.parametrize("end", sorted(RACES))
def test_a_cancel_racing_the_turns_own_end_ends_it_exactly_once(
    end: str, winner: str, db_path: Path
) -> None:
    shape, steps, signal = RACES[end]
    provider = ScriptedProvider(shape=shape).on("race", *steps)  # type: ignore[arg-type]
    ended_by_provider = carries(signal)

    def all_but_the_end(pending: list[Delivery], ok: list[int]) -> int | None:
        return next((i for i in ok if not ended_by_provider(pending[i])), None)

    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
        )
        chat = host.create_session().chat()
        sub = chat.subscribe()
        turn = chat.send("race")
        runner.run(until=lambda: provider.parked_at("g"))
        runner.run()

        if winner == "provider":  # the turn's own end reaches the tracker before the cancel
            provider.open("g")
            runner.run(
                until=lambda: any(ended_by_provider(d) for d in runner.pending()),
                choose=all_but_the_end,
            )
            runner.run(choose=all_but_the_end)
            chat.cancel_nowait()
            deliver_first(runner, CancelTurn)  # the tracker's cancel queues behind that end
        else:  # the cancel reaches the tracker first
            chat.cancel_nowait()
            deliver_first(runner, CancelTurn)
            provider.open("g")
        outcome = turn.result(timeout=10)
        runner.run()

        expected = OutcomeState.COMPLETE if winner == "provider" else OutcomeState.CANCELLED
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


def test_a_cancel_the_turns_own_end_overtook_answers_false(db_path: Path) -> None:
    """The chat asked the tracker to cancel a running turn, but the turn completed
    before the tracker read the request: nothing was cancelled."""
    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path),
            providers={"scripted": ScriptedProvider()},
            clock=FakeClock(),
        )
        chat = host.create_session().chat()
        turn = chat.send("hello")  # started; its reply is on its way
        cancel = chat._ref.ask(CancelTurn(), block=False)

        def ended() -> bool:  # the tracker told the chat the turn ended
            return any(
                isinstance(m, EndTurn) for d in runner.pending() for m in unbatched(d.message)
            )

        runner.run(until=ended, choose=holding(lambda d: isinstance(d.message, CancelTurn)))
        runner.run()
        answer = cancel.get(timeout=10)
        while isinstance(answer, pykka.Future):
            answer = answer.get(timeout=10)
        assert answer is False
        assert turn.result(timeout=0).state is OutcomeState.COMPLETE
        assert [t.state for t in chat.state().turns] == [TurnState.COMPLETE]
        host.stop()
