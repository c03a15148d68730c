"""A tool call that waits for authentication, over a real WebSocket: the chat
sends chat/toolCallAuthRequired and the session lists a toolAuthentication
entry; `authenticate {resource, token}` from the session's owner routes the
token to the call (chat/toolCallAuthResolved, and the call runs); another
identity's authenticate reaches nothing and learns nothing; a client's
dispatch of either action is refused."""

from typing import Any

import pytest

from agenthost.actors import Host
from agenthost.providers.scripted import REDACTED, AuthToolCall, Say, ScriptedProvider
from tests.server.ahp_client import OTHER_TOKEN, AhpClient, RpcFailed, Server, action_of
from tests.server.test_ahp import followed_chat, new_session, run, turn

REPO = "https://mcp.example.com"
SECRET = "repo-token-9c1e"


def token_for(resource: str, channel: str = "ahp-root://", token: str = SECRET) -> dict[str, Any]:
    return {"channel": channel, "resource": resource, "token": token}


async def a_call_waiting(client: AhpClient) -> tuple[str, dict[str, Any]]:
    """A followed chat whose turn "t1" ("find") waits for a token: the chat and
    the toolCallAuthRequired envelope."""
    chat = await followed_chat(client)
    await client.dispatch(chat, turn("find", "t1"))
    return chat, await client.wait_for(action_of("chat/toolCallAuthRequired"))


def test_authenticate_routes_the_token_to_the_waiting_call_and_it_runs(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("find", AuthToolCall("search", REPO, server="github", accepts=SECRET), Say("ok"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            _, required = await a_call_waiting(client)
            action = required["params"]["action"]
            assert action["turnId"] == "t1"
            assert action["auth"]["resource"]["resource"] == REPO
            assert action["auth"]["reason"] == "required"

            assert await client.call("authenticate", token_for(REPO)) == {}
            resolved = await client.wait_for(action_of("chat/toolCallAuthResolved"))
            assert resolved["params"]["action"]["toolCallId"] == action["toolCallId"]
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
            completed = await client.wait_for(action_of("chat/toolCallComplete"))
            assert completed["params"]["action"]["result"]["success"] is True
            assert SECRET not in repr(client.notifications)
        [answer] = provider.answers
        assert answer.token == REDACTED

    run(host, body)


def test_the_session_channel_lists_the_wait_and_a_chat_channel_routes_too(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("find", AuthToolCall("search", REPO), Say("ok"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            session, chat = await new_session(client)
            await client.call("subscribe", {"channel": session})
            await client.call("subscribe", {"channel": chat})
            await client.dispatch(chat, turn("find", "t1"))
            listed = await client.wait_for(action_of("session/inputNeededSet"))
            request = listed["params"]["action"]["request"]
            assert request["kind"] == "toolAuthentication"
            assert request["toolCall"]["auth"]["resource"]["resource"] == REPO
            assert await client.call("authenticate", token_for(REPO, channel=chat)) == {}
            await client.wait_for(action_of("session/inputNeededRemoved"))
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))

    run(host, body)


def test_another_identity_cannot_reach_the_waiting_call_nor_tell_it_exists(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("find", AuthToolCall("search", REPO), Say("ok"))

    async def body(server: Server) -> None:
        async with server.client() as alice:
            await alice.initialize(client_id="alice-1")
            session, chat = await new_session(alice)
            await alice.call("subscribe", {"channel": chat})
            await alice.dispatch(chat, turn("find", "t1"))
            await alice.wait_for(action_of("chat/toolCallAuthRequired"))
            async with server.client(OTHER_TOKEN) as bob:
                await bob.initialize(client_id="bob-1")
                refusals = []
                for channel in ("ahp-root://", session, chat, "ahp-chat:/no-such-chat"):
                    with pytest.raises(RpcFailed) as refused:
                        await bob.call("authenticate", token_for(REPO, channel=channel))
                    refusals.append((refused.value.code, refused.value.error["message"]))
                assert len(set(refusals)) == 1  # alike: nothing says the chat exists
                assert refusals[0][0] == -32602
            assert provider.answers == []
            state = await alice.call("subscribe", {"channel": chat})
            [part] = state["snapshot"]["state"]["activeTurn"]["responseParts"]
            assert part["toolCall"]["status"] == "auth-required"
            assert await alice.call("authenticate", token_for(REPO)) == {}
            await alice.wait_for(action_of("chat/turnComplete", turnId="t1"))

    run(host, body)


def test_a_resource_nothing_waits_on_and_an_empty_token_are_refused(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("find", AuthToolCall("search", REPO), Say("ok"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            await a_call_waiting(client)
            for params in (token_for("https://elsewhere.example"), token_for(REPO, token="")):
                with pytest.raises(RpcFailed) as refused:
                    await client.call("authenticate", params)
                assert refused.value.code == -32602
            assert provider.answers == []
            await client.call("listSessions")  # the connection goes on
            assert await client.call("authenticate", token_for(REPO)) == {}
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))

    run(host, body)


def test_a_clients_dispatch_of_either_action_is_refused_as_the_hosts_own(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("find", AuthToolCall("search", REPO), Say("ok"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat, required = await a_call_waiting(client)
            call_id = required["params"]["action"]["toolCallId"]
            resolve = {"type": "chat/toolCallAuthResolved", "turnId": "t1", "toolCallId": call_id}
            await client.dispatch(chat, resolve)
            echo = await client.wait_for(
                lambda n: (
                    action_of("chat/toolCallAuthResolved")(n) and "rejectionReason" in n["params"]
                )
            )
            assert "only the host sends" in echo["params"]["rejectionReason"]
            state = await client.call("subscribe", {"channel": chat})
            [part] = state["snapshot"]["state"]["activeTurn"]["responseParts"]
            assert part["toolCall"]["status"] == "auth-required"  # nothing changed

    run(host, body)
