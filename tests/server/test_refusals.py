"""Actions of AHP 1.1 this server does not offer (MCP servers, tool-call
authorization, changesets, working directories, a session model, the
customizations only the host changes, the host's own activity and streamed
input), dispatched by a client over a live server: each is echoed to its sender with the reason of
server/refusals.py, and neither the session's nor the chat's state changes."""

import asyncio
import uuid
from typing import Any

from agenthost.actors import Host
from agenthost.messages.wire import action_from_wire
from agenthost.providers.scripted import ScriptedProvider
from agenthost.server.refusals import REFUSED
from tests.server.ahp_client import Server, running
from tests.server.test_chat_actions import by_origin

SESSION_ACTIONS: list[dict[str, Any]] = [
    {"type": "session/mcpServerStartRequested", "id": "m1"},
    {"type": "session/mcpServerStopRequested", "id": "m1"},
    {"type": "session/mcpServerBackgroundRequested", "id": "m1"},
    {"type": "session/changesetsChanged", "changesets": []},
    {"type": "session/workingDirectorySet", "directory": "file:///tmp/x"},
    {"type": "session/workingDirectoryRemoved", "directory": "file:///tmp/x"},
    {
        "type": "session/workingDirectoryReplaced",
        "directory": "file:///tmp/x",
        "replacement": "file:///tmp/y",
    },
    {"type": "session/customizationRemoved", "id": "c1"},
    {"type": "session/modelChanged", "model": {"id": "gpt-x"}},
    {"type": "session/serverToolsChanged", "tools": []},
    {"type": "session/activityChanged", "activity": "busy"},
]
CHAT_ACTIONS: list[dict[str, Any]] = [
    {"type": "chat/toolCallAuthResolved", "turnId": "t1", "toolCallId": "x"},
    {"type": "chat/changesetsChanged", "changesets": []},
    {"type": "chat/workingDirectorySet", "directory": "file:///tmp/x"},
    {"type": "chat/workingDirectoryRemoved", "directory": "file:///tmp/x"},
    {"type": "chat/activityChanged", "activity": "thinking"},
    {"type": "chat/toolCallDelta", "turnId": "t1", "toolCallId": "x", "content": "{"},
]


def test_actions_not_offered_are_echoed_with_their_reason_and_change_nothing(
    host: Host, provider: ScriptedProvider
) -> None:
    async def main() -> None:
        async with running(host) as server:
            await body(server)

    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize(client_id="c1")
            uri = f"ahp-session:/{uuid.uuid4()}"
            created = await client.call("createSession", {"channel": uri})
            chat = created["state"]["defaultChat"]
            before = [
                (await client.call("subscribe", {"channel": c}))["snapshot"] for c in (uri, chat)
            ]
            dispatched = [(uri, a) for a in SESSION_ACTIONS] + [(chat, a) for a in CHAT_ACTIONS]
            for channel, action in dispatched:
                seq = await client.dispatch(channel, action)
                echo = (await client.wait_for(by_origin(seq)))["params"]
                reason = REFUSED[type(action_from_wire(action))]
                assert echo["rejectionReason"] == reason, action["type"]
                assert echo["action"] == action and "serverSeq" not in echo
            after = [
                (await client.call("subscribe", {"channel": c}))["snapshot"] for c in (uri, chat)
            ]
            assert [s["state"] for s in after] == [s["state"] for s in before]

    asyncio.run(main())


def test_every_refusal_says_not_offered_or_who_sends_it() -> None:
    for action_type, reason in REFUSED.items():
        assert reason.startswith(("not offered: ", "only the host sends ")), action_type
