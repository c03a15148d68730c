"""The root channel's actions against a live server: root/agentsChanged when a
provider becomes unavailable (past the supervisor's restart limit) and when it
comes back; root/activeSessionsChanged, the identity's own count, as its
sessions are created and disposed; the root windowed like any channel."""

import asyncio
import uuid
from pathlib import Path
from typing import Any

from agenthost.actors import Host, RestartPolicy
from agenthost.providers.scripted import Crash, Say, ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.server.ahp_client import OTHER_TOKEN, AhpClient, action_of, running
from tests.server.test_windows import actions_in, delivered, receive

ROOT = "ahp-root://"


def agents_changed(agents: list[str]) -> Any:
    def match(n: dict[str, Any]) -> bool:
        return (
            action_of("root/agentsChanged")(n)
            and [a["provider"] for a in n["params"]["action"]["agents"]] == agents
        )

    return match


def turn(text: str, turn_id: str) -> dict[str, Any]:
    return {"type": "chat/turnStarted", "turnId": turn_id, "message": {"text": text}}


async def crash_twice(client: AhpClient, chat: str) -> None:
    for n in range(2):
        await client.dispatch(chat, turn("boom", f"t{n}"))
        await client.wait_for(action_of("chat/error", turnId=f"t{n}"))


def test_agents_changed_goes_to_every_root_when_a_provider_is_unavailable_and_when_it_is_back(
    db_path: Path,
) -> None:
    clock = FakeClock()
    provider = ScriptedProvider().on("boom", Say("x"), Crash())
    policy = RestartPolicy(intensity=1, period=60, backoff_min=0.0, backoff_max=0.0, cooldown=30)
    host = Host.start(
        store=SqliteStore(db_path),
        providers={"scripted": provider},
        clock=clock,
        restart_policy=policy,
    )

    async def main() -> None:
        async with running(host) as server, server.client() as client:
            result = await client.initialize(initialSubscriptions=[ROOT])
            assert [a["provider"] for a in result["snapshots"][0]["state"]["agents"]] == [
                "scripted"
            ]
            uri = f"ahp-session:/{uuid.uuid4()}"
            chat = (await client.call("createSession", {"channel": uri}))["state"]["defaultChat"]
            await client.call("subscribe", {"channel": chat})
            await crash_twice(client, chat)
            gone = await client.wait_for(agents_changed([]))
            assert gone["params"]["channel"] == ROOT and gone["params"]["serverSeq"] > 0
            snapshot = (await client.call("subscribe", {"channel": ROOT}))["snapshot"]
            assert snapshot["state"]["agents"] == []  # the snapshot agrees
            clock.advance(policy.cooldown)  # the cool-down ends: it is started again
            await client.wait_for(agents_changed(["scripted"]))

    try:
        asyncio.run(main())
    finally:
        host.stop()


def test_the_root_channel_can_be_windowed_and_carries_its_notifications_in_frames(
    host: Host,
) -> None:
    async def main() -> None:
        async with running(host) as server, server.client() as client:
            await client.initialize()
            result = await client.call("subscribe", {"channel": ROOT, "flowControl": receive()})
            assert "flowControl" in result and "snapshot" not in result
            uri = f"ahp-session:/{uuid.uuid4()}"
            await client.call("createSession", {"channel": uri})
            await client.wait_until(
                lambda: (
                    any(
                        m.kind == "message" and m.message["method"] == "root/sessionAdded"
                        for m in delivered(client, ROOT)
                    )
                    and bool(actions_in(client, ROOT))
                )  # the count follows, once it is read
            )
            first = delivered(client, ROOT)[0].message
            assert first["method"] == "channel/snapshot"
            assert first["params"]["snapshot"]["resource"] == ROOT
            counted = [a["action"] for a in actions_in(client, ROOT)]
            assert counted == [{"type": "root/activeSessionsChanged", "activeSessions": 1}]
            assert not any(n.get("method") == "root/sessionAdded" for n in client.notifications)

    asyncio.run(main())


def active_sessions(count: int) -> Any:
    return action_of("root/activeSessionsChanged", activeSessions=count)


def test_active_sessions_is_the_identitys_own_count_in_the_snapshot_and_as_it_changes(
    host: Host,
) -> None:
    async def main() -> None:
        async with (
            running(host) as server,
            server.client() as alice,
            server.client(OTHER_TOKEN) as bob,
        ):
            first = await alice.initialize(initialSubscriptions=[ROOT])
            assert first["snapshots"][0]["state"]["activeSessions"] == 0
            await bob.initialize("bob-1", initialSubscriptions=[ROOT])
            uris = [f"ahp-session:/{uuid.uuid4()}" for _ in range(2)]
            for uri in uris:
                await alice.call("createSession", {"channel": uri})
            counted = await alice.wait_for(active_sessions(2))
            assert counted["params"]["channel"] == ROOT and counted["params"]["serverSeq"] > 0
            await alice.call("disposeSession", {"channel": uris[0]})
            await alice.wait_for(active_sessions(1))
            snapshot = (await alice.call("subscribe", {"channel": ROOT}))["snapshot"]
            assert snapshot["state"]["activeSessions"] == 1  # the snapshot agrees
            bobs = (await bob.call("subscribe", {"channel": ROOT}))["snapshot"]
            assert bobs["state"]["activeSessions"] == 0
            assert not bob.actions(ROOT)  # alice's count is hers alone

    asyncio.run(main())


def test_an_identitys_count_is_replayed_to_it_alone(host: Host) -> None:
    async def main() -> None:
        async with running(host) as server:
            async with server.client() as alice:
                seen = (await alice.initialize(initialSubscriptions=[ROOT]))["serverSeq"]
                await alice.call("createSession", {"channel": f"ahp-session:/{uuid.uuid4()}"})
                await alice.wait_for(active_sessions(1))
            async with server.client() as again, server.client(OTHER_TOKEN) as bob:
                replay = await again.call(
                    "reconnect",
                    {"clientId": "c1", "lastSeenServerSeq": seen, "subscriptions": [ROOT]},
                )
                assert replay["type"] == "replay"
                assert [e["action"] for e in replay["actions"]] == [
                    {"type": "root/activeSessionsChanged", "activeSessions": 1}
                ]
                theirs = await bob.call(
                    "reconnect",
                    {"clientId": "bob-1", "lastSeenServerSeq": seen, "subscriptions": [ROOT]},
                )
                assert theirs["type"] == "replay" and theirs["actions"] == []

    asyncio.run(main())
