"""A chat channel: one subscription in, sequenced envelopes out, and its own copy
of the chat state that always agrees with the last envelope sent."""

import asyncio
from typing import Any

from agenthost.actors.handles import Subscription
from agenthost.messages.events import (
    AssistantDelta,
    ChatEvent,
    ChatSnapshot,
    ResponsePartAdded,
    TurnCompleted,
    TurnStarted,
)
from agenthost.messages.reducers import reduce_chat
from agenthost.messages.state import ChatState, MarkdownPart, UserMessage
from agenthost.server.ahp import Metrics
from agenthost.server.channels import ChatChannel, Sequencer

NOW = 1_000


class Inbox:
    version: str | None = None  # not negotiated: sent everything

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def offer(self, message: dict[str, Any]) -> None:
        self.messages.append(message)


def test_a_burst_is_sent_event_by_event_and_folded_into_the_state_at_once() -> None:
    turn: list[ChatEvent] = [
        TurnStarted(turn_id="t", message=UserMessage(text="hi")),
        ResponsePartAdded(turn_id="t", part=MarkdownPart(id="p")),
        *(AssistantDelta(turn_id="t", part_id="p", text=f"{i} ") for i in range(5)),
        TurnCompleted(turn_id="t"),
    ]
    start = ChatState(resource="ahp-chat:/c")

    async def main() -> tuple[ChatChannel, Inbox, list[int]]:
        subscription = Subscription(100)
        subscription.push(ChatSnapshot(state=start))
        channel = ChatChannel("ahp-chat:/c", "s", Sequencer(100), lambda: NOW)
        await channel.open(subscription)
        inbox = Inbox()
        channel.subscribers.add(inbox)
        seen: list[int] = []
        channel._on_event = lambda event: seen.append(channel.from_seq)
        subscription.push_many(turn[:4])  # the reader wakes once for these
        subscription.push_many(turn[4:])
        subscription.close()
        assert channel._task is not None
        await asyncio.wait_for(channel._task, 10)
        return channel, inbox, seen

    channel, inbox, seen = asyncio.run(main())
    expected = start
    for event in turn:
        expected = reduce_chat(expected, event, NOW)
    assert channel.state == expected
    assert channel.state.turns[-1].response_parts[0].content == "0 1 2 3 4 "  # type: ignore[union-attr]
    envelopes = [m["params"] for m in inbox.messages]
    assert [e["action"]["type"] for e in envelopes] == [
        "chat/turnStarted",
        "chat/responsePart",
        *["chat/delta"] * 5,
        "chat/turnComplete",
    ]
    assert [e["serverSeq"] for e in envelopes] == list(range(1, 9)) == seen
    assert channel.from_seq == 8


def test_a_replay_never_spans_a_time_a_chat_channel_was_not_recorded() -> None:
    sequencer = Sequencer(100)
    chat = {"ahp-chat:/c"}
    sequencer.stamp("ahp-root://", {"type": "x"})  # seq 1
    sequencer.opened("ahp-chat:/c")  # opened at 1: its events after 1 are kept
    sequencer.stamp("ahp-chat:/c", {"type": "a"})  # 2
    assert [e["serverSeq"] for e in sequencer.since(1, chat) or []] == [2]
    assert sequencer.since(0, chat) is None  # from before it was opened
    sequencer.closed("ahp-chat:/c")  # closed: 3 marks the gap
    assert sequencer.since(2, chat) is None  # what the chat does now has no seq
    assert sequencer.since(2, {"ahp-root://"}) == []  # other channels replay as before
    sequencer.opened("ahp-chat:/c")  # reopened at 3
    assert sequencer.since(2, chat) is None  # saw all up to the close: not enough
    assert sequencer.since(3, chat) == []  # followed it since it reopened
    sequencer.stamp("ahp-chat:/c", {"type": "b"})  # 4
    assert [e["serverSeq"] for e in sequencer.since(3, chat) or []] == [4]
    assert sequencer._recorded_from == {"ahp-chat:/c": 3}  # open channels only


def test_the_turn_latency_histogram_counts_without_keeping_every_latency() -> None:
    metrics = Metrics()
    for seconds in (0.01, 0.05, 0.3, 100.0):
        metrics.turn_took(seconds)
    text = metrics.render({}, chat_channels=0)
    assert 'agenthost_turn_latency_seconds_bucket{le="0.05"} 2' in text
    assert 'agenthost_turn_latency_seconds_bucket{le="0.25"} 2' in text
    assert 'agenthost_turn_latency_seconds_bucket{le="0.5"} 3' in text
    assert 'agenthost_turn_latency_seconds_bucket{le="60.0"} 3' in text
    assert 'agenthost_turn_latency_seconds_bucket{le="+Inf"} 4' in text
    assert "agenthost_turn_latency_seconds_count 4" in text
    assert "agenthost_turn_latency_seconds_sum 100.360000" in text
    assert sum(metrics.latency_buckets) == 3  # four turns, no list of them
