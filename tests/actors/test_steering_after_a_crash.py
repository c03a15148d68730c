"""Steering a provider held when it crashed (queue_policy rule 4): it is requeued
at the head of the queue and, like everything queued after a turn that did not
succeed, waits for the next successful turn; it then runs as a steering turn.
For each shape of the scripted provider."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from agenthost.actors import Host, RestartPolicy
from agenthost.messages import ErrorCode, OutcomeState, TurnState
from agenthost.messages.state import OriginKind, PendingKind
from agenthost.providers.scripted import Crash, Gate, Say, ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.fakes.events import drain_events

SHAPES = ["copilot", "claude", "codex"]


@pytest.fixture(params=SHAPES)
def crashing(
    request: pytest.FixtureRequest, db_path: Path
) -> Iterator[tuple[Host, ScriptedProvider]]:
    """A provider whose run for "first" crashes at a gate, before it reads the
    steering it was given meanwhile."""
    provider = ScriptedProvider(shape=request.param).on(
        "first", Say("a"), Gate("g", reads_steering=False), Crash()
    )
    host = Host.start(
        store=SqliteStore(db_path),
        providers={"scripted": provider},
        clock=FakeClock(),
        restart_policy=RestartPolicy(backoff_min=0.0, backoff_max=0.0),
    )
    yield host, provider
    host.stop()


def test_steering_a_crashed_provider_held_waits_with_the_queue_for_a_success(
    crashing: tuple[Host, ScriptedProvider],
) -> None:
    host, provider = crashing
    chat = host.create_session().chat()
    sub = chat.subscribe()
    first = chat.send("first")
    provider.wait_reached("g")
    steering = chat.steer("steer")
    provider.wait_steered(1)  # the provider holds it, unread
    provider.open("g")
    outcome = first.result(timeout=10)
    assert outcome.state is OutcomeState.ERROR
    assert outcome.error is not None and outcome.error.code is ErrorCode.EXECUTION_ABANDONED
    state = chat.state()
    assert state.active_turn is None and state.steering_messages == ()
    assert [(m.id, m.kind, m.text) for m in state.queued_messages] == [
        (steering.id, PendingKind.QUEUED, "steer")
    ]
    direct = chat.send("direct")  # nothing runs: it starts at once, ahead of the steering
    assert direct.id is not None
    assert direct.result(timeout=10).state is OutcomeState.COMPLETE
    drain_events(sub, turns=3)
    turns = chat.state().turns
    assert [(t.user_text, t.state, t.message.origin.kind) for t in turns] == [
        ("first", TurnState.ERROR, OriginKind.USER),
        ("direct", TurnState.COMPLETE, OriginKind.USER),
        ("steer", TurnState.COMPLETE, OriginKind.STEERING),
    ]
    assert chat.state().pending == ()
