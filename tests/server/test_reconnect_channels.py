"""The per-channel reconnect against a live server: a cursor for each
subscription, a recovery for each (replay, snapshot when the gap is past the
replay buffer, missing when gone or another identity's)."""

import uuid

import pytest

from agenthost.actors import Host
from agenthost.server.ahp import Limits
from tests.server.ahp_client import OTHER_TOKEN, RpcFailed, Server, action_of
from tests.server.test_ahp import new_session, run, turn

LATE_SESSION_ACTIONS = {"session/chatUpdated", "x-session/statusChanged"}


def test_each_channel_is_replayed_from_its_own_cursor(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as first:
            await first.initialize(client_id="phone")
            session, chat = await new_session(first)
            await first.call("subscribe", {"channel": session})
            await first.call("subscribe", {"channel": chat})
            await first.dispatch(chat, turn("one", "t1"))
            await first.wait_for(action_of("chat/turnComplete", turnId="t1"))
            await first.wait_for(action_of("session/titleChanged"))
            before_turn = first.actions(chat)[0]["serverSeq"] - 1
            session_seen = first.actions(session)[-1]["serverSeq"]
        async with server.client() as again, server.client(OTHER_TOKEN) as bob:
            result = await again.call(
                "reconnect",
                {
                    "clientId": "phone",
                    "subscriptions": [
                        {"channel": chat, "lastSeenServerSeq": before_turn},
                        {"channel": session, "lastSeenServerSeq": session_seen},
                        {"channel": "ahp-chat:/gone", "lastSeenServerSeq": 0},
                    ],
                },
            )
            replayed, quiet, gone = result["channels"]
            assert replayed["kind"] == "replay" and replayed["channel"] == chat
            kinds = [a["action"]["type"] for a in replayed["actions"]]
            assert kinds[0] == "chat/turnStarted" and kinds[-1] == "chat/turnComplete"
            assert all(a["channel"] == chat for a in replayed["actions"])
            # From its own cursor: nothing it had seen (the title, and all before it).
            # The session may still report its chat going idle after the cursor was
            # taken (the server reads the session's view when it hears of a change).
            assert quiet["kind"] == "replay" and quiet["channel"] == session
            assert all(a["serverSeq"] > session_seen for a in quiet["actions"])
            assert {a["action"]["type"] for a in quiet["actions"]} <= LATE_SESSION_ACTIONS
            assert gone == {"kind": "missing", "channel": "ahp-chat:/gone"}
            # followed again: the next turn streams to the reconnected client
            await again.dispatch(chat, turn("two", "t2"))
            await again.wait_for(action_of("chat/turnComplete", turnId="t2"))

            await bob.initialize(client_id="bob-1")
            theirs = await bob.call(
                "reconnect",
                {"clientId": "bob-1", "subscriptions": [{"channel": chat, "lastSeenServerSeq": 0}]},
            )
            assert theirs["channels"] == [{"kind": "missing", "channel": chat}]

    run(host, body)


def test_a_channel_whose_gap_passed_the_buffer_gets_its_snapshot(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize(client_id="tablet")
            _, chat = await new_session(client)
            await client.call("subscribe", {"channel": chat})
            await client.dispatch(chat, turn("one", "t1"))
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
            result = await client.call(
                "reconnect",
                {
                    "clientId": "tablet",
                    "subscriptions": [{"channel": chat, "lastSeenServerSeq": 0}],
                },
            )
            [recovered] = result["channels"]
            assert recovered["kind"] == "snapshot" and recovered["channel"] == chat
            texts = [t["message"]["text"] for t in recovered["snapshot"]["state"]["turns"]]
            assert texts == ["one"]

    run(host, body, Limits(replay=2))


def test_the_per_channel_reconnect_binds_the_client_id_like_the_other(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as alice, server.client(OTHER_TOKEN) as bob:
            client_id = f"mine-{uuid.uuid4().hex[:6]}"
            root = [{"channel": "ahp-root://", "lastSeenServerSeq": 0}]
            mine = await alice.call("reconnect", {"clientId": client_id, "subscriptions": root})
            # 0 is no seq of this run of the server (its range starts elsewhere): a snapshot
            (recovered,) = mine["channels"]
            assert (recovered["kind"], recovered["channel"]) == ("snapshot", "ahp-root://")
            with pytest.raises(RpcFailed) as refused:  # another identity's id
                await bob.call("reconnect", {"clientId": client_id, "subscriptions": root})
            assert refused.value.code == -32009

    run(host, body)
