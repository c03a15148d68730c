"""A tool call whose input the provider streams, over a live server: the call
starts in status streaming, each piece goes out as chat/toolCallDelta (a
subscriber's snapshot mid-stream has the input so far), and the call is ready
with the whole input once the provider has it."""

import asyncio

from agenthost.actors import Host
from agenthost.providers.scripted import Say, ScriptedProvider, ToolCall
from tests.server.ahp_client import Server, action_of, fetched_turns
from tests.server.test_chat_actions import followed_chat, run, turn

WHOLE = '{"path": "a.txt"}'


def test_a_streamed_tool_input_reaches_clients_piece_by_piece(
    host: Host, provider: ScriptedProvider
) -> None:
    chunks = ('{"path"', ': "a.txt"}')
    step = ToolCall("write", WHOLE, needs_permission=False, chunks=chunks, stream_gate="g")
    provider.on("write it", step, Say("done"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            await client.dispatch(chat, turn("write it", "t1"))
            await asyncio.to_thread(provider.wait_reached, "g", 10)
            first = await client.wait_for(action_of("chat/toolCallDelta"))
            assert first["params"]["action"]["content"] == chunks[0]
            snapshot = (await client.call("subscribe", {"channel": chat}))["snapshot"]
            parts = snapshot["state"]["activeTurn"]["responseParts"]
            call = next(p["toolCall"] for p in parts if p["kind"] == "toolCall")
            assert call["status"] == "streaming" and call["partialInput"] == chunks[0]
            assert call["invocationMessage"] == "write: 1 of 2"
            assert not [
                a for a in client.actions(chat) if a["action"]["type"] == "chat/toolCallReady"
            ]
            await asyncio.to_thread(provider.open, "g")
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
            kinds = [a["action"]["type"] for a in client.actions(chat) if "serverSeq" in a]
            tool_kinds = [k for k in kinds if k.startswith("chat/toolCall")]
            assert tool_kinds == [
                "chat/toolCallStart",
                "chat/toolCallDelta",
                "chat/toolCallDelta",
                "chat/toolCallReady",
                "chat/toolCallComplete",
            ]
            turns = await fetched_turns(client, chat)
            done = next(
                p["toolCall"] for p in turns[-1]["responseParts"] if p["kind"] == "toolCall"
            )
            assert done["status"] == "completed" and done["toolInput"] == WHOLE

    run(host, body)
