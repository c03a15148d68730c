"""chat/activityChanged over a live server: what the host knows a turn is doing
("Thinking" while reasoning streams, "Running <tool>" while a call runs),
cleared when reply text comes, a call ends, and at the turn's end; a subscriber's
snapshot carries it as the chat state's `activity`."""

import asyncio

from agenthost.actors import Host
from agenthost.providers.scripted import Gate, Say, ScriptedProvider, Think, ToolCall
from tests.server.ahp_client import Server, action_of
from tests.server.test_chat_actions import followed_chat, run, turn


def test_the_chats_activity_follows_the_turn(host: Host, provider: ScriptedProvider) -> None:
    provider.on(
        "work",
        Think("hmm"),
        Gate("thinking"),
        ToolCall("ls", needs_permission=False),
        Say("done"),
    )

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            await client.dispatch(chat, turn("work", "t1"))
            await asyncio.to_thread(provider.wait_reached, "thinking", 10)
            await client.wait_for(action_of("chat/activityChanged", activity="Thinking"))
            snapshot = (await client.call("subscribe", {"channel": chat}))["snapshot"]
            assert snapshot["state"]["activity"] == "Thinking"
            await asyncio.to_thread(provider.open, "thinking")
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
            sent = [
                a["action"].get("activity")
                for a in client.actions(chat)
                if a["action"]["type"] == "chat/activityChanged" and "serverSeq" in a
            ]
            assert sent == ["Thinking", "Running ls", None]
            snapshot = (await client.call("subscribe", {"channel": chat}))["snapshot"]
            assert snapshot["state"].get("activity") is None

    run(host, body)


def test_a_turn_that_ends_while_a_call_runs_clears_the_activity(
    host: Host, provider: ScriptedProvider
) -> None:
    from agenthost.providers.scripted import ClientToolCall

    provider.on("fetch", ClientToolCall("fetch", "{}", gate="g"), Say("never"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            await client.dispatch(chat, turn("fetch", "t1"))
            await client.wait_for(action_of("chat/activityChanged", activity="Running fetch"))
            await client.dispatch(chat, {"type": "chat/turnCancelled", "turnId": "t1"})
            await client.wait_for(action_of("chat/turnCancelled", turnId="t1"))
            snapshot = (await client.call("subscribe", {"channel": chat}))["snapshot"]
            assert snapshot["state"].get("activity") is None

    run(host, body)
