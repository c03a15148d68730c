"""A client that saw an earlier run of the server: its lastSeenServerSeq is
another run's, so a reconnect gets snapshots, never this run's envelopes
(each `serve` numbers serverSeq in a range of its own, server/serve.py)."""

import asyncio
from typing import Any

from agenthost.actors import Host
from agenthost.server.channels import SEQ_BITS
from agenthost.server.serve import ServeConfig
from tests.server.ahp_client import action_of, running
from tests.server.test_ahp import new_session, turn


def test_each_serve_numbers_server_seq_in_a_range_of_its_own() -> None:
    bases = {ServeConfig().seq_base >> SEQ_BITS for _ in range(20)}
    assert len(bases) > 1 and 0 not in bases


def test_a_reconnect_with_an_earlier_runs_seq_gets_a_snapshot_of_what_changed_since(
    host: Host,
) -> None:
    async def body() -> None:
        async with running(host) as first:
            async with first.client() as watcher:
                await watcher.initialize(client_id="watcher")
                session, _ = await new_session(watcher)
                subscribed = await watcher.call("subscribe", {"channel": session})
                seen = subscribed["snapshot"]["fromSeq"]
            async with first.client() as other:  # while the watcher is away
                await other.initialize(client_id="other")
                await other.call("subscribe", {"channel": session})
                await other.dispatch(session, {"type": "session/titleChanged", "title": "new"})
                await other.wait_for(action_of("session/titleChanged"))
        async with running(host) as second:
            async with second.client() as busy:  # the new run's own numbers pass `seen`
                await busy.initialize(client_id="busy")
                _, elsewhere = await new_session(busy)
                await busy.call("subscribe", {"channel": elsewhere})
                for n in range(3):
                    await busy.dispatch(elsewhere, turn("hi", f"t{n}"))
                    await busy.wait_for(action_of("chat/turnComplete", turnId=f"t{n}"))
            async with second.client() as back:
                result: Any = await back.call(
                    "reconnect",
                    {"clientId": "watcher", "lastSeenServerSeq": seen, "subscriptions": [session]},
                )
        assert result["type"] == "snapshot"
        (snapshot,) = result["snapshots"]
        assert snapshot["state"]["title"] == "new"

    asyncio.run(body())
