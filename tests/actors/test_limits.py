"""Limits in bytes (actors/limits.py): a message's text and attachments, and a
subscriber's unread events; a subscription that keeps the chat's own state."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from agenthost.actors import Chat, Host, HostLimits
from agenthost.actors.handles import Subscription
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.messages.events import (
    AssistantDelta,
    ChatSnapshot,
    Lagged,
    TurnCompleted,
    TurnStarted,
)
from agenthost.messages.sizes import EVENT_OVERHEAD, event_bytes, utf8_bytes
from agenthost.messages.state import ChatState, UserMessage
from agenthost.providers.scripted import Gate, ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock

LIMITS = HostLimits(
    message_bytes=100, attachment_bytes=50, attachments=2, subscriber_queue_bytes=5_000
)


@pytest.fixture
def gated() -> ScriptedProvider:
    return ScriptedProvider(echo_deltas=10).on("hold", Gate("g"))


@pytest.fixture
def limited(db_path: Path, gated: ScriptedProvider) -> Iterator[Chat]:
    host = Host.start(
        store=SqliteStore(db_path), providers={"scripted": gated}, clock=FakeClock(), limits=LIMITS
    )
    yield host.create_session().chat()
    host.stop()


def refused(call: object) -> AgentHostError:
    with pytest.raises(AgentHostError) as caught:
        call()  # type: ignore[operator]
    assert caught.value.code is ErrorCode.TOO_LARGE
    return caught.value


def test_a_message_over_its_limit_in_bytes_is_refused_and_changes_nothing(limited: Chat) -> None:
    error = refused(lambda: limited.send("x" * 101))
    assert (
        error.message == "the message's text is 101 bytes; at most 100 (HostLimits.message_bytes)"
    )
    refused(lambda: limited.send("é" * 51))  # 51 characters, 102 bytes
    assert limited.state().turns == ()
    assert limited.send("x" * 100).result(timeout=10).state is OutcomeState.COMPLETE


def test_steering_and_an_edit_over_the_limit_are_refused(
    limited: Chat, gated: ScriptedProvider
) -> None:
    limited.send("hold")
    gated.wait_reached("g")
    queued = limited.send("later")
    refused(lambda: limited.steer("x" * 101))
    refused(lambda: limited.edit_pending(queued.pending_id, "x" * 101))  # type: ignore[arg-type]
    assert [m.text for m in limited.state().pending] == ["later"]


def test_attachments_over_their_limits_are_refused_before_they_are_read(
    limited: Chat, tmp_path: Path
) -> None:
    big, small = tmp_path / "big.txt", tmp_path / "small.txt"
    big.write_text("y" * 51)
    small.write_text("y" * 50)
    error = refused(lambda: limited.send("hi", attachments=[big]))
    assert "big.txt is 51 bytes; at most 50 (HostLimits.attachment_bytes)" in error.message
    error = refused(lambda: limited.send("hi", attachments=[small, small, tmp_path / "none"]))
    assert error.message == "3 attachments; at most 2 (HostLimits.attachments)"
    assert limited.send("hi", attachments=[small]).result(timeout=10).state is OutcomeState.COMPLETE


def test_a_subscriber_whose_unread_events_pass_the_byte_limit_lags_and_the_host_goes_on(
    limited: Chat,
) -> None:
    slow = limited.subscribe()  # never read until the turns ended
    keeping_up = limited.subscribe(maxsize=1_000_000)
    for _ in range(10):  # each echo is ~100 bytes in 10 deltas: ~2,100 event bytes a turn
        assert limited.send("x" * 90).result(timeout=10).state is OutcomeState.COMPLETE
        while not isinstance(keeping_up.next(10), TurnCompleted):  # read as it comes
            pass
    events = list(slow)
    assert isinstance(events[-1], Lagged) and slow.closed
    assert sum(map(event_bytes, events[:-1])) <= LIMITS.subscriber_queue_bytes
    assert not keeping_up.closed


def test_reading_a_subscription_frees_the_bytes_of_what_was_read() -> None:
    subscription = Subscription(100, max_bytes=3 * EVENT_OVERHEAD + 30)
    delta = AssistantDelta(turn_id="t", part_id="p", text="x" * 10)
    assert subscription.push_many([delta, delta, delta])
    assert subscription.queued_bytes == 3 * (EVENT_OVERHEAD + 10)
    for _ in range(3):
        subscription.next(1)
    assert subscription.queued_bytes == 0
    assert subscription.push_many([delta, delta, delta])  # room again
    assert not subscription.push_many([delta])
    assert isinstance(list(subscription)[-1], Lagged)


def test_a_subscription_keeping_state_shows_the_state_of_the_last_burst_read_in_full() -> None:
    subscription = Subscription(100, keep_state=True)
    first, second = ChatState(resource="r", title="one"), ChatState(resource="r", title="two")
    subscription.push(ChatSnapshot(state=ChatState(resource="r")))
    started = TurnStarted(turn_id="t", message=UserMessage(text="hi"))
    delta = AssistantDelta(turn_id="t", part_id="p", text="a")
    subscription.push_many([started, delta], first)
    subscription.push_many([delta], second)
    seen = []
    for _ in range(4):
        subscription.next(1)
        seen.append(None if subscription.state is None else subscription.state.title)
    assert seen == [None, None, "one", "two"]


def test_utf8_bytes_is_the_encoded_length() -> None:
    for text in ("", "plain", "é", "日本語", "😀 and more"):
        assert utf8_bytes(text) == len(text.encode())
