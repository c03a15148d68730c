"""Limits in bytes over AHP: a message's text is refused over the host's limit."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from agenthost.actors import Host, HostLimits
from agenthost.providers.scripted import ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.server.ahp_client import Server, action_of
from tests.server.test_ahp import by_origin, followed_chat, run, turn


@pytest.fixture
def small_host(db_path: Path) -> Iterator[Host]:
    host = Host.start(
        store=SqliteStore(db_path),
        providers={"scripted": ScriptedProvider()},
        clock=FakeClock(),
        limits=HostLimits(message_bytes=1_000),
    )
    yield host
    host.stop()


def test_a_dispatched_message_over_the_host_s_limit_is_refused_naming_it(small_host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            sent = await client.dispatch(chat, turn("x" * 1_001, "t-big"))
            refused = (await client.wait_for(by_origin(sent)))["params"]
            assert refused["rejectionReason"] == (
                "the message's text is 1001 bytes; at most 1000 (HostLimits.message_bytes)"
            )
            queued = {"type": "chat/pendingMessageSet", "kind": "queued", "id": "q"}
            sent = await client.dispatch(chat, {**queued, "message": {"text": "é" * 501}})
            assert (
                "HostLimits.message_bytes"
                in (await client.wait_for(by_origin(sent)))["params"]["rejectionReason"]
            )
            await client.dispatch(chat, turn("x" * 1_000, "t-fits"))
            await client.wait_for(action_of("chat/turnComplete", turnId="t-fits"))
            state = (await client.call("subscribe", {"channel": chat}))["snapshot"]["state"]
            assert [t["id"] for t in state["turns"]] == ["t-fits"]

    run(small_host, body)
