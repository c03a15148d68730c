"""The session channel against a live server: every change the host makes to
a session reaches its subscribers as session actions (a title it derives, the
read flag, chats created and disposed, a chat's status, the input the session
waits for), and a subscriber that reduces what it received with the session
reducer has what a fresh subscribe shows, its status too (the extension
x-session/statusChanged where no 1.1 session action carries it)."""

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agenthost.actors import Host
from agenthost.messages.reducers import reduce_session
from agenthost.messages.state import ChatStatus, SessionState
from agenthost.messages.wire import action_from_wire, from_wire
from agenthost.providers.scripted import AskUser, Gate, Say, ScriptedProvider
from tests.server.ahp_client import (
    OTHER_TOKEN,
    AhpClient,
    RpcFailed,
    Server,
    action_of,
    running,
)


def run(host: Host, body: Callable[[Server], Awaitable[None]]) -> None:
    async def main() -> None:
        async with running(host) as server:
            await body(server)

    asyncio.run(main())


def mirrored(snapshot: dict[str, Any], client: AhpClient, uri: str) -> SessionState:
    """The session state a client has: its snapshot, reduced by what followed."""
    state = from_wire(snapshot["state"], SessionState)
    for envelope in client.actions(uri):
        if envelope["serverSeq"] > snapshot["fromSeq"]:
            state = reduce_session(state, action_from_wire(envelope["action"]))  # type: ignore[arg-type]
    return state


async def fresh(server: Server, uri: str) -> SessionState:
    """A new subscriber's snapshot of the session."""
    async with server.client() as other:
        await other.initialize(client_id=f"fresh-{uuid.uuid4().hex[:6]}")
        snapshot = (await other.call("subscribe", {"channel": uri}))["snapshot"]
    return from_wire(snapshot["state"], SessionState)


async def agrees(server: Server, client: AhpClient, snapshot: dict[str, Any], uri: str) -> None:
    """The client's mirror equals a fresh snapshot, once it has every action
    sent before that snapshot was taken."""
    state = await fresh(server, uri)
    await client.call("ping")  # what was offered to it before the snapshot has arrived
    assert mirrored(snapshot, client, uri) == state


def test_a_session_subscriber_follows_every_change_the_host_makes(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("ask", AskUser("Which file?"), Say("thanks"))
    provider.on("hold", Gate("g"), Say("done"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize(client_id="watcher")
            uri = f"ahp-session:/{uuid.uuid4()}"
            created = await client.call("createSession", {"channel": uri})
            chat = created["state"]["defaultChat"]
            snapshot = (await client.call("subscribe", {"channel": uri}))["snapshot"]
            await client.call("subscribe", {"channel": chat})

            await client.dispatch(
                chat, {"type": "chat/turnStarted", "turnId": "t1", "message": {"text": "ask"}}
            )
            opened = await client.wait_for(action_of("chat/inputRequested"))
            await client.wait_for(action_of("session/inputNeededSet"))
            await agrees(server, client, snapshot, uri)  # waiting on the user

            request_id = opened["params"]["action"]["request"]["id"]
            answer = {"type": "chat/inputCompleted", "requestId": request_id, "answer": "a.py"}
            await client.dispatch(chat, answer)
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
            await client.wait_for(action_of("session/inputNeededRemoved"))
            await client.wait_for(action_of("session/titleChanged", title="ask"))
            await client.wait_for(action_of("session/isReadChanged", isRead=False))
            await agrees(server, client, snapshot, uri)  # titled by the host, unread

            other = await client.call("createChat", {"channel": uri})
            added = await client.wait_for(action_of("session/chatAdded"))
            assert added["params"]["action"]["summary"]["resource"] == other["chat"]
            await client.call("subscribe", {"channel": other["chat"]})
            await client.dispatch(
                other["chat"],
                {"type": "chat/turnStarted", "turnId": "t2", "message": {"text": "hold"}},
            )
            busy = await client.wait_for(action_of("session/chatUpdated", chat=other["chat"]))
            assert busy["params"]["action"]["changes"]["status"] & ChatStatus.IN_PROGRESS
            await agrees(server, client, snapshot, uri)  # a chat at work
            said = [
                e["action"]["status"]
                for e in client.actions(uri)
                if e["action"]["type"] == "x-session/statusChanged"
            ]
            assert said[-1] == ChatStatus.IN_PROGRESS  # no 1.1 session action says so
            await asyncio.to_thread(provider.open, "g")
            await client.wait_for(action_of("chat/turnComplete", turnId="t2"))
            await client.call("disposeChat", {"channel": other["chat"]})
            await client.wait_for(action_of("session/chatRemoved", chat=other["chat"]))
            await client.dispatch(uri, {"type": "session/titleChanged", "title": "Mine"})
            await client.wait_for(action_of("session/titleChanged", title="Mine"))
            await agrees(server, client, snapshot, uri)  # renamed, the chat gone

    run(host, body)


def test_a_subscriber_is_sent_a_change_once(host: Host, provider: ScriptedProvider) -> None:
    """A client's own rename is echoed with its origin, and the host's change it
    caused is not sent again."""

    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize(client_id="once")
            uri = f"ahp-session:/{uuid.uuid4()}"
            await client.call("createSession", {"channel": uri})
            await client.call("subscribe", {"channel": uri})
            seq = await client.dispatch(uri, {"type": "session/titleChanged", "title": "Mine"})
            await client.wait_for(action_of("session/titleChanged", title="Mine"))
            await client.call("ping")
            await client.dispatch(uri, {"type": "session/isArchivedChanged", "isArchived": True})
            await client.wait_for(action_of("session/isArchivedChanged"))
            titles = [
                a for a in client.actions(uri) if a["action"]["type"] == "session/titleChanged"
            ]
            assert [t.get("origin", {}).get("clientSeq") for t in titles] == [seq]

    run(host, body)


def test_another_identity_subscribing_hears_nothing_of_the_session(
    host: Host, provider: ScriptedProvider
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as alice, server.client(OTHER_TOKEN) as bob:
            await alice.initialize()
            await bob.initialize(client_id="c2")
            uri = f"ahp-session:/{uuid.uuid4()}"
            await alice.call("createSession", {"channel": uri})
            with pytest.raises(RpcFailed) as refused:
                await bob.call("subscribe", {"channel": uri})
            assert refused.value.code == -32001  # SessionNotFound: not even that it exists
            await alice.dispatch(uri, {"type": "session/titleChanged", "title": "secret"})
            await alice.wait_for(action_of("session/titleChanged", title="secret"))
            await bob.call("ping")
            assert bob.actions(uri) == []

    run(host, body)
