"""A server that does not age: what a request costs does not grow with what
the store holds, what the server keeps per session goes when the session
leaves memory, and stopping with connections open is clean."""

import asyncio
import contextlib
import gc
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import structlog
from aiohttp import web
from structlog.testing import capture_logs

from agenthost.actors import Departure, Host
from agenthost.messages.state import SessionSummary
from agenthost.providers.scripted import Say, ScriptedProvider
from agenthost.server.ahp import AhpServer, Limits
from agenthost.store import SqliteStore
from agenthost.store.base import OWNER_KEY, SessionPage
from agenthost.testing import FakeClock
from tests.server.ahp_client import (
    OTHER_TOKEN,
    TOKEN,
    TOKENS,
    WAIT_S,
    AhpClient,
    action_of,
    running,
)


class CountingStore(SqliteStore):
    """A SQLite store that counts the listings it is asked for and the rows it hands back."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.full_listings = 0
        self.pages = 0
        self.rows = 0

    def list_sessions(self) -> list[SessionSummary]:
        self.full_listings += 1
        rows = super().list_sessions()
        self.rows += len(rows)
        return rows

    def list_sessions_page(
        self, *, owner: str, limit: int, after: str | None = None
    ) -> SessionPage:
        self.pages += 1
        page = super().list_sessions_page(owner=owner, limit=limit, after=after)
        self.rows += len(page.items)
        return page


def _sessions_of(host: Host, owner: str, count: int) -> None:
    for _ in range(count):
        host.create_session().set_config({OWNER_KEY: owner})


def test_list_sessions_reads_one_page_of_the_callers_own_whatever_others_hold(
    db_path: Path, clock: FakeClock
) -> None:
    store = CountingStore(db_path)
    host = Host.start(store=store, providers={"scripted": ScriptedProvider()}, clock=clock)
    try:
        _sessions_of(host, "alice", 3)

        async def body() -> list[Any]:
            async with running(host) as server, server.client() as client:
                await client.initialize()
                before = (store.full_listings, store.pages, store.rows)
                first = await client.call("listSessions", {"limit": 2})
                rest = await client.call(
                    "listSessions", {"limit": 2, "cursor": first["nextCursor"]}
                )
                after = (store.full_listings, store.pages, store.rows)
                return [before, after, first, rest]

        alone = asyncio.run(body())
        _sessions_of(host, "bob", 200)
        crowded = asyncio.run(body())
    finally:
        host.stop()
    for before, after, first, rest in (alone, crowded):
        assert after[0] == before[0]  # never the whole store
        assert (after[1] - before[1], after[2] - before[2]) == (2, 3)  # two pages, three rows
        assert len(first["items"]) == 2 and len(rest["items"]) == 1 and "nextCursor" not in rest
    assert alone[2]["items"] == crowded[2]["items"]


def test_a_cursor_this_server_did_not_make_is_invalid_params(host: Host) -> None:
    async def body() -> None:
        async with running(host) as server, server.client() as client:
            await client.initialize()
            assert await _refused(client, "listSessions", {"cursor": "x"}) == -32602

    asyncio.run(body())


@asynccontextmanager
async def serving(host: Host, limits: Limits) -> AsyncIterator[tuple[AhpServer, str]]:
    """An AhpServer whose tables the test can read, on a loopback port."""
    server = AhpServer(host, TOKENS, limits=limits)
    runner = web.AppRunner(server.app(), handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host_port = runner.addresses[0]
    try:
        yield server, f"ws://{host_port[0]}:{host_port[1]}/ahp"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def connected(
    http: aiohttp.ClientSession, url: str, token: str = TOKEN
) -> AsyncIterator[AhpClient]:
    ws = await http.ws_connect(url, headers={"Authorization": f"Bearer {token}"})
    client = AhpClient(ws)
    try:
        yield client
    finally:
        await ws.close()
        client._reader.cancel()


def test_the_servers_tables_are_empty_once_the_sessions_it_served_left_memory(
    start_host: Callable[..., Host], clock: FakeClock
) -> None:
    """Sessions created, used, disposed, looked up by another identity: once the
    last connection is gone and the sessions left memory (max_resident=0
    releases an idle session at once), every per-session table is empty."""
    host = start_host(ScriptedProvider(), max_resident=0)
    limits = Limits()
    count = 8

    async def body() -> None:
        departed: set[str] = set()
        everyone_left = asyncio.Event()
        async with serving(host, limits) as (server, url), aiohttp.ClientSession() as http:
            async with connected(http, url) as alice, connected(http, url, OTHER_TOKEN) as bob:
                await alice.initialize(client_id="alice-1", initialSubscriptions=["ahp-root://"])
                await bob.initialize(client_id="bob-1")
                sessions = []
                for n in range(count):
                    uri = f"ahp-session:/{uuid.uuid4()}"
                    created = await alice.call("createSession", {"channel": uri})
                    chat = created["state"]["defaultChat"]
                    await alice.call("subscribe", {"channel": chat})
                    await alice.dispatch(chat, {"type": "chat/turnStarted", "turnId": f"t{n}",
                                                "message": {"text": "hi"}})  # fmt: skip
                    await alice.wait_for(action_of("chat/turnComplete", turnId=f"t{n}"))
                    await bob.call("ping")
                    assert (await _refused(bob, "subscribe", {"channel": chat})) == -32008
                    sessions.append(uri.removeprefix("ahp-session:/"))
                await alice.call("disposeSession", {"channel": f"ahp-session:/{sessions.pop()}"})
                await alice.call("listSessions")
                assert server.tables()["registry_owners"] > 0

                def left(session_id: str, why: Departure) -> None:
                    departed.add(session_id)
                    if departed >= set(sessions):
                        everyone_left.set()

                unwatch = host.aio.on_session_left(left)
            clock.advance(limits.channel_idle_s)  # no one follows the chats: they close
            await asyncio.wait_for(everyone_left.wait(), WAIT_S)
            unwatch()
            tables = server.tables()
        assert {k: v for k, v in tables.items() if v} == {}, tables

    asyncio.run(body())


async def _refused(client: AhpClient, method: str, params: dict[str, Any]) -> Any:
    from tests.server.ahp_client import RpcFailed

    try:
        await client.call(method, params)
    except RpcFailed as error:
        return error.code
    return None


@asynccontextmanager
async def _stopped_first(server: Any, clients: list[AhpClient]) -> AsyncIterator[None]:
    """On the way out, the server stops while the clients are still connected."""
    yield
    await server.stop()
    await asyncio.gather(*(asyncio.wait_for(c.closed.wait(), WAIT_S) for c in clients))
    assert {c.ws.close_code for c in clients} == {1001}


def test_stopping_with_connections_open_is_clean(host: Host, provider: ScriptedProvider) -> None:
    """Stopping while every connection has a turn's stream queued: each is closed
    with 1001 after what it had queued, and no write to a closing socket
    escapes (it logged ClientConnectionResetError)."""
    provider.on("stream", *(Say(f"{i} ") for i in range(1500)))
    loop_errors: list[dict[str, Any]] = []

    async def body() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: loop_errors.append(ctx))
        async with contextlib.AsyncExitStack() as stack:
            server = await stack.enter_async_context(running(host))
            clients = [await stack.enter_async_context(server.client()) for _ in range(20)]
            for n, client in enumerate(clients):
                await client.initialize(client_id=f"c{n}", initialSubscriptions=["ahp-root://"])
            uri = f"ahp-session:/{uuid.uuid4()}"
            created = await clients[0].call("createSession", {"channel": uri})
            chat = created["state"]["defaultChat"]
            for client in clients:
                await client.call("subscribe", {"channel": chat})
            turn = {"type": "chat/turnStarted", "turnId": "t", "message": {"text": "stream"}}
            await clients[0].dispatch(chat, turn)
            await clients[0].wait_for(action_of("chat/turnComplete", turnId="t"))
            await stack.enter_async_context(_stopped_first(server, clients))

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    with capture_logs() as logs:
        asyncio.run(body())
        gc.collect()  # a task that died of a write is reported when it is collected
    assert loop_errors == []
    assert not [e for e in logs if e["log_level"] in ("error", "critical") or e.get("exc_info")]
