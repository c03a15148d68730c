"""Two AHP fronts over the same two shards (in this process, no Ray): what a
client sees across connections that land on different fronts
(server/fronts.py; tests/shards/test_fronts_ray.py runs the processes)."""

import asyncio
import concurrent.futures
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import aiohttp
import pytest

from agenthost.actors.context import Departure
from agenthost.server.channels import ROOT, SEQ_BITS, Sequencer, front_seq_base
from agenthost.server.fronts import count_front_start
from agenthost.server.serve import ServeConfig, serve
from agenthost.shards import ShardedHost
from tests.server.ahp_client import (
    OTHER_TOKEN,
    TOKENS,
    WAIT_S,
    AhpClient,
    RpcFailed,
    Server,
    action_of,
)
from tests.shards.conftest import LocalShards


@asynccontextmanager
async def front(host: ShardedHost, start: int) -> AsyncIterator[Server]:
    """An AHP server over `host`, numbering serverSeq as front start `start` does."""
    stop = asyncio.Event()
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    config = ServeConfig(port=0, drain_s=5.0, seq_base=front_seq_base(start))
    task = asyncio.get_running_loop().create_task(
        serve(host, TOKENS, config, ready=ready.set_result, stop=stop)
    )
    url = await asyncio.wait_for(ready, WAIT_S)
    async with aiohttp.ClientSession() as http:
        try:
            yield Server(url, http, stop, task)
        finally:
            stop.set()
            await asyncio.wait_for(task, WAIT_S)


Body = Callable[[Server, Server, ShardedHost, ShardedHost], Awaitable[None]]


def on_two_fronts(local_shards: LocalShards, body: Body) -> None:
    """Two fronts (starts 1 and 2) over shards s0 and s1."""
    local_shards.start("s0")
    local_shards.start("s1")
    a = local_shards.front("s0", "s1")
    b = local_shards.front("s0", "s1")

    async def main() -> None:
        async with AsyncExitStack() as stack:
            server_a = await stack.enter_async_context(front(a, 1))
            server_b = await stack.enter_async_context(front(b, 2))
            await body(server_a, server_b, a, b)

    try:
        asyncio.run(main())
    finally:
        a.stop()
        b.stop()


async def new_session(client: AhpClient, session_id: str | None = None) -> tuple[str, str]:
    uri = f"ahp-session:/{session_id or uuid.uuid4()}"
    created = await client.call("createSession", {"channel": uri})
    return uri, created["state"]["defaultChat"]


def turn(text: str, turn_id: str) -> dict[str, Any]:
    return {"type": "chat/turnStarted", "turnId": turn_id, "message": {"text": text}}


async def run_turn(client: AhpClient, chat: str, turn_id: str) -> int:
    """A turn through this client's front; the serverSeq of its end."""
    await client.dispatch(chat, turn(f"q-{turn_id}", turn_id))
    done = await client.wait_for(action_of("chat/turnComplete", turnId=turn_id))
    return int(done["params"]["serverSeq"])


def test_front_starts_number_server_seq_in_ranges_of_their_own() -> None:
    bases = [front_seq_base(n) for n in (1, 2, 3, 65_535, 65_536)]
    assert bases[:3] == [1 << SEQ_BITS, 2 << SEQ_BITS, 3 << SEQ_BITS]
    assert bases[-1] == bases[0]  # the count wraps after 65,535 starts, never to 0
    assert max(bases) + (1 << SEQ_BITS) <= 1 << 53  # exact in JSON and JavaScript
    sequencer = Sequencer(100, base=bases[1])
    envelope = sequencer.stamp("ahp-session:/s", {"type": "x"})
    assert envelope["serverSeq"] == bases[1] + 1
    assert sequencer.since(bases[1], {"ahp-session:/s"}) == [envelope]
    assert sequencer.since(bases[0] + 5, {"ahp-session:/s"}) is None  # another front's seq


