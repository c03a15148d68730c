"""Queued and steering messages, with withdraw on removal (DESIGN.md rule 1)."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from agenthost.actors import Chat, Host, RestartPolicy, use_runtime
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState, TurnState
from agenthost.messages.events import (
    PendingMessageRemoved,
    RemovalReason,
    SteeringNotWithdrawn,
    SteeringRecorded,
    SteeringWithdrawn,
    TurnStarted,
)
from agenthost.messages.state import PendingKind
from agenthost.providers.scripted import Gate, Reject, Say, ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.testing import DeterministicRunner, FakeClock
from tests.fakes.events import drain_events
from tests.fakes.manual_provider import ManualProvider

STEERING_BUSY = "Cannot change a steering message while it is being processed"


def start(db_path: Path, provider: ScriptedProvider) -> Host:
    return Host.start(
        store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
    )


@pytest.fixture
def copilot() -> ScriptedProvider:
    return ScriptedProvider(shape="copilot").on("first", Say("a"), Gate("g"), Say("b"))


@pytest.fixture
def chat_on(db_path: Path) -> Iterator:
    hosts: list[Host] = []

    def make(provider: ScriptedProvider) -> Chat:
        host = start(db_path, provider)
        hosts.append(host)
        return host.create_session().chat()

    yield make
    for host in hosts:
        host.stop()


def turns_of(chat: Chat) -> list[tuple[str, str, TurnState]]:
    return [(t.user_text, t.assistant_text, t.state) for t in chat.state().turns]


# -- steering ------------------------------------------------------------------------------


def test_copilot_steering_becomes_its_own_turn_and_later_deltas_belong_to_it(
    chat_on, copilot: ScriptedProvider
) -> None:
    chat = chat_on(copilot)
    sub = chat.subscribe()
    first = chat.send("first")
    copilot.wait_reached("g")
    steering = chat.steer("steer me")
    copilot.wait_steered(1)
    assert steering.kind is PendingKind.STEERING
    assert [m.id for m in chat.state().pending] == [steering.id]
    copilot.open("g")
    assert first.result(timeout=10).text == "a"
    events = drain_events(sub, turns=2)
    assert turns_of(chat) == [
        ("first", "a", TurnState.COMPLETE),
        ("steer me", "b", TurnState.COMPLETE),
    ]
    assert chat.state().pending == ()
    removed = [e for e in events if isinstance(e, PendingMessageRemoved)]
    assert [(e.pending_id, e.reason) for e in removed] == [(steering.id, RemovalReason.CONSUMED)]
    started = [e for e in events if isinstance(e, TurnStarted)]
    assert started[-1].queued_message_id == steering.id


@pytest.mark.parametrize("shape", ["claude", "codex"])
def test_folded_steering_is_recorded_inside_the_running_turn(chat_on, shape: str) -> None:
    provider = ScriptedProvider(shape=shape).on("first", Say("a"), Gate("g"), Say("b"))
    chat = chat_on(provider)
    sub = chat.subscribe()
    first = chat.send("first")
    provider.wait_reached("g")
    steering = chat.steer("steer me")
    provider.wait_steered(1)
    provider.open("g")
    assert first.result(timeout=10).text == "ab"
    [turn] = chat.state().turns
    assert [(m.id, m.text) for m in turn.steering] == [(steering.id, "steer me")]
    assert chat.state().pending == ()
    assert provider.model_inputs == ["first", "steer me"]
    assert any(isinstance(e, SteeringRecorded) for e in drain_events(sub, turns=1))


def test_withdrawn_steering_never_reaches_the_model_and_never_becomes_a_turn(
    chat_on, copilot: ScriptedProvider
) -> None:
    chat = chat_on(copilot)
    sub = chat.subscribe()
    first = chat.send("first")
    copilot.wait_reached("g")
    steering = chat.steer("never mind")
    copilot.wait_steered(1)
    assert chat.remove_pending(steering.id) is True
    assert chat.state().pending == ()
    copilot.open("g")
    assert first.result(timeout=10).text == "ab"
    assert turns_of(chat) == [("first", "ab", TurnState.COMPLETE)]
    assert "never mind" not in copilot.model_inputs
    events = drain_events(sub, turns=1)
    assert any(isinstance(e, SteeringWithdrawn) and e.pending_id == steering.id for e in events)
    removed = [e for e in events if isinstance(e, PendingMessageRemoved)]
    assert [e.reason for e in removed] == [RemovalReason.WITHDRAWN]


def test_steering_the_model_already_read_is_not_withdrawn_and_becomes_its_turn(
    chat_on, copilot: ScriptedProvider
) -> None:
    chat = chat_on(copilot)
    sub = chat.subscribe()
    copilot.hold_echoes()
    first = chat.send("first")
    copilot.wait_reached("g")
    steering = chat.steer("too late")
    copilot.wait_steered(1)
    copilot.open("g")
    copilot.wait_echo_held()  # read, not yet echoed
    assert chat.remove_pending(steering.id) is False
    assert [m.id for m in chat.state().pending] == [steering.id]
    copilot.release_echoes()
    first.result(timeout=10)
    events = drain_events(sub, turns=2)
    assert turns_of(chat) == [
        ("first", "a", TurnState.COMPLETE),
        ("too late", "b", TurnState.COMPLETE),
    ]
    assert chat.state().pending == ()
    assert any(isinstance(e, SteeringNotWithdrawn) for e in events)


def test_not_withdrawn_is_logged(chat_on, copilot: ScriptedProvider) -> None:
    import structlog

    chat = chat_on(copilot)
    copilot.hold_echoes()
    chat.send("first")
    copilot.wait_reached("g")
    steering = chat.steer("too late")
    copilot.wait_steered(1)
    copilot.open("g")
    copilot.wait_echo_held()
    with structlog.testing.capture_logs() as logs:
        assert chat.remove_pending(steering.id) is False
    copilot.release_echoes()
    assert any(
        log["event"] == "steering_not_withdrawn" and log["pending_id"] == steering.id
        for log in logs
    )


@pytest.mark.parametrize("shape", ["claude", "codex"])
def test_a_provider_that_cannot_withdraw_rejects_the_removal_and_nothing_changes(
    chat_on, shape: str
) -> None:
    provider = ScriptedProvider(shape=shape).on("first", Say("a"), Gate("g"), Say("b"))
    chat = chat_on(provider)
    first = chat.send("first")
    provider.wait_reached("g")
    steering = chat.steer("keep me")
    provider.wait_steered(1)
    with pytest.raises(AgentHostError) as caught:
        chat.remove_pending(steering.id)
    assert caught.value.message == STEERING_BUSY
    assert [m.id for m in chat.state().pending] == [steering.id]
    provider.open("g")
    first.result(timeout=10)
    [turn] = chat.state().turns
    assert [m.text for m in turn.steering] == ["keep me"]


def test_steering_while_idle_is_simply_a_send(chat_on, copilot: ScriptedProvider) -> None:
    chat = chat_on(copilot)
    steering = chat.steer("hello")
    sub = chat.subscribe()
    drain_events(sub, turns=1)
    assert turns_of(chat) == [("hello", "echo: hello", TurnState.COMPLETE)]
    assert chat.state().pending == ()
    assert steering.text == "hello"


def test_several_steering_messages_each_become_one_turn(chat_on, copilot: ScriptedProvider) -> None:
    chat = chat_on(copilot)
    sub = chat.subscribe()
    first = chat.send("first")
    copilot.wait_reached("g")
    one = chat.steer("one")
    two = chat.steer("two")
    copilot.wait_steered(2)
    assert [m.id for m in chat.state().pending] == [one.id, two.id]
    copilot.open("g")
    first.result(timeout=10)
    drain_events(sub, turns=3)
    assert [t.user_text for t in chat.state().turns] == ["first", "one", "two"]
    assert chat.state().pending == ()


def test_codex_steering_with_no_active_turn_becomes_a_queued_message(chat_on) -> None:
    provider = ScriptedProvider(shape="codex").on("first", Say("a"), Gate("g"))
    chat = chat_on(provider)
    first = chat.send("first")
    provider.wait_reached("g")
    chat.cancel()  # the provider's turn is gone by the time the steer lands
    first.result(timeout=10)
    queued_after = chat.send("ok")  # a direct send while idle runs at once
    assert queued_after.result(timeout=10).state is OutcomeState.COMPLETE


# -- the queue -----------------------------------------------------------------------------


def test_a_removed_queued_message_never_runs_and_resolves_as_removed(
    chat_on, copilot: ScriptedProvider
) -> None:
    chat = chat_on(copilot)
    first = chat.send("first")
    queued = chat.send("queued")
    keep = chat.send("keep")
    assert chat.remove_pending(queued.pending_id) is True
    assert queued.result(timeout=10).state is OutcomeState.REMOVED
    copilot.open("g")
    first.result(timeout=10)
    keep.result(timeout=10)
    assert [t.user_text for t in chat.state().turns] == ["first", "keep"]
    assert "queued" not in copilot.model_inputs


def test_removing_an_unknown_message_is_a_clear_error(chat_on, copilot: ScriptedProvider) -> None:
    chat = chat_on(copilot)
    with pytest.raises(AgentHostError) as caught:
        chat.remove_pending("nope")
    assert caught.value.code is ErrorCode.NOT_FOUND


def test_edit_changes_a_queued_message_and_refuses_steering(
    chat_on, copilot: ScriptedProvider
) -> None:
    chat = chat_on(copilot)
    first = chat.send("first")
    queued = chat.send("typo")
    copilot.wait_reached("g")
    steering = chat.steer("steer")
    edited = chat.edit_pending(queued.pending_id, "fixed")
    assert edited.text == "fixed"
    with pytest.raises(AgentHostError) as caught:
        chat.edit_pending(steering.id, "changed")
    assert caught.value.message == STEERING_BUSY
    copilot.open("g")
    first.result(timeout=10)
    assert queued.result(timeout=10).turn_id is not None
    assert "fixed" in copilot.model_inputs and "typo" not in copilot.model_inputs


def test_reorder_puts_listed_ids_first_and_keeps_the_rest_in_order(
    chat_on, copilot: ScriptedProvider
) -> None:
    chat = chat_on(copilot)
    first = chat.send("first")
    a, b, c = (chat.send(t) for t in ("a", "b", "c"))
    order = chat.reorder_queue([c.pending_id, "unknown", c.pending_id])
    assert [m.text for m in order] == ["c", "a", "b"]
    copilot.open("g")
    first.result(timeout=10)
    for turn in (a, b, c):
        turn.result(timeout=10)
    assert [t.user_text for t in chat.state().turns] == ["first", "c", "a", "b"]


def test_pending_lists_steering_first_then_queued(chat_on, copilot: ScriptedProvider) -> None:
    chat = chat_on(copilot)
    chat.send("first")
    queued = chat.send("queued")
    copilot.wait_reached("g")
    steering = chat.steer("steer")
    assert [m.id for m in chat.state().pending] == [steering.id, queued.pending_id]


def test_a_resumable_error_or_a_failure_holds_the_queue_until_a_success(chat_on) -> None:
    provider = ScriptedProvider().on("bad", Gate("g"), Reject("boom"))
    chat = chat_on(provider)
    bad = chat.send("bad")
    queued = chat.send("queued")
    provider.open("g")
    assert bad.result(timeout=10).state is OutcomeState.ERROR
    assert [m.text for m in chat.state().pending] == ["queued"]
    assert chat.send("direct").result(timeout=10).state is OutcomeState.COMPLETE
    assert queued.result(timeout=10).state is OutcomeState.COMPLETE


def test_steering_a_crashed_provider_had_waits_with_the_queue_for_a_success(
    db_path: Path,
) -> None:
    """DESIGN.md: steering the provider had when it died is requeued at the head of
    the queue and, like everything queued after a turn that did not succeed,
    waits for the next successful turn (it never runs right after the failure)."""
    provider = ManualProvider("copilot")
    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path),
            providers={"manual": provider},
            clock=FakeClock(),
            restart_policy=RestartPolicy(backoff_min=0.0, backoff_max=0.0),
        )
        chat = host.create_session(provider="manual").chat()
        first = chat.send("first")
        steering = chat.steer("steer")
        runner.run()
        assert provider.run is not None and provider.run.unread  # the provider has it
        provider.crash()
        runner.run()
        assert first.result(timeout=10).state is OutcomeState.ERROR
        state = chat.state()
        assert state.active_turn is None
        assert [m.id for m in state.queued_messages] == [steering.id]
        direct = chat.send("direct")
        runner.run()
        assert provider.idle()
        runner.run()
        assert direct.result(timeout=10).state is OutcomeState.COMPLETE
        assert chat.state().active_turn is not None
        assert chat.state().active_turn.message.text == "steer"  # only now


def test_a_cancel_removes_steering_as_cancelled_and_never_withdraws(
    chat_on, copilot: ScriptedProvider
) -> None:
    chat = chat_on(copilot)
    sub = chat.subscribe()
    first = chat.send("first")
    copilot.wait_reached("g")
    steering = chat.steer("steer")
    chat.cancel()
    first.result(timeout=10)
    events = drain_events(sub, turns=1)
    removed = [e for e in events if isinstance(e, PendingMessageRemoved)]
    assert [(e.pending_id, e.reason) for e in removed] == [(steering.id, RemovalReason.CANCELLED)]
    assert not any(isinstance(e, SteeringWithdrawn) for e in events)
    assert chat.state().pending == ()


# -- durability ----------------------------------------------------------------------------


def test_pending_messages_survive_a_restart(db_path: Path) -> None:
    provider = ScriptedProvider().on("first", Gate("never"))
    host = start(db_path, provider)
    session = host.create_session()
    chat = session.chat()
    chat.send("first")
    provider.wait_reached("never")
    a = chat.send("a")
    b = chat.send("b")
    chat.reorder_queue([b.pending_id])
    steering = chat.steer("steer")
    host.stop()
    restarted = ScriptedProvider()
    host = start(db_path, restarted)
    try:
        chat = host.open_session(session.id).chat()
        state = chat.state()
        # The steering's turn died with the process: it heads the queue, which waits.
        assert [(m.id, m.text) for m in state.pending] == [
            (steering.id, "steer"),
            (b.pending_id, "b"),
            (a.pending_id, "a"),
        ]
        assert restarted.model_inputs == []
        assert chat.send("go").result(timeout=10).state is OutcomeState.COMPLETE
        sub = chat.subscribe()
        drain_events(sub, turns=5)
        assert [t.user_text for t in chat.state().turns] == ["first", "go", "steer", "b", "a"]
    finally:
        host.stop()


def test_a_message_queued_after_removals_is_restored_behind_the_ones_before_it(
    db_path: Path,
) -> None:
    """Found by the lifecycle machine: a new message was stored at the queue's
    length, and removals leave gaps, so it came back ahead of an older one."""
    provider = ScriptedProvider().on("first", Gate("never"))
    host = start(db_path, provider)
    session = host.create_session()
    chat = session.chat()
    chat.send("first")
    provider.wait_reached("never")
    a, b, c = (chat.send(text) for text in ("a", "b", "c"))
    assert chat.remove_pending(a.pending_id) and chat.remove_pending(b.pending_id)
    d = chat.send("d")
    host.stop()
    host = start(db_path, ScriptedProvider())
    try:
        restored = host.open_session(session.id).chat().state()
        assert [m.id for m in restored.queued_messages] == [c.pending_id, d.pending_id]
    finally:
        host.stop()


def test_a_restored_queue_with_gaps_takes_a_new_message_at_its_end(db_path: Path) -> None:
    provider = ScriptedProvider().on("first", Gate("never"))
    host = start(db_path, provider)
    session = host.create_session()
    chat = session.chat()
    chat.send("first")
    provider.wait_reached("never")
    a, b, c = (chat.send(text) for text in ("a", "b", "c"))
    assert chat.remove_pending(a.pending_id) and chat.remove_pending(b.pending_id)
    host.stop()  # c is stored at position 2, alone
    for step in ("d", "check"):
        gated = ScriptedProvider().on("again", Gate("never"))
        host = start(db_path, gated)
        try:
            chat = host.open_session(session.id).chat()
            if step == "d":
                chat.send("again")  # runs: the restored queue waits for a success
                gated.wait_reached("never")
                d = chat.send("d")
            else:
                ids = [m.id for m in chat.state().queued_messages]
                assert ids == [c.pending_id, d.pending_id]
        finally:
            host.stop()
