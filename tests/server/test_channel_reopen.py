"""A chat channel whose stream a shard's death cut reopens from a new snapshot."""

import asyncio

from agenthost.actors.handles import Subscription
from agenthost.messages import AgentHostError, ErrorCode
from agenthost.messages.events import ChatSnapshot, Lagged, TurnStarted
from agenthost.messages.reducers import reduce_chat
from agenthost.messages.state import (
    ChatState,
    Turn,
    TurnState,
    UserMessage,
    chat_resource,
)
from agenthost.server.channels import ChatChannel, Sequencer

URI = "ahp-chat:/c1"


class Collecting:
    version: str | None = None  # not negotiated: sent everything

    def __init__(self) -> None:
        self.sent: list[dict[str, object]] = []

    def offer(self, message: dict[str, object]) -> None:
        self.sent.append(message)


def test_a_cut_channel_reopens_and_sends_the_running_turns_end_once() -> None:
    async def run() -> list[str]:
        start = ChatState(resource=chat_resource("c1"))
        running = reduce_chat(
            start,
            TurnStarted(turn_id="t1", message=UserMessage(text="hi"), session_id="s", chat_id="c1"),
            0,
        )
        abandoned = AgentHostError(code=ErrorCode.EXECUTION_ABANDONED, message="gone")
        ended = ChatState(
            resource=chat_resource("c1"),
            turns=(
                Turn(
                    id="t1", message=UserMessage(text="hi"), state=TurnState.ERROR, error=abandoned
                ),
            ),
        )
        first, second = Subscription(100), Subscription(100)
        first.push_many([ChatSnapshot(state=running), Lagged(dropped=0)])
        second.push(ChatSnapshot(state=ended))
        second.close()
        reopened = asyncio.Event()

        async def reopen() -> Subscription:
            reopened.set()
            return second

        channel = ChatChannel(URI, "s", Sequencer(100), lambda: 0, reopen=reopen)
        client = Collecting()
        channel.subscribers.add(client)  # type: ignore[arg-type]
        await channel.open(first)
        await asyncio.wait_for(reopened.wait(), 10)
        await asyncio.wait_for(channel._task, 10)  # type: ignore[arg-type]
        assert channel.state == ended
        return [m["params"]["action"]["type"] for m in client.sent]  # type: ignore[index]

    assert asyncio.run(run()) == ["chat/error"]