def test_front_starts_counted_at_once_in_the_store_get_numbers_of_their_own(
    local_shards: LocalShards,
) -> None:
    local_shards.start("s0")  # its store made the schema
    spec = local_shards.options.store
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        counted = list(pool.map(lambda _: count_front_start(spec), range(16)))
    assert sorted(counted) == list(range(1, 17))


def test_a_reconnect_that_lands_on_the_other_front_gets_snapshots_never_a_replay(
    local_shards: LocalShards,
) -> None:
    async def body(fa: Server, fb: Server, a: ShardedHost, b: ShardedHost) -> None:
        async with fa.client() as phone, fb.client() as laptop:
            started = await phone.initialize(client_id="phone")
            assert started["serverSeq"] == front_seq_base(1)
            assert (await laptop.initialize(client_id="laptop"))["serverSeq"] == front_seq_base(2)
            _, chat = await new_session(phone)
            await phone.call("subscribe", {"channel": chat})
            await laptop.call("subscribe", {"channel": chat})  # the same chat, on front b
            seen_on_a = await run_turn(phone, chat, "t1")
            await laptop.wait_for(action_of("chat/turnComplete", turnId="t1"))
            seen_on_b = await run_turn(laptop, chat, "t2")
            await phone.wait_for(action_of("chat/turnComplete", turnId="t2"))
        for server, seen, client_id in ((fb, seen_on_a, "phone"), (fa, seen_on_b, "laptop")):
            async with server.client() as again:
                result = await again.call(
                    "reconnect",
                    {"clientId": client_id, "lastSeenServerSeq": seen, "subscriptions": [chat]},
                )
                assert result["type"] == "snapshot", result
                (snapshot,) = result["snapshots"]
                assert [t["id"] for t in snapshot["state"]["turns"]] == ["t1", "t2"]
        async with fa.client() as again:  # on its own front, the phone's gap is replayed
            result = await again.call(
                "reconnect",
                {"clientId": "phone", "lastSeenServerSeq": seen_on_a, "subscriptions": [chat]},
            )
            assert result["type"] == "replay"
            assert result["actions"][-1]["action"] == {"type": "chat/turnComplete", "turnId": "t2"}

    on_two_fronts(local_shards, body)


def test_a_session_created_on_one_front_is_its_owners_alone_on_the_other(
    local_shards: LocalShards,
) -> None:
    async def body(fa: Server, fb: Server, a: ShardedHost, b: ShardedHost) -> None:
        async with fa.client() as alice_a, fb.client() as alice_b:
            await alice_a.initialize(client_id="alice-phone")
            await alice_b.initialize(client_id="alice-laptop")
            session_uri, chat = await new_session(alice_a)
            listed = (await alice_b.call("listSessions"))["items"]
            assert [item["resource"] for item in listed] == [session_uri]
            await alice_b.call("subscribe", {"channel": chat})
            await run_turn(alice_b, chat, "t-b")  # a turn through the other front
            async with fb.client(token=OTHER_TOKEN) as bob:
                with pytest.raises(RpcFailed):  # alice's client id, from the store
                    await bob.initialize(client_id="alice-phone")
            async with fb.client(token=OTHER_TOKEN) as bob:
                await bob.initialize(client_id="bob")
                assert (await bob.call("listSessions"))["items"] == []
                with pytest.raises(RpcFailed) as hidden:
                    await bob.call("subscribe", {"channel": chat})
                assert hidden.value.code == -32008  # not found, as on one front

    on_two_fronts(local_shards, body)


