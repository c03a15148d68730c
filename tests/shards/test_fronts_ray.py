"""`agenthost serve --shards 2 --fronts 2` on real Ray, on this machine: two
front processes on one port over two shards; clients on both fronts, a turn
through each, a reconnect that lands on the other front, and a front killed
with SIGKILL while a turn runs (its client reconnects to the other; the turns
it saw complete are there, the running one ends once)."""

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agenthost.server.channels import SEQ_BITS
from agenthost.shards.ray_shards import LOOPBACK_ENV
from tests.fakes.stores import postgres_schema_url
from tests.server.ahp_client import TOKEN, AhpClient, action_of, fetched_turns

os.environ.update(LOOPBACK_ENV)  # before ray is imported: a local cluster on loopback only
pytest.importorskip("ray", reason="ray is not installed (pip install 'agenthost[scale]')")
pytest.importorskip("psycopg", reason="psycopg is not installed (agenthost[scale])")

START_S = 180.0
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    from agenthost.shards.ray_shards import LocalRay

    cluster = LocalRay(ports=24600, num_cpus=2)
    yield cluster.address
    cluster.stop()


@pytest.fixture
def store_url() -> Iterator[str]:
    yield from postgres_schema_url()


class Served:
    """The serve process, its URL and its fronts (serverSeq base -> pid)."""

    def __init__(self, process: "subprocess.Popen[str]", url: str, log: Path) -> None:
        self.process = process
        self.url = url
        self.log = log

    def fronts(self) -> dict[int, int]:
        found = {}
        for line in self.log.read_text().splitlines():
            line = ANSI.sub("", line)
            if "front_ready" in line:
                fields = dict(re.findall(r"(\w+)=(\d+)", line))
                found[int(fields["seq_base"])] = int(fields["pid"])
        return found


def serve(tmp_path: Path, ray_address: str, store_url: str) -> Served:
    (tmp_path / "tokens").write_text(f"{TOKEN} alice\n")
    # 20 deltas 50 ms apart: a turn runs about a second, long enough to kill a front in
    (tmp_path / "p.toml").write_text(
        '[providers.scripted]\nkind = "scripted"\necho_deltas = 20\ndelta_s = 0.05\n'
    )
    log = tmp_path / "serve.log"
    command = [sys.executable, "-m", "agenthost.server.cli", "--log-level", "info", "serve"]
    options = ["--shards", "2", "--fronts", "2", "--ray-address", ray_address, "--port", "0"]
    options += ["--store", store_url, "--token-file", str(tmp_path / "tokens")]
    options += ["--providers", str(tmp_path / "p.toml"), "--drain-s", "5"]
    with log.open("w") as err:
        process = subprocess.Popen(
            [*command, *options], stdout=subprocess.PIPE, stderr=err, text=True
        )
    assert process.stdout is not None
    deadline = time.monotonic() + START_S
    for line in process.stdout:
        found = re.search(r"serving AHP at (ws://\S+)", line)
        if found:
            return Served(process, found.group(1), log)
        if time.monotonic() > deadline:
            break
    process.kill()
    raise AssertionError(f"serve did not start (exit {process.poll()}): {log.read_text()[-2000:]}")


@asynccontextmanager
async def connected(http: aiohttp.ClientSession, url: str) -> AsyncIterator[AhpClient]:
    ws = await http.ws_connect(url, headers={"Authorization": f"Bearer {TOKEN}"})
    client = AhpClient(ws)
    try:
        yield client
    finally:
        await ws.close()
        client._reader.cancel()


