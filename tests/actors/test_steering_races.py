"""Steering races on the deterministic runner (mailboxes FIFO, the test picks
which actor goes next)."""

from pathlib import Path

import pytest

from agenthost.actors import Host, use_runtime
from agenthost.actors.protocol import CallDone, StartSteeringTurn
from agenthost.messages.commands import SteerMessage
from agenthost.messages.events import SteeringWithdrawn, TurnStarted
from agenthost.messages.provider import ProviderSteer, ProviderWithdraw, SteerAnswered
from agenthost.messages.state import TurnState
from agenthost.providers.scripted import Gate, Say, ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.testing import Delivery, DeterministicRunner, FakeClock
from tests.fakes.runner import delivered, from_provider, holding


def to_connection(d: Delivery) -> bool:
    return d.actor == "ProviderConnectionActor"


def answer_to_connection(d: Delivery) -> bool:
    return to_connection(d) and isinstance(d.message, CallDone)


@pytest.mark.parametrize("echo_ids", [True, False], ids=["echo-with-id", "echo-without-id"])
def test_two_identical_steering_messages_one_withdrawn_while_the_other_is_delivered(
    echo_ids: bool, db_path: Path
) -> None:
    provider = ScriptedProvider(shape="copilot", echo_ids=echo_ids)
    provider.on("first", Say("a"), Gate("g"), Say("b"))
    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
        )
        chat = host.create_session().chat()
        sub = chat.subscribe()
        first = chat.send("first")
        runner.run(until=lambda: provider.parked_at("g"))

        s1 = chat.steer("same")
        runner.run(until=delivered(runner, from_provider(SteerAnswered)))

        # The client removes s1 and sends an identical s2; both reach the connection
        # in that order before it does anything.
        removal = chat.remove_pending_nowait(s1.id)
        chat._ref.tell(SteerMessage(text="same"))
        runner.run(
            until=lambda: (
                sum(
                    isinstance(d.message, (ProviderWithdraw, ProviderSteer))
                    for d in runner.pending()
                )
                == 2
            ),
            choose=holding(to_connection),
        )
        # The provider withdraws s1 (unread) and takes s2; its answers wait.
        runner.run(
            until=lambda: sum(isinstance(d.message, CallDone) for d in runner.pending()) == 2,
            choose=holding(answer_to_connection),
        )
        # The model reads s2 and echoes it while s1's withdraw answer is still in flight.
        provider.open("g")
        runner.run(
            until=delivered(runner, lambda m: isinstance(m, StartSteeringTurn)),
            choose=holding(answer_to_connection),
        )
        runner.run()
        assert removal.result(timeout=10) is True
        first.result(timeout=10)
        runner.run(
            until=lambda: chat.state().active_turn_id is None and len(chat.state().turns) == 2
        )

        state = chat.state()
        assert [(t.user_text, t.assistant_text, t.state) for t in state.turns] == [
            ("first", "a", TurnState.COMPLETE),
            ("same", "b", TurnState.COMPLETE),
        ]
        assert state.pending == ()
        assert provider.model_inputs == ["first", "same"]
        events = []
        while (event := sub.next_nowait()) is not None:
            events.append(event)
        s2_id = next(
            e.pending.id for e in events if getattr(e, "pending", None) and e.pending.id != s1.id
        )
        started_from = [e.queued_message_id for e in events if isinstance(e, TurnStarted)]
        assert started_from == [None, s2_id]
        assert [e.pending_id for e in events if isinstance(e, SteeringWithdrawn)] == [s1.id]
        host.stop()


def test_steering_still_being_prepared_is_dropped_and_never_sent(db_path: Path) -> None:
    """With no provider connection (a restart waits out its backoff), the turn and
    its steering wait in the tracker; removing the steering then drops it."""
    from agenthost.actors import RestartPolicy
    from agenthost.messages import OutcomeState
    from agenthost.providers.scripted import Crash

    clock = FakeClock()
    provider = ScriptedProvider().on("boom", Crash())
    policy = RestartPolicy(intensity=10, backoff_min=5.0, backoff_max=5.0)
    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path),
            providers={"scripted": provider},
            clock=clock,
            restart_policy=policy,
        )
        chat = host.create_session().chat()
        chat.send("boom").result(timeout=10)  # restarted at once
        chat.send("boom").result(timeout=10)  # the next restart waits 2.5-5 s on the clock
        turn = chat.send("next")
        steering = chat.steer("prepared")
        assert chat.remove_pending(steering.id) is True
        assert chat.state().pending == ()
        clock.advance(5.0)
        assert turn.result(timeout=10).state is OutcomeState.COMPLETE
        runner.run()
        assert provider.steered == 0
        assert "prepared" not in provider.model_inputs
        assert [t.user_text for t in chat.state().turns] == ["boom", "boom", "next"]
        host.stop()
