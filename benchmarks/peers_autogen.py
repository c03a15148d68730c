"""The peers' chat workload on autogen-core's SingleThreadedAgentRuntime.

A bench-only peer (`pip install .[bench]`): benchmarks/peers.py imports this
module only when it runs the autogen workload. Per chat, a session, a chat and
a provider agent (one agent type each, keyed by the chat's index). A user
message goes in with `send_message` (autogen's direct messages are calls that
wait for the handler), is passed on session -> chat -> provider the same way,
and the provider streams its reply with `publish_message` to the chat's topic,
which the chat agent hands to the chat's subscriber (an asyncio queue).
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from autogen_core import (
    AgentId,
    AgentInstantiationContext,
    MessageContext,
    RoutedAgent,
    SingleThreadedAgentRuntime,
    TopicId,
    TypeSubscription,
    message_handler,
)

from benchmarks.peers import (
    WAIT_S,
    Completed,
    Delta,
    Open,
    ProviderSend,
    Tally,
    UserText,
    reply_chunks,
    run_clients,
)

REPLIES = "chat-replies"


class SessionAgent(RoutedAgent):
    def __init__(self) -> None:
        super().__init__("session")

    @message_handler
    async def on_open(self, message: Open, ctx: MessageContext) -> None:
        await self.send_message(message, AgentId("chat", self.id.key))

    @message_handler
    async def on_user_text(self, message: UserText, ctx: MessageContext) -> None:
        await self.send_message(message, AgentId("chat", self.id.key))


class ChatAgent(RoutedAgent):
    def __init__(self, subscriber: "asyncio.Queue[Any]") -> None:
        super().__init__("chat")
        self._subscriber = subscriber

    @message_handler
    async def on_open(self, message: Open, ctx: MessageContext) -> None:
        await self.send_message(message, AgentId("provider", self.id.key))

    @message_handler
    async def on_user_text(self, message: UserText, ctx: MessageContext) -> None:
        await self.send_message(ProviderSend(text=message.text), AgentId("provider", self.id.key))

    @message_handler
    async def on_delta(self, message: Delta, ctx: MessageContext) -> None:
        self._subscriber.put_nowait(message)

    @message_handler
    async def on_completed(self, message: Completed, ctx: MessageContext) -> None:
        self._subscriber.put_nowait(message)


class ProviderAgent(RoutedAgent):
    def __init__(self) -> None:
        super().__init__("provider")

    @message_handler
    async def on_open(self, message: Open, ctx: MessageContext) -> None:
        return None

    @message_handler
    async def on_send(self, message: ProviderSend, ctx: MessageContext) -> None:
        topic = TopicId(REPLIES, self.id.key)
        for chunk in reply_chunks(message.text):
            await self.publish_message(Delta(text=chunk), topic)
        await self.publish_message(Completed(), topic)


def _sender(runtime: SingleThreadedAgentRuntime, key: str) -> Callable[[str], Awaitable[None]]:
    session = AgentId("session", key)

    async def send(text: str) -> None:
        await runtime.send_message(UserText(text=text), session)

    return send


async def autogen_chats(chats: int) -> Tally:
    tally = Tally()
    started = time.perf_counter()
    runtime = SingleThreadedAgentRuntime()
    subscribers: dict[str, asyncio.Queue[Any]] = {str(i): asyncio.Queue() for i in range(chats)}

    def chat_agent() -> ChatAgent:
        return ChatAgent(subscribers[AgentInstantiationContext.current_agent_id().key])

    await SessionAgent.register(runtime, "session", SessionAgent)
    await ChatAgent.register(runtime, "chat", chat_agent)
    await ProviderAgent.register(runtime, "provider", ProviderAgent)
    await runtime.add_subscription(TypeSubscription(topic_type=REPLIES, agent_type="chat"))
    runtime.start()
    try:
        opened = (runtime.send_message(Open(), AgentId("session", key)) for key in subscribers)
        await asyncio.wait_for(asyncio.gather(*opened), WAIT_S)
        clients = [(_sender(runtime, key), queue.get) for key, queue in subscribers.items()]
        tally.setup_s = time.perf_counter() - started
        await run_clients(clients, tally)
    finally:
        await runtime.stop_when_idle()
        await runtime.close()
    return tally
