"""`session/activeClientSet` / `activeClientRemoved` from a client over a live
server: the tools the dispatching client declares become the session's client
tools (a turn's call to one waits for that client's chat/toolCallComplete), the
session state shows the client, only a client's own id may be set or removed,
and a client that leaves is removed after the grace."""

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agenthost.actors import Host
from agenthost.providers.scripted import ClientToolCall, Say, ScriptedProvider
from agenthost.server.ahp import Limits
from tests.server.ahp_client import AhpClient, RpcFailed, Server, action_of, running
from tests.server.test_chat_actions import by_origin, completion, turn


def run(
    host: Host, body: Callable[[Server], Awaitable[None]], limits: Limits | None = None
) -> None:
    async def main() -> None:
        async with running(host, limits) as server:
            await body(server)

    asyncio.run(main())


def active(client_id: str, *tools: str, **fields: Any) -> dict[str, Any]:
    return {
        "type": "session/activeClientSet",
        "activeClient": {
            "clientId": client_id,
            "tools": [{"name": t, "inputSchema": {"type": "object"}} for t in tools],
            **fields,
        },
    }


def removed(client_id: str) -> dict[str, Any]:
    return {"type": "session/activeClientRemoved", "clientId": client_id}


async def new_session(client: AhpClient) -> tuple[str, str]:
    uri = f"ahp-session:/{uuid.uuid4()}"
    created = await client.call("createSession", {"channel": uri})
    return uri, created["state"]["defaultChat"]


async def active_clients(client: AhpClient, uri: str) -> list[dict[str, Any]]:
    snapshot = (await client.call("subscribe", {"channel": uri}))["snapshot"]
    clients: list[dict[str, Any]] = snapshot["state"].get("activeClients", [])
    return clients


def test_a_clients_declared_tool_waits_for_its_result(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("fetch it", ClientToolCall("fetch", "{}"), Say("done"))

    async def body(server: Server) -> None:
        async with server.client() as browser, server.client() as watcher:
            await browser.initialize(client_id="browser")
            uri, chat = await new_session(browser)
            await watcher.initialize(client_id="watcher")
            await watcher.call("subscribe", {"channel": uri})
            await browser.call("subscribe", {"channel": chat})
            seq = await browser.dispatch(uri, active("browser", "fetch", displayName="Browser"))
            echoed = (await browser.wait_for(by_origin(seq, "browser")))["params"]
            assert "rejectionReason" not in echoed and "serverSeq" in echoed
            seen = await watcher.wait_for(action_of("session/activeClientSet"))
            assert seen["params"]["origin"] == {"clientId": "browser", "clientSeq": seq}
            [shown] = await active_clients(watcher, uri)
            assert shown["clientId"] == "browser" and shown["displayName"] == "Browser"
            assert [t["name"] for t in shown["tools"]] == ["fetch"]
            await browser.dispatch(chat, turn("fetch it", "t1"))
            ready = await browser.wait_for(action_of("chat/toolCallReady"))
            call_id = ready["params"]["action"]["toolCallId"]
            assert provider.answers == []  # the call waits for the browser
            await browser.dispatch(chat, completion(call_id, "the page"))
            await browser.wait_for(action_of("chat/turnComplete", turnId="t1"))
        assert [a.result for a in provider.answers] == ["the page"]

    run(host, body)


def test_only_a_clients_own_id_is_set_or_removed(host: Host, provider: ScriptedProvider) -> None:
    provider.on("fetch it", ClientToolCall("fetch", "{}"), Say("done"))

    async def body(server: Server) -> None:
        async with server.client() as browser, server.client() as other:
            await browser.initialize(client_id="browser")
            uri, chat = await new_session(browser)
            await browser.call("subscribe", {"channel": uri})
            await browser.wait_for(by_origin(await browser.dispatch(uri, active("browser", "f"))))
            await other.initialize(client_id="other")
            await other.call("subscribe", {"channel": uri})
            for action in (active("browser", "evil"), removed("browser")):
                seq = await other.dispatch(uri, action)
                refused = (await other.wait_for(by_origin(seq, "other")))["params"]
                assert "only its own activeClient" in refused["rejectionReason"]
            [shown] = await active_clients(other, uri)
            assert [t["name"] for t in shown["tools"]] == ["f"]
            seq = await browser.dispatch(uri, removed("browser"))
            echoed = (await browser.wait_for(by_origin(seq, "browser")))["params"]
            assert "rejectionReason" not in echoed
            assert await active_clients(other, uri) == []
            # no client executes "fetch" now: the call fails at once, the turn goes on
            await browser.call("subscribe", {"channel": chat})
            await browser.dispatch(chat, turn("fetch it", "t1"))
            await browser.wait_for(action_of("chat/turnComplete", turnId="t1"))
        [answer] = provider.answers
        assert answer.result is None and "No connected client provides" in str(answer.error)

    run(host, body)


def test_a_client_that_leaves_is_removed_from_the_session_after_the_grace(
    host: Host, provider: ScriptedProvider
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as watcher:
            await watcher.initialize(client_id="watcher")
            async with server.client() as browser:
                await browser.initialize(client_id="browser")
                uri, _ = await new_session(browser)
                await watcher.call("subscribe", {"channel": uri})
                await browser.dispatch(uri, active("browser", "fetch"))
                await watcher.wait_for(action_of("session/activeClientSet"))
            gone = await watcher.wait_for(action_of("session/activeClientRemoved"))
            assert gone["params"]["action"]["clientId"] == "browser"
            assert "origin" not in gone["params"]
            assert await active_clients(watcher, uri) == []

    run(host, body, Limits(client_tool_grace_s=0.2))


def test_create_session_with_the_clients_own_active_client_sets_it(
    host: Host, provider: ScriptedProvider
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as browser:
            await browser.initialize(client_id="browser")
            uri = f"ahp-session:/{uuid.uuid4()}"
            mine = active("browser", "fetch")["activeClient"]
            created = await browser.call("createSession", {"channel": uri, "activeClient": mine})
            [shown] = created["state"]["activeClients"]
            assert shown["clientId"] == "browser" and [t["name"] for t in shown["tools"]] == [
                "fetch"
            ]
            other = f"ahp-session:/{uuid.uuid4()}"
            theirs = active("someone", "fetch")["activeClient"]
            with pytest.raises(RpcFailed) as refused:
                await browser.call("createSession", {"channel": other, "activeClient": theirs})
            assert "only its own activeClient" in str(refused.value)
            listed = await browser.call("listSessions")
            assert [s["resource"] for s in listed["items"]] == [uri]  # nothing was created

    run(host, body)
