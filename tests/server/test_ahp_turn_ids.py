"""Turn ids a client chooses over AHP: its chat's own, kept when the chat is busy."""

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from agenthost.actors import Host
from agenthost.providers.scripted import Gate, Say, ScriptedProvider
from tests.server.ahp_client import OTHER_TOKEN, AhpClient, Server, action_of, fetched_turns
from tests.server.test_ahp import by_origin, followed_chat, new_session, run, turn


async def one_turn(client: AhpClient, client_id: str, text: str) -> tuple[str, dict[str, Any]]:
    """Initialize, dispatch a turn "turn-one" in a new session; its chat and turns."""
    await client.initialize(client_id=client_id)
    _, chat = await new_session(client)
    await client.call("subscribe", {"channel": chat})
    await client.dispatch(chat, turn(text, "turn-one"))
    await client.wait_for(action_of("chat/turnComplete", turnId="turn-one"))
    return chat, {"turns": await fetched_turns(client, chat)}


def test_two_identities_dispatching_the_same_turn_id_each_keep_their_own_turn(
    host: Host, db_path: Path
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as alice, server.client(token=OTHER_TOKEN) as bob:
            chat, alices = await one_turn(alice, "alice-1", "alice's question")
            _, bobs = await one_turn(bob, "bob-1", "bob's question")
            alices_again = {"turns": await fetched_turns(alice, chat)}
        assert [t["message"]["text"] for t in alices["turns"]] == ["alice's question"]
        assert [t["message"]["text"] for t in bobs["turns"]] == ["bob's question"]
        assert alices_again == alices

    run(host, body)
    host.stop()  # everything committed; the store read as another process would
    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT id, user_text, assistant_text FROM turns ORDER BY user_text")
        assert rows.fetchall() == [
            ("turn-one", "alice's question", "echo: alice's question"),
            ("turn-one", "bob's question", "echo: bob's question"),
        ]


def test_a_turn_dispatched_while_another_runs_is_queued_under_its_id_and_answered_when_it_runs(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("long", Gate("g"), Say("done"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            await client.dispatch(chat, turn("long", "t-long"))
            await asyncio.to_thread(provider.wait_reached, "g", 10)
            sent = await client.dispatch(chat, turn("later", "t-later"))
            queued = await client.wait_for(action_of("chat/pendingMessageSet", turnId="t-later"))
            assert "origin" not in queued["params"]  # the host's: the dispatch is answered later
            await asyncio.to_thread(provider.open, "g")
            started = await client.wait_for(action_of("chat/turnStarted", turnId="t-later"))
            assert started["params"]["origin"] == {"clientId": "c1", "clientSeq": sent}
            assert (
                started["params"]["action"]["queuedMessageId"] == queued["params"]["action"]["id"]
            )
            await client.wait_for(action_of("chat/turnComplete", turnId="t-later"))

    run(host, body)


def test_cancelling_a_queued_turn_by_its_id_removes_it_and_answers_the_cancel(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("long", Gate("g"), Say("done"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            await client.dispatch(chat, turn("long", "t-long"))
            await asyncio.to_thread(provider.wait_reached, "g", 10)
            await client.dispatch(chat, turn("later", "t-later"))
            queued = await client.wait_for(action_of("chat/pendingMessageSet", turnId="t-later"))
            cancel = await client.dispatch(
                chat, {"type": "chat/turnCancelled", "turnId": "t-later"}
            )
            answer = (await client.wait_for(by_origin(cancel)))["params"]
            assert "rejectionReason" not in answer
            assert answer["action"]["type"] == "chat/pendingMessageRemoved"
            assert answer["action"]["id"] == queued["params"]["action"]["id"]
            await asyncio.to_thread(provider.open, "g")
            await client.wait_for(action_of("chat/turnComplete", turnId="t-long"))
            state = (await client.call("subscribe", {"channel": chat}))["snapshot"]["state"]
            assert [t["id"] for t in state["turns"]] == ["t-long"]

    run(host, body)


def test_a_cancel_that_cannot_apply_is_refused_saying_why(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            await client.dispatch(chat, turn("hi", "t-done"))
            await client.wait_for(action_of("chat/turnComplete", turnId="t-done"))
            for named, reason in (
                ("t-done", "turn t-done already ended (complete)"),
                ("t-never", "turn t-never is neither running nor queued"),
            ):
                cancel = {"type": "chat/turnCancelled", "turnId": named}
                refused = await client.wait_for(by_origin(await client.dispatch(chat, cancel)))
                assert refused["params"]["rejectionReason"] == reason

    run(host, body)