def test_a_session_disposed_on_one_front_leaves_the_other_fronts_tables(
    local_shards: LocalShards,
) -> None:
    """Front b noted alice as the owner; once alice disposes it on front a the
    shard tells b (SessionLeft), so bob may take the id on b and alice, there,
    sees none of bob's session."""

    async def body(fa: Server, fb: Server, a: ShardedHost, b: ShardedHost) -> None:
        session_id = str(uuid.uuid4())
        left: asyncio.Future[Departure] = asyncio.get_running_loop().create_future()

        def departed(gone: str, why: Departure) -> None:  # after the server's own watcher
            if gone == session_id and not left.done():
                left.set_result(why)

        unwatch = b.aio.on_session_left(departed)
        try:
            async with fa.client() as alice_a, fb.client() as alice_b:
                await alice_a.initialize(client_id="alice-phone")
                await alice_b.initialize(client_id="alice-laptop")
                session_uri, _ = await new_session(alice_a, session_id)
                await alice_b.call("subscribe", {"channel": session_uri})  # b notes the owner
                await alice_a.call("disposeSession", {"channel": session_uri})
                assert await asyncio.wait_for(left, WAIT_S) is Departure.DISPOSED
                async with fb.client(token=OTHER_TOKEN) as bob:
                    await bob.initialize(client_id="bob")
                    await new_session(bob, session_id)
                with pytest.raises(RpcFailed) as hidden:
                    await alice_b.call("subscribe", {"channel": session_uri})
                assert hidden.value.code == -32001  # SESSION_NOT_FOUND
        finally:
            unwatch()

    on_two_fronts(local_shards, body)


def test_a_session_added_or_removed_on_one_front_reaches_its_owners_root_on_the_other(
    local_shards: LocalShards,
) -> None:
    def root(method: str) -> Callable[[dict[str, Any]], bool]:
        return lambda n: n.get("method") == method

    async def body(fa: Server, fb: Server, a: ShardedHost, b: ShardedHost) -> None:
        async with (
            fa.client() as alice_a,
            fb.client() as alice_b,
            fb.client(token=OTHER_TOKEN) as bob,
        ):
            await alice_a.initialize(client_id="alice-phone")
            await alice_b.initialize(client_id="alice-laptop")
            await bob.initialize(client_id="bob")
            for client in (alice_b, bob):
                await client.call("subscribe", {"channel": "ahp-root://"})
            session_uri, _ = await new_session(alice_a)
            added = await alice_b.wait_for(root("root/sessionAdded"))
            assert added["params"]["summary"]["resource"] == session_uri
            await alice_a.call("disposeSession", {"channel": session_uri})
            removed = await alice_b.wait_for(root("root/sessionRemoved"))
            assert removed["params"]["session"] == session_uri
            # what front b offered bob with alice's notices is queued before this answer
            await bob.call("ping")
            assert not [n for n in bob.notifications if n.get("method", "").startswith("root/")]

    on_two_fronts(local_shards, body)


def test_a_provider_unavailable_on_a_shard_leaves_every_fronts_agents_until_it_is_back(
    local_shards: LocalShards,
) -> None:
    """A shard tells its fronts which of its providers are unavailable (its
    supervisor's health is set here as the supervisor would, past its restart
    limit): root/agentsChanged on both fronts, and again once it is back."""

    def agents(names: list[str]) -> Callable[[dict[str, Any]], bool]:
        changed = action_of("root/agentsChanged")
        return lambda n: (
            changed(n) and [a["provider"] for a in n["params"]["action"]["agents"]] == names
        )

    async def body(fa: Server, fb: Server, a: ShardedHost, b: ShardedHost) -> None:
        health = local_shards.shards["s1"].host.core.services.health
        async with fa.client() as on_a, fb.client() as on_b:
            for client in (on_a, on_b):
                await client.initialize(client_id=f"c-{id(client)}", initialSubscriptions=[ROOT])
            health.cooling("scripted", +1)
            for client in (on_a, on_b):
                await client.wait_for(agents([]))
            assert a.aio.unavailable_providers() == frozenset({"scripted"})
            health.cooling("scripted", -1)
            for client in (on_a, on_b):
                await client.wait_for(agents(["scripted"]))
            assert b.aio.unavailable_providers() == frozenset()

    on_two_fronts(local_shards, body)
