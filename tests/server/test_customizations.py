"""A session's customizations over a live server: the snapshot lists the
host's contributions, a client's session/customizationToggled turns one off
or on for that session (the host's action, with the dispatch's origin, to
every subscriber), a toggle the host cannot apply is echoed with its reason,
and another identity's toggle is ignored."""

import asyncio
import uuid
from typing import Any

from agenthost.actors import Host
from agenthost.actors.contributions.customizations import PLUGIN_ID
from agenthost.providers.scripted import ScriptedProvider
from tests.server.ahp_client import OTHER_TOKEN, Server, action_of, running
from tests.server.test_chat_actions import by_origin
from tests.server.test_session_channel import agrees


def toggle(ident: str, enabled: bool) -> dict[str, Any]:
    return {"type": "session/customizationToggled", "id": ident, "enabled": enabled}


def hooks(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    [plugin] = state["customizations"]
    assert (plugin["type"], plugin["id"]) == ("plugin", PLUGIN_ID)
    return {hook["id"]: hook for hook in plugin["children"]}


def run(host: Host, body: Any) -> None:
    async def main() -> None:
        async with running(host) as server:
            await body(server)

    asyncio.run(main())


def test_a_toggle_goes_to_every_subscriber_as_the_hosts_action_with_its_origin(
    host: Host, provider: ScriptedProvider
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as alice, server.client() as watcher:
            await alice.initialize(client_id="alice")
            await watcher.initialize(client_id="watcher")
            uri = f"ahp-session:/{uuid.uuid4()}"
            await alice.call("createSession", {"channel": uri})
            snapshot = (await alice.call("subscribe", {"channel": uri}))["snapshot"]
            await watcher.call("subscribe", {"channel": uri})
            listed = hooks(snapshot["state"])
            assert listed["mark_unread"]["enabled"] is True
            assert listed["turn_admission"]["_meta"] == {
                "agenthost.required": "it enforces archived sessions and read-only chats"
            }

            seq = await alice.dispatch(uri, toggle("mark_unread", False))
            echo = (await alice.wait_for(by_origin(seq)))["params"]
            assert "rejectionReason" not in echo and echo["serverSeq"] > snapshot["fromSeq"]
            assert echo["action"] == {
                "type": "session/customizationToggled",
                "id": "mark_unread",
                "enabled": False,
                "enablement": [{"kind": "session", "enabled": False}],
            }
            seen = await watcher.wait_for(action_of("session/customizationToggled"))
            assert seen["params"]["origin"] == {"clientId": "alice", "clientSeq": seq}
            await agrees(server, alice, snapshot, uri)

            seq = await alice.dispatch(uri, toggle("mark_unread", True))
            echo = (await alice.wait_for(by_origin(seq)))["params"]
            assert echo["action"]["enabled"] is True and echo["action"]["enablement"] == []
            await agrees(server, alice, snapshot, uri)

    run(host, body)


def test_a_toggle_the_host_cannot_apply_is_echoed_with_its_reason(
    host: Host, provider: ScriptedProvider
) -> None:
    refused = [
        (toggle("nope", False), "this session has no customization 'nope'"),
        (
            toggle("queue_drain", False),
            "'queue_drain' cannot be turned off: queued messages would never run without it",
        ),
        (toggle(PLUGIN_ID, False), "is always on: its hooks are turned on and off one by one"),
        (
            {
                "type": "session/customizationToggled",
                "id": "mark_unread",
                "enablement": [{"kind": "global", "enabled": False}],
            },
            "this host keeps one decision per session",
        ),
        (
            {"type": "session/customizationRemoved", "id": "mark_unread"},
            "only the host sends 'session/customizationRemoved'",
        ),
    ]

    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize(client_id="c1")
            uri = f"ahp-session:/{uuid.uuid4()}"
            await client.call("createSession", {"channel": uri})
            before = (await client.call("subscribe", {"channel": uri}))["snapshot"]["state"]
            for action, reason in refused:
                seq = await client.dispatch(uri, action)
                echo = (await client.wait_for(by_origin(seq)))["params"]
                assert reason in echo["rejectionReason"], action
                assert echo["action"] == action and "serverSeq" not in echo
            after = (await client.call("subscribe", {"channel": uri}))["snapshot"]["state"]
            assert after == before

    run(host, body)


def test_another_identitys_toggle_is_ignored(host: Host, provider: ScriptedProvider) -> None:
    async def body(server: Server) -> None:
        async with server.client() as alice, server.client(OTHER_TOKEN) as bob:
            await alice.initialize(client_id="alice")
            await bob.initialize(client_id="bob")
            uri = f"ahp-session:/{uuid.uuid4()}"
            own = f"ahp-session:/{uuid.uuid4()}"
            await alice.call("createSession", {"channel": uri})
            await bob.call("createSession", {"channel": own})
            await bob.dispatch(uri, toggle("mark_unread", False))
            # Dispatches are handled in order: once this one is echoed, that one was handled.
            seq = await bob.dispatch(own, toggle("nope", False))
            await bob.wait_for(by_origin(seq))
            assert bob.actions(uri) == []
            state = (await alice.call("subscribe", {"channel": uri}))["snapshot"]["state"]
            assert hooks(state)["mark_unread"]["enabled"] is True

    run(host, body)
