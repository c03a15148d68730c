"""Limits in bytes over AHP: a message's text is refused over the host's limit,
and what passed through the server is not held once its sessions left memory."""

import asyncio
import gc
import logging
import signal
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
import structlog.testing

from agenthost.actors import Host, HostLimits
from agenthost.actors.aio import AsyncHost
from agenthost.messages import TurnState
from agenthost.messages.events import TurnCompleted
from agenthost.providers.scripted import ScriptedProvider
from agenthost.server.ahp import Limits
from agenthost.server.errors import HOST_LATE
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.server.ahp_client import (
    TOKEN,
    AhpClient,
    RpcFailed,
    Server,
    action_of,
    fetch_page,
)
from tests.server.test_ahp import by_origin, followed_chat, new_session, run, turn


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


class Released:
    """Counts `session_released` log lines (from any thread) until `wanted`."""

    def __init__(self, wanted: int) -> None:
        self.wanted = wanted
        self.seen = 0
        self.all = threading.Event()

    def __call__(self, logger: object, name: str, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("event") == "session_released":
            self.seen += 1
            if self.seen >= self.wanted:
                self.all.set()
        raise structlog.DropEvent


LARGE = 900_000
SESSIONS, TURNS_EACH = 3, 20


def test_after_sixty_large_turns_and_their_sessions_released_the_server_holds_none_of_them(
    db_path: Path, clock: FakeClock
) -> None:
    """60 turns of ~0.9 MB (and their echoes) pass through the server; once the
    client left, the channels closed and the sessions left memory, the memory
    traced in process is back within a few MB of where it started."""
    released = Released(SESSIONS + 1)
    structlog.configure(
        processors=[released], wrapper_class=structlog.make_filtering_bound_logger(logging.INFO)
    )
    host = Host.start(
        store=SqliteStore(db_path),
        providers={"scripted": ScriptedProvider(echo_deltas=10, records=0)},  # it keeps none
        clock=clock,
    )
    grace = Limits().channel_idle_s

    async def turns(client: AhpClient, chat: str, count: int, size: int) -> None:
        for n in range(count):
            await client.dispatch(chat, turn(f"{n} " + "x" * size, f"t{n}"))
            await client.wait_for(action_of("chat/turnComplete", turnId=f"t{n}"))
            client.notifications.clear()  # the test's own copy of what it received

    async def body(server: Server) -> None:
        async with server.client() as client:
            warm = await followed_chat(client)
            await turns(client, warm, 1, LARGE)  # every code path once, before measuring
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            chats = [warm]
            for _ in range(SESSIONS):
                _, chat = await new_session(client)
                await client.call("subscribe", {"channel": chat})
                await turns(client, chat, TURNS_EACH, LARGE)
                chats.append(chat)
            for chat in chats:
                await client.notify("unsubscribe", {"channel": chat})
            await client.call("ping")
            clock.advance(grace)  # the channels close...
            await client.call("ping")
            # ...then the sessions, idle and unwatched, leave memory: a channel's
            # close reaches its chat a moment later, so the clock goes on until then.
            for _ in range(10):
                clock.advance(30.0)
                if await asyncio.to_thread(released.all.wait, 2):
                    break
            assert released.all.is_set(), f"{released.seen} of {released.wanted} released"
            client.notifications.clear()
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
            tracemalloc.stop()
        assert held < 4_000_000, f"{held / 1e6:.1f} MB held after {SESSIONS * TURNS_EACH} turns"

    try:
        run(host, body)
    finally:
        host.stop()


def test_a_fetched_page_stops_at_its_bytes_and_its_cursor_says_where_to_go_on(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            for n in range(3):  # each turn ~200 KB: its message and its echo
                await client.dispatch(chat, turn(f"{n} " + "x" * 100_000, f"t{n}"))
                await client.wait_for(action_of("chat/turnComplete", turnId=f"t{n}"))
            pages, cursor = [], None
            while True:  # AHP 1.1: from the newest page back
                params = {"channel": chat, **({"cursor": cursor} if cursor else {})}
                page = await fetch_page(client, params)
                pages.append([t["id"] for t in page["turns"]])
                cursor = page.get("turnsNextCursor")
                if cursor is None:
                    break
            assert pages == [["t2"], ["t1"], ["t0"]]
            small = await fetch_page(client, {"channel": chat, "limit": 1})
            assert [t["id"] for t in small["turns"]] == ["t2"] and small["turnsNextCursor"] == "2"

    run(host, body, Limits(page_bytes=250_000))


def test_a_client_whose_send_buffer_passes_its_bytes_is_cut_off_and_the_turn_goes_on(
    host: Host,
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as slow:
            chat = await followed_chat(slow)
            await slow.dispatch(chat, turn("x" * 600_000, "t-big"))  # its echo: 10 x 60 KB
            await asyncio.wait_for(slow.closed.wait(), 10)
            assert slow.ws.close_code == 1008
        chat_id = chat.removeprefix("ahp-chat:/")
        found = await asyncio.to_thread(host.find_session, chat_id=chat_id)
        assert found is not None
        outcome = await asyncio.to_thread(turn_outcome, host, found.id, chat_id)
        assert outcome == ("t-big", TurnState.COMPLETE)  # the cut held nothing back

    run(host, body, Limits(outbox_bytes=200_000))


def turn_outcome(host: Host, session_id: str, chat_id: str) -> tuple[str, TurnState]:
    """The chat's last turn once it ended (its end is awaited through a subscription)."""
    chat = host.open_session(session_id).chat(chat_id)
    events = chat.subscribe()
    if chat.state().active_turn is not None:
        while not isinstance(events.next(10), TurnCompleted):
            pass
    events.close()
    last = chat.state().turns[-1]
    return last.id, last.state


def test_serve_takes_its_limits_in_bytes_from_its_flags(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text(f"{TOKEN} alice\n")
    options = ["--port", "0", "--store", str(tmp_path / "served.db")]
    options += ["--token-file", str(tmp_path / "tokens"), "--max-message-bytes", "100"]
    options += ["--send-buffer-bytes", "1000000", "--replay-bytes", "1000000"]
    options += ["--page-bytes", "1000000"]
    child = subprocess.Popen(
        [sys.executable, "-m", "agenthost.server.cli", "serve", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    async def refused(url: str) -> str:
        async with aiohttp.ClientSession() as http:
            ws = await http.ws_connect(url, headers={"Authorization": f"Bearer {TOKEN}"})
            client = AhpClient(ws)
            try:
                chat = await followed_chat(client)
                sent = await client.dispatch(chat, turn("x" * 101))
                reason: str = (await client.wait_for(by_origin(sent)))["params"]["rejectionReason"]
                return reason
            finally:
                await ws.close()

    try:
        assert child.stdout is not None
        url = child.stdout.readline().split("serving AHP at ", 1)[1].split()[0]
        reason = asyncio.run(refused(url))
        assert reason.endswith("at most 100 (HostLimits.message_bytes)")
    finally:
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=20) == 0


def test_a_request_the_host_does_not_answer_in_time_is_an_error_not_a_traceback(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def busy(self: object, *_: object, **__: object) -> None:
        raise TimeoutError("no reply to ListSessionRows within 10.0 s")

    monkeypatch.setattr(AsyncHost, "list_sessions_page", busy)

    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            with structlog.testing.capture_logs() as logs, pytest.raises(RpcFailed) as refused:
                await client.call("listSessions")
            assert (refused.value.code, str(refused.value)) == (
                -32000,
                HOST_LATE,
            )
            assert [e["event"] for e in logs] == ["request_timed_out"]
            assert await client.call("ping") is None

    run(host, body)


def test_a_logged_exception_shows_no_frame_s_locals(capsys: pytest.CaptureFixture[str]) -> None:
    from agenthost.server.cli import configure_logging

    configure_logging("error")
    prompt = "the user's private prompt"
    try:
        raise ValueError(f"{len(prompt)} characters")
    except ValueError:
        structlog.get_logger("agenthost.test").exception("request_failed")
    logged = capsys.readouterr().err
    assert "Traceback" in logged and "ValueError: 25 characters" in logged
    assert prompt not in logged


def test_past_its_bound_on_channels_in_their_grace_the_longest_idle_closes_at_once(
    host: Host,
) -> None:
    """A channel nobody follows keeps its session, and the whole history, in
    memory for its grace: with many clients leaving, that alone held a
    thousand sessions in a soak. At most `idle_channels` wait out their grace;
    one followed again in time is not among them."""

    async def chat_channels(server: Server) -> int:
        async with server.http.get(server.url + "metrics") as metrics:
            text = await metrics.text()
        line = next(line for line in text.splitlines() if line.startswith("agenthost_chat_"))
        return int(line.split()[1])

    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            chats = []
            for _ in range(4):
                _, chat = await new_session(client)
                await client.call("subscribe", {"channel": chat})
                chats.append(chat)
            for chat in chats[:2]:
                await client.notify("unsubscribe", {"channel": chat})
            await client.call("ping")
            assert await chat_channels(server) == 4  # two followed, two in their grace
            await client.call("subscribe", {"channel": chats[0]})  # followed again in time
            for chat in chats[2:]:
                await client.notify("unsubscribe", {"channel": chat})
            await client.call("ping")
            assert await chat_channels(server) == 3  # of 1, 2, 3 in their grace, 1 closed

    run(host, body, Limits(idle_channels=2))
