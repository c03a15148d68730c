"""fetchTurns in the form the negotiated version knows, against a live server:
before 0.5.1 `{before?, limit?}` -> `{turns, hasMore}`; from 0.5.1 `{cursor?}`
-> `{}`, the page arriving as chat/turnsLoaded to the requester alone."""

from typing import Any

import pytest

from agenthost.actors import Host
from agenthost.server.ahp import Limits
from tests.server.ahp_client import AhpClient, RpcFailed, Server, action_of, fetch_page
from tests.server.test_ahp import new_session, run, turn


async def three_turns(client: AhpClient, version: str) -> str:
    await client.initialize(protocolVersions=[version])
    _, chat = await new_session(client)
    await client.call("subscribe", {"channel": chat})
    for n in range(3):
        await client.dispatch(chat, turn(f"q{n}", f"t{n}"))
        await client.wait_for(action_of("chat/turnComplete", turnId=f"t{n}"))
    return chat


def ids(page: dict[str, Any]) -> list[str]:
    return [t["id"] for t in page["turns"]]


def test_before_0_5_1_a_page_ends_before_the_turn_named(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await three_turns(client, "0.5.0")
            newest = await client.call("fetchTurns", {"channel": chat})  # a page is 2 here
            assert ids(newest) == ["t1", "t2"] and newest["hasMore"] is True
            every = await client.call("fetchTurns", {"channel": chat, "limit": 5})
            assert ids(every) == ["t0", "t1", "t2"] and every["hasMore"] is False
            older = await client.call("fetchTurns", {"channel": chat, "before": "t1", "limit": 2})
            assert ids(older) == ["t0"] and older["hasMore"] is False
            assert "nextCursor" not in older
            with pytest.raises(RpcFailed) as refused:
                await client.call("fetchTurns", {"channel": chat, "before": "nope"})
            assert refused.value.code == -32602 and "before" in refused.value.error["message"]
            ours = await client.call("fetchTurns", {"channel": chat, "cursor": "0"})
            assert ids(ours) == ["t0", "t1"] and ours["nextCursor"] == "2"  # forward, by offset

    run(host, body, Limits(page=2))


def test_from_0_5_1_the_turns_arrive_as_turns_loaded_to_the_requester_alone(
    host: Host,
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client, server.client() as watcher:
            chat = await three_turns(client, "0.5.1")
            await watcher.initialize(client_id="watcher")
            snapshot = (await watcher.call("subscribe", {"channel": chat}))["snapshot"]
            assert len(snapshot["state"]["turns"]) == 3  # every turn: nothing to load
            assert "turnsNextCursor" not in snapshot["state"]
            newest = await fetch_page(client, {"channel": chat, "limit": 2})
            assert ids(newest) == ["t1", "t2"] and newest["turnsNextCursor"] == "1"
            [envelope] = [
                a for a in client.actions(chat) if a["action"]["type"] == "chat/turnsLoaded"
            ]
            earlier = [a["serverSeq"] for a in client.actions() if a is not envelope]
            assert envelope["serverSeq"] > max(earlier)  # a number of its own
            again = await client.call(
                "reconnect",
                {"clientId": "c1", "subscriptions": [{"channel": chat, "lastSeenServerSeq": 0}]},
            )
            replayed = again["channels"][0].get("actions", [])
            assert not any(a["action"]["type"] == "chat/turnsLoaded" for a in replayed)
            oldest = await fetch_page(client, {"channel": chat, "cursor": "1"})
            assert ids(oldest) == ["t0"] and "turnsNextCursor" not in oldest
            await watcher.call("ping")
            assert not any(a["action"]["type"] == "chat/turnsLoaded" for a in watcher.actions(chat))
            with pytest.raises(RpcFailed) as refused:
                await client.call("fetchTurns", {"channel": chat, "cursor": "99"})
            assert refused.value.code == -32602

    run(host, body)