async def on_front(
    http: aiohttp.ClientSession, url: str, base: int, client_id: str, *, avoid: bool = False
) -> tuple[AhpClient, Any]:
    """A client initialized on the front whose serverSeq base is `base` (or, with
    `avoid`, on any other): the kernel picks the front, so connect until it does."""
    for _ in range(64):
        ws = await http.ws_connect(url, headers={"Authorization": f"Bearer {TOKEN}"})
        client = AhpClient(ws)
        started = await client.initialize(client_id=client_id)
        landed = started["serverSeq"] >> SEQ_BITS << SEQ_BITS
        if (landed == base) != avoid:
            return client, ws
        await ws.close()
        client._reader.cancel()
    raise AssertionError("64 connections and none landed where wanted")


def turn(text: str, turn_id: str) -> dict[str, Any]:
    return {"type": "chat/turnStarted", "turnId": turn_id, "message": {"text": text}}


def test_two_front_processes_on_one_port_serve_reconnects_and_a_front_killed(
    tmp_path: Path, ray_address: str, store_url: str
) -> None:
    served = serve(tmp_path, ray_address, store_url)
    try:
        fronts = served.fronts()
        assert len(fronts) == 2, fronts
        base_a, base_b = sorted(fronts)

        async def body() -> None:
            async with aiohttp.ClientSession() as http:
                a, ws_a = await on_front(http, served.url, base_a, "phone")
                b, ws_b = await on_front(http, served.url, base_b, "laptop")
                chats = {}
                for name, client in (("a", a), ("b", b)):  # a session and a turn through each
                    uri = f"ahp-session:/fronts-{name}"
                    created = await client.call("createSession", {"channel": uri})
                    chats[name] = created["state"]["defaultChat"]
                    await client.call("subscribe", {"channel": chats[name]})
                    await client.dispatch(chats[name], turn(f"q-{name}", f"t-{name}"))
                    await client.wait_for(action_of("chat/turnComplete", turnId=f"t-{name}"))
                # a reconnect that lands on the other front: snapshots, never b's replay
                seen = a.actions(chats["a"])[-1]["serverSeq"]
                await ws_a.close()
                again, ws = await on_front(http, served.url, base_b, "phone")
                result = await again.call(
                    "reconnect",
                    {"clientId": "phone", "lastSeenServerSeq": seen, "subscriptions": [chats["a"]]},
                )
                assert result["type"] == "snapshot"
                assert [t["id"] for t in result["snapshots"][0]["state"]["turns"]] == ["t-a"]
                await ws.close()
                # front a killed with SIGKILL while a turn it started runs
                a, ws_a = await on_front(http, served.url, base_a, "phone")
                await a.call("subscribe", {"channel": chats["a"]})
                await a.dispatch(chats["a"], turn("long", "t-long"))
                await a.wait_for(action_of("chat/delta", turnId="t-long"))
                seen = a.actions(chats["a"])[-1]["serverSeq"]
                os.kill(fronts[base_a], signal.SIGKILL)
                await asyncio.wait_for(a.closed.wait(), 10)
                again, ws = await on_front(http, served.url, base_a, "phone", avoid=True)
                result = await again.call(
                    "reconnect",
                    {"clientId": "phone", "lastSeenServerSeq": seen, "subscriptions": [chats["a"]]},
                )
                assert result["type"] == "snapshot"
                state = result["snapshots"][0]["state"]
                ids = [t["id"] for t in state["turns"]]
                if "t-long" not in ids:  # still running: its end comes, once
                    assert state["activeTurn"]["id"] == "t-long"
                    await again.wait_for(action_of("chat/turnComplete", turnId="t-long"))
                    ids = [t["id"] for t in await fetched_turns(again, chats["a"])]
                assert ids == ["t-a", "t-long"]
                ends = [
                    n
                    for n in again.notifications
                    if action_of("chat/turnComplete", turnId="t-long")(n)
                ]
                assert len(ends) <= 1
                await ws.close()
                await ws_b.close()

        asyncio.run(body())
    finally:
        served.process.send_signal(signal.SIGTERM)
        code = served.process.wait(timeout=60)
    assert code == 0, served.log.read_text()[-2000:]
    for pid in served.fronts().values():  # every front (the restarted one too) has stopped
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
