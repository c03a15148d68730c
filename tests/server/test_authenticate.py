"""authenticate and auth/required against a live server, on the fake clock:
a token the server accepts at the upgrade, of the connection's own identity,
re-authenticates it for `expiresIn` seconds; when they run out the client is
told (auth/required, reason expired), leaves its channels, and is refused
(-32007) until it authenticates again. Wrong tokens and resources are
refused as the spec says."""

import uuid
from typing import Any

import pytest

from agenthost.actors import Host
from agenthost.testing import FakeClock
from tests.server.ahp_client import OTHER_TOKEN, TOKEN, RpcFailed, Server, action_of
from tests.server.test_ahp import new_session, run, turn

RESOURCE = "urn:agenthost:ahp"


def auth(token: str, **extra: Any) -> dict[str, Any]:
    return {"channel": "ahp-root://", "resource": RESOURCE, "token": token, **extra}


def test_the_root_names_the_server_as_a_protected_resource(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            hello = await client.initialize(initialSubscriptions=["ahp-root://"])
            [agent] = hello["snapshots"][0]["state"]["agents"]
            [resource] = agent["protectedResources"]
            assert resource["resource"] == RESOURCE and resource["required"] is True

    run(host, body)


def test_a_token_with_a_lifetime_lapses_on_the_clock_and_a_new_one_restores(
    host: Host, clock: FakeClock
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            assert await client.call("authenticate", auth(TOKEN, expiresIn=60)) == {}
            _, chat = await new_session(client)
            await client.call("subscribe", {"channel": chat})
            clock.advance(59)
            await client.call("listSessions")  # still within its lifetime

            clock.advance(2)
            told = await client.wait_for(lambda n: n.get("method") == "auth/required")
            assert told["params"]["reason"] == "expired"
            assert told["params"]["resource"]["resource"] == RESOURCE
            with pytest.raises(RpcFailed) as refused:
                await client.call("listSessions")
            assert refused.value.code == -32007
            assert refused.value.error["data"][0]["resource"] == RESOURCE
            assert await client.call("ping") is None
            seq = await client.dispatch(chat, turn("late", "t-late"))
            echo = await client.wait_for(action_of("chat/turnStarted", turnId="t-late"))
            assert echo["params"]["rejectionReason"] == "authentication required"
            assert echo["params"]["origin"]["clientSeq"] == seq
            before = len(client.actions(chat))

            assert await client.call("authenticate", auth(TOKEN)) == {}  # no lifetime now
            clock.advance(3600)
            await client.call("listSessions")
            assert len(client.actions(chat)) == before  # it left the chat at the lapse
            await client.call("subscribe", {"channel": chat})

    run(host, body)


def test_a_renewed_token_keeps_the_connection_past_the_first_lifetime(
    host: Host, clock: FakeClock
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            await client.call("authenticate", auth(TOKEN, expiresIn=10))
            clock.advance(5)
            await client.call("authenticate", auth(TOKEN, expiresIn=10))
            clock.advance(6)  # past the first lifetime, within the second
            await client.call("listSessions")
            assert not any(n.get("method") == "auth/required" for n in client.notifications)

    run(host, body)


def test_wrong_tokens_and_resources_are_refused_and_an_empty_token_revokes(
    host: Host,
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize(client_id=f"c-{uuid.uuid4().hex[:6]}")
            for params, code in (
                (auth("not-a-token-of-this-server"), -32007),
                (auth(OTHER_TOKEN), -32007),  # valid, but another identity's
                ({**auth(TOKEN), "resource": "https://elsewhere.example"}, -32602),
                (auth(TOKEN, expiresIn=0), -32602),
            ):
                with pytest.raises(RpcFailed) as refused:
                    await client.call("authenticate", params)
                assert refused.value.code == code
                assert OTHER_TOKEN not in str(refused.value.error)
            await client.call("listSessions")  # a refused token changes nothing

            assert await client.call("authenticate", auth("")) == {}
            with pytest.raises(RpcFailed) as refused:
                await client.call("listSessions")
            assert refused.value.code == -32007
            assert not any(n.get("method") == "auth/required" for n in client.notifications)

    run(host, body)
