"""`agenthost load --url`: the remote driver against a server on loopback."""

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
from typer.testing import CliRunner

from agenthost.actors import Host
from agenthost.providers.scripted import Gate, ScriptedProvider
from agenthost.server.cli import app
from agenthost.server.load import LoadConfig, LoadReport
from agenthost.server.load_remote import load_remote
from agenthost.server.serve import ServeConfig, serve
from tests.server.ahp_client import TOKEN, TOKENS, WAIT_S, running


def ws_url(http_url: str) -> str:
    return http_url.replace("http", "ws", 1) + "ahp"


def run_remote(host: Host, config: LoadConfig, progress: list[int]) -> LoadReport:
    async def main() -> LoadReport:
        async with running(host) as server:
            return await load_remote(
                attrs.evolve(config, url=ws_url(server.url), token=TOKEN),
                progress=lambda: progress.append(1),
            )

    return asyncio.run(main())


@contextmanager
def served(host: Host) -> Iterator[str]:
    """The server on its own thread and loop (for the CLI, which runs its own loop)."""
    ready = threading.Event()
    urls: list[str] = []
    loops: list[asyncio.AbstractEventLoop] = []
    stops: list[asyncio.Event] = []

    async def main() -> None:
        stops.append(asyncio.Event())
        loops.append(asyncio.get_running_loop())

        def on_ready(url: str) -> None:
            urls.append(url)
            ready.set()

        await serve(host, TOKENS, ServeConfig(port=0, drain_s=5.0), on_ready, stops[0])

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(WAIT_S), "the server did not start"
    try:
        yield ws_url(urls[0])
    finally:
        loops[0].call_soon_threadsafe(stops[0].set)
        thread.join(WAIT_S)
        assert not thread.is_alive()


def test_the_remote_driver_runs_every_turn_and_checks_the_invariants(host: Host) -> None:
    progress: list[int] = []
    report = run_remote(host, LoadConfig(chats=6, turns=3, connections=2), progress)
    assert report.violations == ()
    assert report.mode == "remote"
    assert report.turns_requested == report.turns_completed == 18
    assert len(progress) == 18
    assert report.connections == 2
    assert report.frames_received is not None and report.frames_received > 18
    assert 0 < report.latency_ms_p50 <= report.latency_ms_p99


def test_the_remote_driver_opens_more_websockets_than_an_http_pool_holds(host: Host) -> None:
    progress: list[int] = []
    config = LoadConfig(chats=101, turns=1, connections=101, turn_timeout_s=WAIT_S)
    report = run_remote(host, config, progress)
    assert report.violations == ()
    assert report.connections == 101 and report.turns_completed == 101


def test_a_turn_that_never_ends_is_a_violation(host: Host, provider: ScriptedProvider) -> None:
    provider.on("chat 0 turn 1", Gate("never"))
    progress: list[int] = []
    try:
        report = run_remote(
            host, LoadConfig(chats=2, turns=3, connections=1, turn_timeout_s=2.0), progress
        )
    finally:
        provider.open("never")  # lets the server drain at once
    assert not report.ok
    assert report.turns_completed == 4  # chat 1's three, chat 0's first
    assert report.violations[:2] == (
        "1 turns did not complete (first: chat 0 turn 1: timeout)",
        "1 turns were never sent (their chat stopped at a failed turn)",
    )
    assert "chat 0: a turn was left active" in report.violations
    assert any("got 0 terminal actions" in v for v in report.violations)
    assert not any(v.startswith("chat 1") for v in report.violations)


def test_the_cli_drives_a_server_and_exits_1_on_a_violation(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("chat 1 turn 0", Gate("never"))
    with served(host) as url:
        common = ["load", "--url", url, "--token", TOKEN, "--turns", "2", "--json"]
        fine = CliRunner().invoke(app, [*common, "--chats", "1"])
        broken = CliRunner().invoke(app, [*common, "--chats", "2", "--turn-timeout", "0.5"])
        provider.open("never")
    assert fine.exit_code == 0, fine.output
    report = json.loads(fine.stdout)
    assert report["ok"] is True and report["turns_completed"] == 2
    assert broken.exit_code == 1, broken.output
    assert json.loads(broken.stdout)["ok"] is False


def test_a_wrong_token_or_no_server_is_a_clear_error(host: Host) -> None:
    with served(host) as url:
        refused = CliRunner().invoke(app, ["load", "--url", url, "--token", "w" * 32])
    assert refused.exit_code == 1 and "cannot connect" in refused.output
    missing = CliRunner().invoke(app, ["load", "--url", url, "--token", ""])
    assert missing.exit_code != 0 and "token" in missing.output


def test_the_remote_driver_reads_turns_back_from_a_server_of_before_1_1() -> None:
    """A server of before AHP 1.1 (the baseline `turn-cpu --ahp` measures) answers
    fetchTurns with the page itself, oldest first, paged forward by nextCursor."""
    from agenthost.server.load import ChatRecord
    from agenthost.server.load_remote import RemoteChat

    def turn(n: int) -> dict[str, Any]:
        text = f"echo: p{n}"
        return {
            "id": f"t{n}",
            "message": {"text": f"p{n}"},
            "responseParts": [{"kind": "markdown", "id": f"m{n}", "content": text}],
            "state": "complete",
        }

    class OldServer:
        def __init__(self) -> None:
            self.chats: dict[str, Any] = {}
            self.asked: list[dict[str, Any]] = []

        async def call(self, method: str, params: dict[str, Any], timeout: float) -> Any:
            self.asked.append(params)
            if method == "subscribe":
                return {"snapshot": {"state": {"turns": [turn(0), turn(1), turn(2)]}}}
            if "cursor" not in params:
                return {"turns": [turn(0), turn(1)], "nextCursor": "2"}
            return {"turns": [turn(2)]}

    server = OldServer()
    chat = RemoteChat(server, 0, "ahp-chat:/c", timeout=5.0)  # type: ignore[arg-type]
    record = ChatRecord(index=0)
    asyncio.run(chat.collect(record, timeout=5.0))
    assert [user for user, _, _ in record.stored] == ["p0", "p1", "p2"]
    assert server.asked[1]["cursor"] == "2"
