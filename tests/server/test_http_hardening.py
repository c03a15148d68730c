"""HTTP hardening against a real `serve` on loopback, driven as a hostile client
would: every response carries the security headers, a foreign Host header is
refused (DNS rebinding), a half-sent request is closed, and one identity's
sessions are bounded by its quotas."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from agenthost.actors import Host
from agenthost.messages.errors import JsonRpcErrorCode
from agenthost.server.ahp import Limits
from agenthost.server.errors import RpcError
from agenthost.server.hosts import HostAllowlist, host_name
from agenthost.server.http import CONTENT_SECURITY_POLICY
from agenthost.server.quotas import IdentityQuotas
from agenthost.server.serve import ServeConfig, serve
from agenthost.testing import FakeClock
from tests.server.ahp_client import OTHER_TOKEN, TOKEN, TOKENS, WAIT_S, RpcFailed, Server, running

SECURITY = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def run(
    host: Host, body: Callable[[Server], Awaitable[None]], limits: Limits | None = None
) -> None:
    async def main() -> None:
        async with running(host, limits) as server:
            await body(server)

    asyncio.run(main())


def secured(headers: Any) -> bool:
    return all(headers.get(name) == value for name, value in SECURITY.items())


def test_every_response_carries_the_security_headers(host: Host) -> None:
    async def body(server: Server) -> None:
        for path in ("", "healthz", "metrics", "static/app.js", "favicon.ico", "nowhere"):
            async with server.http.get(server.url + path) as response:
                assert secured(response.headers), (path, response.status, response.headers)
        for headers in ({}, {"Origin": "https://evil.example", "Authorization": f"Bearer {TOKEN}"}):
            async with server.http.get(
                server.url + "ahp",
                headers={
                    **headers,
                    "Connection": "Upgrade",
                    "Upgrade": "websocket",
                    "Sec-WebSocket-Version": "13",
                    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                },
            ) as refused:
                assert refused.status in (401, 403) and secured(refused.headers)
        async with server.http.get(server.url) as page:
            html = await page.text()
        assert "Content-Security-Policy" not in html  # the header says it, frame-ancestors too

    run(host, body)


def test_a_host_header_naming_another_server_is_refused_even_with_a_token(host: Host) -> None:
    """DNS rebinding: evil.example now points at 127.0.0.1, and its page sends
    Host and Origin evil.example with a stolen or guessed token."""

    async def body(server: Server) -> None:
        evil = {"Host": "evil.example:8765", "Origin": "http://evil.example:8765"}
        for path in ("", "healthz"):
            async with server.http.get(server.url + path, headers=evil) as response:
                assert response.status == 421 and secured(response.headers)
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            async with server.client(headers=evil):
                pass
        assert refused.value.status == 421
        port = server.url.rsplit(":", 1)[1].strip("/")
        for origin in (f"http://localhost:{port}", f"http://127.0.0.1:{port}"):
            async with server.client(headers={"Origin": origin}) as client:
                assert (await client.initialize())["protocolVersion"] == "1.1.0"
        for origin in ("http://127.0.0.1:1", "http://evil.example", "null", "file://"):
            with pytest.raises(aiohttp.WSServerHandshakeError) as foreign:
                async with server.client(headers={"Origin": origin}):
                    pass
            assert foreign.value.status == 403

    run(host, body)


def test_a_host_given_with_allowed_host_is_served(host: Host) -> None:
    async def main() -> None:
        stop = asyncio.Event()
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        config = ServeConfig(port=0, allowed_hosts=("agents.example.com",))
        task = asyncio.ensure_future(serve(host, TOKENS, config, ready=ready.set_result, stop=stop))
        url = await asyncio.wait_for(ready, WAIT_S)
        proxied = {"Host": "agents.example.com", "Origin": "https://agents.example.com"}
        async with aiohttp.ClientSession() as http:
            async with http.get(url + "healthz", headers=proxied) as health:
                assert health.status == 200
            ws = await http.ws_connect(
                url.replace("http", "ws", 1) + "ahp",
                headers={**proxied, "Authorization": f"Bearer {TOKEN}"},
            )
            await ws.close()
        stop.set()
        await asyncio.wait_for(task, WAIT_S)

    asyncio.run(main())


def test_a_half_sent_request_is_closed_after_the_header_timeout(host: Host) -> None:
    async def body(server: Server) -> None:
        address = server.url.removeprefix("http://").strip("/")
        name, port = address.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(name, int(port))
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # never ends
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), WAIT_S) == b""  # closed on us
        writer.close()
        async with server.http.get(server.url + "healthz") as health:  # the server is fine
            assert health.status == 200

    run(host, body, Limits(header_timeout_s=0.3))


def test_an_identity_past_its_resident_sessions_is_refused_and_others_are_not(
    host: Host,
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as alice, server.client(OTHER_TOKEN) as bob:
            await alice.initialize()
            await bob.initialize(client_id="bob")
            for n in range(2):
                await alice.call("createSession", {"channel": f"ahp-session:/a{n}"})
            with pytest.raises(RpcFailed) as refused:
                await alice.call("createSession", {"channel": "ahp-session:/a2"})
            assert refused.value.code == JsonRpcErrorCode.QUOTA_EXCEEDED
            assert refused.value.error["data"] == {"quota": "residentSessions", "limit": 2}
            assert "alice has 2 sessions in memory" in refused.value.error["message"]
            await bob.call("createSession", {"channel": "ahp-session:/b0"})

    run(host, body, Limits(identity_resident_sessions=2))


def test_opening_another_stored_session_past_the_resident_quota_says_so(host: Host) -> None:
    from agenthost.store.base import OWNER_KEY

    stored = host.create_session()  # alice's, made in memory by the embedding host
    stored.set_config({OWNER_KEY: "alice"})
    chat = f"ahp-chat:/{stored.chat().id}"

    async def body(server: Server) -> None:
        async with server.client() as alice:
            await alice.initialize()
            await alice.call("createSession", {"channel": "ahp-session:/mine"})
            for channel in (chat, f"ahp-session:/{stored.id}"):
                with pytest.raises(RpcFailed) as refused:
                    await alice.call("subscribe", {"channel": channel})
                assert refused.value.error["data"]["quota"] == "residentSessions"

    run(host, body, Limits(identity_resident_sessions=1))


def test_an_identity_past_its_creations_a_minute_waits_for_the_rate(
    host: Host, clock: FakeClock
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as alice:
            await alice.initialize()
            sessions = iter(range(100))

            async def create() -> Any:
                return await alice.call(
                    "createSession", {"channel": f"ahp-session:/s{next(sessions)}"}
                )

            await asyncio.gather(create(), create())  # sent at once: both fit
            with pytest.raises(RpcFailed) as refused:
                await create()
            assert refused.value.error["data"]["quota"] == "sessionCreationsPerMinute"
            clock.advance(30)  # one creation's worth, at 2 a minute
            await create()

    run(host, body, Limits(identity_session_creations_per_minute=2))


# -- the plain parts ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost:8765", "localhost"),
        ("LOCALHOST.", "localhost"),
        ("[::1]:8765", "::1"),
        ("127.0.0.1", "127.0.0.1"),
        ("evil.example:80", "evil.example"),
        ("[::1", None),
        ("[nothost]:1", None),
        ("a@b:1", None),
        ("host:port", None),
        ("", None),
    ],
)
def test_a_host_header_is_read_as_its_name(header: str, name: str | None) -> None:
    assert host_name(header) == name


def test_an_allowlist_of_loopback_the_bound_address_and_given_names() -> None:
    hosts = HostAllowlist.of("10.0.0.5", allowed=["agents.example.com"]).listening_on(8765)
    assert all(hosts.allows_host(h) for h in ("localhost", "[::1]:1", "10.0.0.5:8765"))
    assert not hosts.allows_host("evil.example") and not hosts.allows_host(None)
    assert hosts.allows_origin("http://10.0.0.5:8765") and hosts.allows_origin("http://[::1]:8765")
    assert not hosts.allows_origin("http://10.0.0.5:9999")  # another server on that host
    assert hosts.allows_origin("https://agents.example.com")  # behind a proxy: any port
    assert not hosts.allows_origin("ftp://localhost:8765") and not hosts.allows_origin("null")
    assert HostAllowlist.of("0.0.0.0").names == {"localhost", "127.0.0.1", "::1"}


def test_creations_are_a_minutes_worth_at_once_then_the_rate() -> None:
    clock = FakeClock()
    quotas = IdentityQuotas(resident=None, creations_per_minute=3, now=clock.now)
    for _ in range(3):
        quotas.admit_creation("alice")
    with pytest.raises(RpcError):
        quotas.admit_creation("alice")
    quotas.admit_creation("bob")
    clock.advance(20)
    quotas.admit_creation("alice")


def test_creations_in_flight_count_as_resident() -> None:
    quotas = IdentityQuotas(resident=2, creations_per_minute=None, now=FakeClock().now)
    with quotas.creating("alice", resident=1):
        with pytest.raises(RpcError) as refused, quotas.creating("alice", resident=1):
            pass
        assert refused.value.data["quota"] == "residentSessions"
    with quotas.creating("alice", resident=1):
        pass
