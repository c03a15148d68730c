"""Session config as AHP asks for it, against a live server: resolved and
checked against its schema (string values, `ahp.` keys reserved), applied at
createSession, shown as `{schema, values}`, and completed from the values the
caller's own sessions hold."""

import uuid
from typing import Any

import pytest

from agenthost.actors import Host
from tests.server.ahp_client import OTHER_TOKEN, AhpClient, RpcFailed, Server
from tests.server.test_ahp import run


async def created(client: AhpClient, config: dict[str, Any]) -> dict[str, Any]:
    uri = f"ahp-session:/{uuid.uuid4()}"
    answer: dict[str, Any] = await client.call("createSession", {"channel": uri, "config": config})
    return answer


def test_a_config_is_resolved_against_the_schema_and_applied_at_creation(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            resolved = await client.call("resolveSessionConfig", {"config": {"mode": "fast"}})
            assert resolved["values"] == {"mode": "fast"}
            assert resolved["schema"]["propertyNames"] == {"not": {"pattern": "^ahp\\."}}
            for config, field in (
                ({"ahp.owner": "me"}, "config.ahp.owner"),
                ({"n": 3}, "config.n"),
            ):
                with pytest.raises(RpcFailed) as refused:
                    await client.call("resolveSessionConfig", {"config": config})
                assert refused.value.code == -32602 and field in refused.value.error["message"]
            with pytest.raises(RpcFailed) as refused:
                await client.call("resolveSessionConfig", {"provider": "nobody"})
            assert refused.value.code == -32002

            session = await created(client, {"mode": "fast"})
            assert session["state"]["config"]["values"] == {"mode": "fast"}
            assert session["state"]["config"]["schema"] == resolved["schema"]
            listed = await client.call("listSessions")
            before = len(listed["items"])
            with pytest.raises(RpcFailed):
                await created(client, {"ahp.owner": "someone-else"})
            assert len((await client.call("listSessions"))["items"]) == before  # none made

    run(host, body)


def test_config_completions_offer_the_values_the_callers_sessions_hold(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as alice, server.client(OTHER_TOKEN) as bob:
            await alice.initialize()
            await bob.initialize(client_id="c2")
            for mode in ("fast", "fast", "full"):
                await created(alice, {"mode": mode})
            await created(bob, {"mode": "fancy"})
            ask = {"property": "mode"}
            items = (await alice.call("sessionConfigCompletions", ask))["items"]
            assert [i["value"] for i in items] == ["fast", "full"]  # most used first
            narrowed = await alice.call("sessionConfigCompletions", {**ask, "query": "fu"})
            assert [i["value"] for i in narrowed["items"]] == ["full"]
            bobs = await bob.call("sessionConfigCompletions", ask)
            assert [i["value"] for i in bobs["items"]] == ["fancy"]
            with pytest.raises(RpcFailed) as refused:
                await alice.call("sessionConfigCompletions", {"property": "ahp.owner"})
            assert refused.value.code == -32602

    run(host, body)
