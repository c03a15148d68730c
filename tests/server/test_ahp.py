"""The AHP server over a real WebSocket on loopback, driven with raw JSON-RPC frames."""

import asyncio
import json
import shutil
import subprocess
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agenthost.actors import Host
from agenthost.actors.aio import AsyncChat, AsyncHost, AsyncSession
from agenthost.messages import AgentHostError, ErrorCode
from agenthost.providers.scripted import Gate, Say, ScriptedProvider
from agenthost.server.ahp import OWNER_KEY, Limits
from agenthost.testing import FakeClock
from tests.server.ahp_client import (
    OTHER_TOKEN,
    AhpClient,
    RpcFailed,
    Server,
    action_of,
    fetched_turns,
    running,
)


def run(
    host: Host, body: Callable[[Server], Awaitable[None]], limits: Limits | None = None
) -> None:
    async def main() -> None:
        async with running(host, limits) as server:
            await body(server)

    asyncio.run(main())


async def new_session(client: AhpClient) -> tuple[str, str]:
    """A session and its default chat's channel."""
    uri = f"ahp-session:/{uuid.uuid4()}"
    created = await client.call("createSession", {"channel": uri})
    return uri, created["state"]["defaultChat"]


async def followed_chat(client: AhpClient) -> str:
    """Initialize, create a session and subscribe to its default chat."""
    await client.initialize()
    _, chat = await new_session(client)
    await client.call("subscribe", {"channel": chat})
    return chat


async def turns_once_ended(client: AhpClient, chat: str, turn_id: str) -> list[dict[str, Any]]:
    """The chat's stored turns, once `turn_id` (running or not when we look) has ended."""
    snapshot = (await client.call("subscribe", {"channel": chat}))["snapshot"]
    if snapshot["state"].get("activeTurn") is not None:
        await client.wait_for(action_of("chat/turnComplete", turnId=turn_id))
    return await fetched_turns(client, chat)


def by_origin(client_seq: int) -> Callable[[dict[str, Any]], bool]:
    return lambda n: n.get("params", {}).get("origin", {}).get("clientSeq") == client_seq


ROOT_CHANGED = "root/sessionSummaryChanged"


def titled(title: str) -> Callable[[dict[str, Any]], bool]:
    return lambda n: (
        n.get("method") == ROOT_CHANGED and n["params"]["changes"].get("title") == title
    )


def turn(text: str, turn_id: str | None = None) -> dict[str, Any]:
    return {
        "type": "chat/turnStarted",
        "turnId": turn_id or uuid.uuid4().hex,
        "message": {"text": text},
    }


def test_handshake_ping_first_and_a_version_we_do_not_speak(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            assert await client.call("ping") is None  # AHP: ping answers null
            with pytest.raises(RpcFailed) as early:
                await client.call("listSessions")
            assert early.value.code == -32600  # AHP gives -32002 to ProviderNotFound
            with pytest.raises(RpcFailed) as refused:
                await client.call(
                    "initialize",
                    {"channel": "ahp-root://", "protocolVersions": ["9.0.0"], "clientId": "c"},
                )
            assert refused.value.code == -32005
            supported = refused.value.error["data"]["supportedVersions"]
            assert supported == ["^1.0.0", "^0.9.0", "^0.5.0"]  # AHP: versions or caret ranges
            await asyncio.wait_for(client.closed.wait(), 10)
        async with server.client() as client:
            result = await client.initialize()
            assert result["protocolVersion"] == "1.1.0"
            assert await client.call("ping") is None  # AHP: ping answers null

    run(host, body)


@pytest.mark.parametrize(
    ("offered", "answered"),
    [
        (["1.0.0", "1.2.0"], "1.2.0"),  # the highest in range, as offered (never 1.1.0)
        (["0.5.0", "0.4.0", "0.3.0"], "0.5.0"),  # the official TypeScript client's 0.5 line
        (["0.5.2", "0.5.1"], "0.5.2"),
        (["0.9.1", "0.8.0"], "0.9.1"),
    ],
)
def test_initialize_answers_the_highest_version_the_client_offered_in_range(
    host: Host, offered: list[str], answered: str
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            result = await client.call(
                "initialize",
                {"channel": "ahp-root://", "protocolVersions": offered, "clientId": "c"},
            )
            assert result["protocolVersion"] == answered

    run(host, body)


def test_a_malformed_version_or_the_older_singular_form(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            with pytest.raises(RpcFailed) as malformed:
                await client.call(
                    "initialize", {"protocolVersions": ["1.1.0", "1.1"], "clientId": "c"}
                )
            assert malformed.value.code == -32602
            assert malformed.value.error["data"]["field"] == "protocolVersions[1]"
            older = await client.call("initialize", {"protocolVersion": "1.0.0", "clientId": "c"})
            assert older["protocolVersion"] == "1.0.0"

    run(host, body)


NODE = shutil.which("node")


def _node_has_websocket() -> bool:
    if NODE is None:
        return False
    probe = subprocess.run(
        [
            NODE,
            "--experimental-websocket",
            "-e",
            "process.exit(typeof WebSocket === 'function' ? 0 : 1)",
        ],
        capture_output=True,
        timeout=30,
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _node_has_websocket(), reason="needs node 20+ (its global WebSocket)")
def test_a_node_websocket_client_gets_the_unsupported_version_answer_before_the_close(
    host: Host,
) -> None:
    """Node's WebSocket (undici) lost the frame when the close raced the send:
    it saw close 1006 and no answer, so never learnt supportedVersions."""
    from tests.server.ahp_client import TOKEN

    script = Path(__file__).parent / "node" / "unsupported_version.mjs"

    async def body(server: Server) -> None:
        url = server.url.replace("http", "ws", 1) + "ahp"
        child = await asyncio.create_subprocess_exec(
            NODE, "--no-warnings", "--experimental-websocket", str(script), url, TOKEN,
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(child.communicate(), 30)
        events = [json.loads(line) for line in out.decode().splitlines()]
        assert [e["event"] for e in events] == ["message", "close"], events
        answer = events[0]["data"]
        assert answer["id"] == 1 and answer["error"]["code"] == -32005
        assert answer["error"]["data"]["supportedVersions"] == ["^1.0.0", "^0.9.0", "^0.5.0"]
        assert events[1]["code"] == 1002

    for _ in range(3):  # the race lost every time; three tries make a pass mean something
        run(host, body)


def test_requests_sent_right_behind_initialize_wait_for_it(host: Host) -> None:
    """The client id is claimed through the store, so initialize answers after a
    round trip: what a client pipelines behind it is not refused meanwhile."""

    async def body(server: Server) -> None:
        async with server.client() as client:
            initialize = {"clientId": "eager", "protocolVersions": ["1.1.0"]}
            await client.ws.send_json(
                {"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": initialize}
            )
            uri = f"ahp-session:/{uuid.uuid4()}"
            await client.ws.send_json(
                {"jsonrpc": "2.0", "id": "c", "method": "createSession", "params": {"channel": uri}}
            )
            created = await client.response("c")
            assert "result" in created, created
            assert "result" in await client.response("i")

    run(host, body)


def test_a_connection_without_a_valid_token_is_refused(host: Host) -> None:
    async def body(server: Server) -> None:
        for token in (None, "wrong-token-wrong-token"):
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                async with server.client(token=token):
                    pass
            assert refused.value.status == 401
        with pytest.raises(aiohttp.WSServerHandshakeError) as foreign:
            async with server.client(headers={"Origin": "https://evil.example"}):
                pass
        assert foreign.value.status == 403

    run(host, body)


def test_a_turn_from_dispatch_to_completion_with_origin_and_sequence(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize(client_id="alice-1", initialSubscriptions=["ahp-root://"])
            session_uri, chat = await new_session(client)
            snapshot = (await client.call("subscribe", {"channel": chat}))["snapshot"]
            assert snapshot["resource"] == chat and snapshot["state"]["turns"] == []
            action = turn("hello", "t-1")
            client_seq = await client.dispatch(chat, action)
            done = await client.wait_for(action_of("chat/turnComplete", turnId="t-1"))
            started = next(
                a for a in client.actions(chat) if a["action"]["type"] == "chat/turnStarted"
            )
            assert started["origin"] == {"clientId": "alice-1", "clientSeq": client_seq}
            assert started["action"]["turnId"] == "t-1"
            seqs = [a["serverSeq"] for a in client.actions(chat)]
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
            assert done["params"]["serverSeq"] == seqs[-1]
            fetched = await fetched_turns(client, chat)
            assert [t["message"]["text"] for t in fetched] == ["hello"]
            listed = await client.call("listSessions")
            assert [s["resource"] for s in listed["items"]] == [session_uri]
            assert listed["items"][0]["turnCount"] == 1  # ours, beside AHP's fields
            assert {"createdAt", "modifiedAt"} <= set(listed["items"][0])
            added = await client.wait_for(lambda n: n.get("method") == "root/sessionAdded")
            assert added["params"]["summary"]["resource"] == session_uri
            assert added["params"]["summary"]["turnCount"] == 0
            await client.wait_for(titled("hello"))  # titled by its first message
            await client.wait_for(  # and unread once it ended; each notice only what changed
                lambda n: (
                    n.get("method") == "root/sessionSummaryChanged"
                    and n["params"]["changes"].get("status", 32) & 32 == 0
                    and n["params"]["changes"].get("turnCount") == 1
                )
            )
            changed = [n["params"] for n in client.notifications if n.get("method") == ROOT_CHANGED]
            assert all("provider" not in c["changes"] and "summary" not in c for c in changed)

    run(host, body)


def test_queued_and_steering_messages_and_their_removal(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("long", Say("a"), Gate("g"), Say("b"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            await client.dispatch(chat, turn("long", "t-long"))
            await asyncio.to_thread(provider.wait_reached, "g", 10)
            queued = {
                "type": "chat/pendingMessageSet",
                "kind": "queued",
                "id": "q1",
                "message": {"text": "later"},
            }
            await client.dispatch(chat, queued)
            added = await client.wait_for(action_of("chat/pendingMessageSet"))
            assert added["params"]["origin"]["clientId"] == "c1"
            removal = {"type": "chat/pendingMessageRemoved", "kind": "queued", "id": "q1"}
            await client.dispatch(chat, removal)
            removed = await client.wait_for(action_of("chat/pendingMessageRemoved"))
            assert "rejectionReason" not in removed["params"]
            steer = {
                "type": "chat/pendingMessageSet",
                "kind": "steering",
                "id": "s1",
                "message": {"text": "faster"},
            }
            steered = await client.dispatch(chat, steer)
            await client.wait_for(by_origin(steered))
            withdraw = {"type": "chat/pendingMessageRemoved", "kind": "steering", "id": "s1"}
            withdrawn = await client.dispatch(chat, withdraw)
            accepted = await client.wait_for(by_origin(withdrawn))  # the model had not read it
            assert "rejectionReason" not in accepted["params"]
            assert accepted["params"]["action"]["type"] == "chat/pendingMessageRemoved"
            await asyncio.to_thread(provider.open, "g")
            await client.wait_for(action_of("chat/turnComplete", turnId="t-long"))

    run(host, body)


def test_invalid_actions_are_echoed_with_a_reason_and_unknown_channels_ignored(
    host: Host,
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            session_uri, chat = await new_session(client)
            await client.call("subscribe", {"channel": chat})
            cancel = {"type": "chat/turnCancelled", "turnId": "nope"}
            await client.dispatch(chat, cancel)
            echoed = await client.wait_for(lambda n: "rejectionReason" in n.get("params", {}))
            assert echoed["params"]["action"] == cancel
            await client.dispatch(chat, {"type": "chat/delta", "turnId": "x", "content": "y"})
            await client.wait_for(
                lambda n: (
                    n.get("params", {}).get("action", {}).get("type") == "chat/delta"
                    and "rejectionReason" in n["params"]
                )
            )
            await client.dispatch(
                session_uri, {"type": "session/isArchivedChanged", "isArchived": True}
            )
            await client.dispatch(chat, turn("refused"))
            refused = await client.wait_for(
                lambda n: (
                    n.get("params", {}).get("action", {}).get("type") == "chat/turnStarted"
                    and "rejectionReason" in n["params"]
                )
            )
            assert "archived" in refused["params"]["rejectionReason"]
            await client.dispatch("ahp-chat:/does-not-exist", turn("x"))
            assert await client.call("ping") is None  # AHP: ping answers null
            assert not any(a["channel"] == "ahp-chat:/does-not-exist" for a in client.actions())

    run(host, body)


def test_reconnect_replays_or_sends_snapshots_when_the_gap_is_too_large(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as first:
            await first.initialize(client_id="phone")
            _, chat = await new_session(first)
            await first.call("subscribe", {"channel": chat})
            await first.dispatch(chat, turn("one", "t1"))
            await first.wait_for(action_of("chat/turnComplete", turnId="t1"))
            seen = first.actions(chat)[0]["serverSeq"] - 1
        async with server.client() as again:
            result = await again.call(
                "reconnect",
                {"clientId": "phone", "lastSeenServerSeq": seen, "subscriptions": [chat]},
            )
            assert result["type"] == "replay" and result["missing"] == []
            assert next(a["action"]["type"] for a in result["actions"]) == "chat/turnStarted"
            assert result["actions"][-1]["action"]["type"] == "chat/turnComplete"
            gone = await again.call(
                "reconnect",
                {
                    "clientId": "phone",
                    "lastSeenServerSeq": 0,
                    "subscriptions": [chat, "ahp-chat:/gone"],
                },
            )
            assert gone["missing"] == ["ahp-chat:/gone"]

    async def small(server: Server) -> None:
        async with server.client() as client:
            await client.initialize(client_id="tablet")
            _, chat = await new_session(client)
            await client.call("subscribe", {"channel": chat})
            await client.dispatch(chat, turn("one", "t1"))
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
            result = await client.call(
                "reconnect", {"clientId": "tablet", "lastSeenServerSeq": 0, "subscriptions": [chat]}
            )
            assert result["type"] == "snapshot"
            assert [s["resource"] for s in result["snapshots"]] == [chat]
            assert [t["message"]["text"] for t in result["snapshots"][0]["state"]["turns"]] == [
                "one"
            ]

    run(host, body)
    run(host, small, Limits(replay=2))


def test_another_identity_sees_nothing_of_a_session(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as alice:
            await alice.initialize(client_id="a")
            session_uri, chat = await new_session(alice)
            async with server.client(token=OTHER_TOKEN) as bob:
                await bob.initialize(client_id="b")
                assert (await bob.call("listSessions"))["items"] == []
                for method, channel, code in (  # AHP: SessionNotFound -32001, NotFound -32008
                    ("subscribe", session_uri, -32001),
                    ("subscribe", chat, -32008),
                    ("fetchTurns", chat, -32008),
                ):
                    with pytest.raises(RpcFailed) as hidden:
                        await bob.call(method, {"channel": channel})
                    assert hidden.value.code == code and "not found" in str(hidden.value)
                with pytest.raises(RpcFailed):
                    await bob.initialize(client_id="a")  # a client id is bound to its identity

    run(host, body)


def test_a_client_id_stays_its_identitys_across_a_server_restart(
    start_host: Callable[..., Host],
) -> None:
    """The binding is in the store: after a restart on the same store bob is
    still refused alice's client id, and alice's own initialize and reconnect
    still work."""
    first = start_host(ScriptedProvider())

    async def claimed(server: Server) -> None:
        async with server.client() as alice:
            await alice.initialize(client_id="alice-phone")

    run(first, claimed)
    first.stop()
    again = start_host(ScriptedProvider())

    async def restarted(server: Server) -> None:
        async with server.client(token=OTHER_TOKEN) as bob:
            with pytest.raises(RpcFailed) as refused:
                await bob.initialize(client_id="alice-phone")
            assert refused.value.code == -32009  # AHP: PermissionDenied
            with pytest.raises(RpcFailed):
                await bob.call("reconnect", {"clientId": "alice-phone", "lastSeenServerSeq": 0})
        async with server.client() as alice:
            await alice.initialize(client_id="alice-phone")
        async with server.client() as alice:
            result = await alice.call(
                "reconnect", {"clientId": "alice-phone", "lastSeenServerSeq": 0}
            )
            assert result["type"] in ("replay", "snapshot")

    run(again, restarted)


def test_bad_input_never_hurts_the_server(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            await client.send_raw("{not json")
            parse = await client.response(None)
            assert parse["error"]["code"] == -32700
            with pytest.raises(RpcFailed) as unknown:
                await client.call("noSuchMethod")
            assert unknown.value.code == -32601
            with pytest.raises(RpcFailed) as bad:
                await client.call("createSession", {"channel": 42})
            assert bad.value.code == -32602 and "'channel'" in str(bad.value)
            deep: Any = []
            for _ in range(200):
                deep = [deep]
            await client.send_raw(
                json.dumps({"jsonrpc": "2.0", "id": 99, "method": "ping", "params": {"x": deep}})
            )
            too_deep = await client.response(None)
            assert too_deep["error"]["code"] == -32600
            assert await client.call("ping") is None  # AHP: ping answers null
        async with server.client() as client:
            await client.initialize()
            await client.send_raw("x" * (2 << 20))  # past the frame limit: the socket closes
            await asyncio.wait_for(client.closed.wait(), 10)
        async with server.client() as client:  # the server is fine
            await client.initialize()
            assert await client.call("ping") is None  # AHP: ping answers null

    run(host, body)


def test_a_client_that_disconnects_mid_turn_loses_nothing(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("slow", Say("a"), Gate("g"), Say("b"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            _session_uri, chat = await new_session(client)
            await client.dispatch(chat, turn("slow", "t-slow"))
            await asyncio.to_thread(provider.wait_reached, "g", 10)
        await asyncio.to_thread(provider.open, "g")
        async with server.client() as again:
            await again.initialize()
            turns = await turns_once_ended(again, chat, "t-slow")
            assert [(t["message"]["text"], t["state"]) for t in turns] == [("slow", "complete")]

    run(host, body)


def test_serve_stops_on_sigterm_after_the_running_turn_and_exits_zero(tmp_path: Any) -> None:
    import re
    import signal
    import sqlite3
    import subprocess
    import sys

    db = tmp_path / "serve.db"
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agenthost.server.cli",
            "serve",
            "--port",
            "0",
            "--store",
            f"sqlite:///{db}",
            "--drain-s",
            "10",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        url = re.search(r"web page: (\S+)\)", child.stdout.readline())
        token = child.stdout.readline().rsplit(" ", 1)[-1].strip()
        assert url is not None

        async def drive() -> None:
            async with aiohttp.ClientSession() as http:
                ws = await http.ws_connect(
                    url.group(1).replace("http", "ws", 1) + "ahp",
                    headers={"Authorization": f"Bearer {token}"},
                )
                client = AhpClient(ws)
                await client.initialize()
                _, chat = await new_session(client)
                await client.call("subscribe", {"channel": chat})
                await client.dispatch(chat, turn("before the signal", "t-last"))
                await client.wait_for(action_of("chat/turnStarted", turnId="t-last"))
                child.send_signal(signal.SIGTERM)
                await asyncio.wait_for(client.closed.wait(), 15)

        asyncio.run(drive())
        assert child.wait(timeout=20) == 0
    finally:
        child.kill()
        child.wait(timeout=10)
    with sqlite3.connect(db) as stored:
        rows = stored.execute("SELECT user_text, state FROM turns").fetchall()
    assert rows == [("before the signal", "complete")]


def test_health_metrics_initial_subscriptions_and_chats(
    host: Host, provider: ScriptedProvider
) -> None:
    async def body(server: Server) -> None:
        async with server.http.get(server.url + "healthz") as health:
            assert (health.status, await health.json()) == (200, {"ok": True, "accepting": True})
        async with server.client() as client:
            result = await client.initialize(initialSubscriptions=["ahp-root://"])
            assert [s["resource"] for s in result["snapshots"]] == ["ahp-root://"]
            assert result["snapshots"][0]["state"]["agents"][0]["provider"] == "scripted"
            session_uri, chat = await new_session(client)
            extra = (await client.call("createChat", {"channel": session_uri}))["resource"]
            state = (await client.call("subscribe", {"channel": session_uri}))["snapshot"]["state"]
            assert [c["resource"] for c in state["chats"]] == [chat, extra]
            await client.call("subscribe", {"channel": chat})
            await client.dispatch(chat, turn("count me", "t-m"))
            await client.wait_for(action_of("chat/turnComplete", turnId="t-m"))
            await client.call("disposeChat", {"channel": extra})
            with pytest.raises(RpcFailed):
                await client.call("subscribe", {"channel": extra})
        async with server.http.get(server.url + "metrics") as metrics:
            text = await metrics.text()
        assert 'agenthost_turns_total{outcome="complete"} 1' in text
        assert "agenthost_live_sessions 1" in text
        assert "agenthost_turn_latency_seconds_count" in text

    run(host, body)


def test_a_client_too_slow_for_its_stream_is_cut_off_and_the_host_goes_on(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("burst", *(Say(f"{i} ") for i in range(200)))

    async def body(server: Server) -> None:
        async with server.client() as slow:
            await slow.initialize()
            _, chat = await new_session(slow)
            await slow.call("subscribe", {"channel": chat})
            await slow.dispatch(chat, turn("burst", "t-burst"))
            await asyncio.wait_for(slow.closed.wait(), 10)
            assert slow.ws.close_code == 1008
        async with server.client() as again:  # the turn was not held back by the cut
            await again.initialize()
            turns = await turns_once_ended(again, chat, "t-burst")
            assert turns[-1]["state"] == "complete"

    run(host, body, Limits(outbox=20))


def test_a_connection_past_its_rate_limit_is_told_so(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            answers = []
            for _ in range(8):
                try:
                    answers.append(await client.call("ping"))
                except RpcFailed as error:
                    answers.append(error.code)
            assert -32029 in answers and answers[0] is None

    run(host, body, Limits(rate=0.001, burst=4))


def test_tokens_and_prompt_text_never_reach_the_logs(host: Host) -> None:
    import logging

    import structlog
    from structlog.testing import capture_logs

    from tests.server.ahp_client import TOKEN

    secret = "my secret prompt about Q3 numbers"

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            await client.dispatch(chat, turn(secret, "t-secret"))
            await client.wait_for(action_of("chat/turnComplete", turnId="t-secret"))
        with pytest.raises(aiohttp.WSServerHandshakeError):
            async with server.client(token="x" * 32):
                pass

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    with capture_logs() as logs:
        run(host, body)
    assert logs, "the run logged nothing: the check below would prove nothing"
    text = repr(logs)
    assert TOKEN not in text and "x" * 32 not in text and secret not in text


def test_serve_refuses_a_bad_manifest_naming_the_entry_and_key(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from agenthost.server.cli import app

    manifest = tmp_path / "providers.toml"
    manifest.write_text('[providers.fast]\nkind = "scripted"\nbogus = 1\n')
    result = CliRunner().invoke(app, ["serve", "--providers", str(manifest), "--port", "0"])
    assert result.exit_code != 0
    assert "'fast'" in result.output and "'bogus'" in result.output


def test_serve_refuses_a_bad_token_file_with_its_line_not_a_traceback(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from agenthost.server.cli import app

    tokens = tmp_path / "tokens"
    tokens.write_text("short alice\n")
    result = CliRunner().invoke(app, ["serve", "--token-file", str(tokens), "--port", "0"])
    assert result.exit_code == 2
    assert "tokens:1" in result.output and "16+ characters" in result.output
    assert "Traceback" not in result.output and "short" not in result.output


def test_session_creation_reports_ready_or_creation_failed(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            session_uri, _ = await new_session(client)
            await client.wait_for(action_of("session/ready"))
            doomed = f"ahp-session:/{uuid.uuid4()}"
            with pytest.raises(RpcFailed) as refused:
                await client.call("createSession", {"channel": doomed, "provider": "nope"})
            assert "unknown provider" in str(refused.value)
            failed = await client.wait_for(action_of("session/creationFailed"))
            assert failed["params"]["channel"] == doomed
            assert "unknown provider" in failed["params"]["action"]["error"]["message"]
            listed = await client.call("listSessions")
            assert [s["resource"] for s in listed["items"]] == [session_uri]

    run(host, body)


def test_a_client_that_leaves_fails_its_parked_tool_calls_after_the_grace_period(
    host: Host, provider: ScriptedProvider
) -> None:
    from agenthost.messages.state import ClientTool
    from agenthost.providers.scripted import ClientToolCall

    provider.on("fetch it", ClientToolCall("fetch", "{}"), Say("done"))

    async def body(server: Server) -> None:
        async with server.client() as browser:
            await browser.initialize(client_id="browser")
            session_uri, chat = await new_session(browser)
            session_id = session_uri.removeprefix("ahp-session:/")
            session = await asyncio.to_thread(host.open_session, session_id)
            await asyncio.to_thread(session.set_client_tools, "browser", [ClientTool(name="fetch")])
            await browser.call("subscribe", {"channel": chat})
            await browser.dispatch(chat, turn("fetch it", "t-tool"))
            await browser.wait_for(action_of("chat/toolCallStart"))
        async with server.client() as watcher:  # the browser is gone; its call fails
            await watcher.initialize(client_id="watcher")
            turns = await turns_once_ended(watcher, chat, "t-tool")
            assert turns[-1]["state"] == "complete"

    run(host, body, Limits(client_tool_grace_s=0.2))


def test_a_client_of_protocol_1_0_sees_the_head_of_the_steering_list_in_the_single_slot(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("long", Say("a"), Gate("g"), Say("b"))

    async def body(server: Server) -> None:
        async with server.client() as new:
            await new.initialize(client_id="new")
            _, chat = await new_session(new)
            await new.call("subscribe", {"channel": chat})
            await new.dispatch(chat, turn("long", "t-long"))
            await asyncio.to_thread(provider.wait_reached, "g", 10)
            steer = {
                "type": "chat/pendingMessageSet",
                "kind": "steering",
                "id": "s1",
                "message": {"text": "first"},
            }
            await new.wait_for(by_origin(await new.dispatch(chat, steer)))
            async with server.client() as old:
                result = await old.call(
                    "initialize",
                    {
                        "channel": "ahp-root://",
                        "protocolVersions": ["1.0.0"],
                        "clientId": "old",
                        "initialSubscriptions": [chat],
                    },
                )
                assert result["protocolVersion"] == "1.0.0"
                state = result["snapshots"][0]["state"]
                assert state["steeringMessage"]["id"] == "s1"
                assert not state.get("steeringMessages")
            current = (await new.call("subscribe", {"channel": chat}))["snapshot"]["state"]
            assert [m["id"] for m in current["steeringMessages"]] == ["s1"]
            await asyncio.to_thread(provider.open, "g")

    run(host, body)


async def rename(client: AhpClient, session_uri: str, title: str) -> None:
    """Retitle the session; returns once the session channel shows it."""
    await client.dispatch(session_uri, {"type": "session/titleChanged", "title": title})
    await client.wait_for(action_of("session/titleChanged", title=title))


def test_a_summary_change_reaches_a_client_that_subscribes_to_the_root_again(host: Host) -> None:
    """The server checks summaries only while the owner listens on the root; what
    it last sent before that must not hide a change after it."""

    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize(initialSubscriptions=["ahp-root://"])
            session_uri, _ = await new_session(client)

            await rename(client, session_uri, "A")
            await client.wait_for(titled("A"))
            await client.notify("unsubscribe", {"channel": "ahp-root://"})
            await rename(client, session_uri, "B")
            await client.call("subscribe", {"channel": "ahp-root://"})
            listed = await client.call("listSessions")
            assert [s["title"] for s in listed["items"]] == ["B"]
            client.notifications.clear()
            await rename(client, session_uri, "A")
            await client.wait_for(titled("A"))
            assert not any(map(titled("B"), client.notifications))

    run(host, body)


def test_a_change_while_a_summary_check_runs_is_checked_after_it(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner leaves the root and comes back while a check is in flight: the
    change made meanwhile still gets its own check, so the older summary is
    never the last one sent."""
    real = AsyncSession.view
    held = asyncio.Event()
    release = asyncio.Event()
    hold = [True]

    async def held_back(session: Any, **kwargs: Any) -> Any:
        summary = await real(session, **kwargs)  # as the session had it then
        if hold:
            hold.clear()
            held.set()
            await release.wait()
        return summary

    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize(initialSubscriptions=["ahp-root://"])
            session_uri, _ = await new_session(client)

            monkeypatch.setattr(AsyncSession, "view", held_back)
            await rename(client, session_uri, "A")
            await asyncio.wait_for(held.wait(), 10)  # the check for A has its answer
            await client.notify("unsubscribe", {"channel": "ahp-root://"})
            await rename(client, session_uri, "B")
            await client.call("subscribe", {"channel": "ahp-root://"})
            release.set()
            await client.wait_for(titled("B"))
            sent = [n for n in client.notifications if n.get("method") == ROOT_CHANGED]
            assert [n["params"]["changes"]["title"] for n in sent] == ["A", "B"]

    run(host, body)


def test_a_summary_check_in_flight_when_its_session_is_disposed_sends_nothing(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alice's check waits for its answer while she disposes the session and bob
    creates one with the same id: the check must not tell alice of bob's
    session, nor keep bob's own checks from running."""
    real = AsyncSession.view
    held = asyncio.Event()
    release = asyncio.Event()
    hold = [True]

    async def held_back(session: Any, **kwargs: Any) -> Any:
        if hold:  # this check asks only after the dispose
            hold.clear()
            held.set()
            await release.wait()
        return await real(session, **kwargs)

    async def body(server: Server) -> None:
        async with server.client() as alice, server.client(OTHER_TOKEN) as bob:
            await alice.initialize(initialSubscriptions=["ahp-root://"])
            await bob.initialize(client_id="c2", initialSubscriptions=["ahp-root://"])
            uri = "ahp-session:/shared-id"
            await alice.call("createSession", {"channel": uri})
            monkeypatch.setattr(AsyncSession, "view", held_back)
            await rename(alice, uri, "alice's")
            await asyncio.wait_for(held.wait(), 10)
            await alice.call("disposeSession", {"channel": uri})
            await bob.call("createSession", {"channel": uri})
            await rename(bob, uri, "bob's")
            release.set()
            await bob.wait_for(titled("bob's"))
            await alice.call("ping")  # anything sent to alice before this has arrived
            assert not any("bob's" in json.dumps(n) for n in alice.notifications)

    run(host, body)


def test_a_disposed_session_keeps_no_subscribers_for_whoever_reuses_its_id(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as alice, server.client(OTHER_TOKEN) as bob:
            await alice.initialize()
            await bob.initialize(client_id="c2")
            uri = "ahp-session:/shared-id"
            created = await alice.call("createSession", {"channel": uri})
            chat = created["state"]["defaultChat"]
            await alice.call("subscribe", {"channel": chat})
            await alice.call("disposeSession", {"channel": uri})
            await bob.call("createSession", {"channel": uri})
            await bob.dispatch(uri, {"type": "session/titleChanged", "title": "bob's"})
            await bob.wait_for(action_of("session/titleChanged", title="bob's"))
            await alice.call("ping")  # anything sent to alice before this has arrived
            assert not any("bob's" in json.dumps(n) for n in alice.notifications)
            assert not any(a["action"]["type"] == "session/ready" for a in alice.actions(uri)[1:])

    run(host, body)


def fail_once(
    monkeypatch: pytest.MonkeyPatch, call: str, error: Exception, late: bool = False
) -> None:
    """`AsyncChat.<call>`, as the server makes it, raises `error` once, then works.
    With `late` the call still goes ahead, after the caller gave up (the host
    answered after the deadline)."""
    real = getattr(AsyncChat, call)
    errors = [error]
    going_ahead: list[asyncio.Task[Any]] = []

    async def failing(*args: Any, **kwargs: Any) -> Any:
        if errors:
            if late:
                going_ahead.append(asyncio.ensure_future(real(*args, **kwargs)))
            raise errors.pop()
        return await real(*args, **kwargs)

    monkeypatch.setattr(AsyncChat, call, failing)


def start_turn_from_the_host(host: Host, chat: str, turn_id: str) -> None:
    """A turn no client dispatched (its event carries no origin)."""
    chat_id = chat.removeprefix("ahp-chat:/")
    found = host.find_session(chat_id=chat_id)
    assert found is not None
    host.open_session(found.id).chat(chat_id).send("x", turn_id=turn_id)


def turn_ran(turn_id: str) -> Callable[[dict[str, Any]], bool]:
    """The host's chat/turnStarted for `turn_id` (not a rejection's echo)."""
    started = action_of("chat/turnStarted", turnId=turn_id)
    return lambda n: started(n) and "rejectionReason" not in n["params"]


def test_an_action_the_host_answers_late_is_refused_once_and_the_next_one_runs(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A timeout is answered by a rejection that says the host may still act;
    the host did act here, and its turn goes out as its own (no second answer
    to the client's action). The connection goes on."""
    late = TimeoutError("no reply to SendMessage within 10 s")
    fail_once(monkeypatch, "send", late, late=True)

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            first = await client.dispatch(chat, turn("first", "t-1"))
            await client.wait_for(action_of("chat/turnComplete", turnId="t-1"))
            second = await client.dispatch(chat, turn("second", "t-2"))
            await client.wait_for(action_of("chat/turnComplete", turnId="t-2"))
            answers = [n["params"] for n in client.notifications if by_origin(first)(n)]
            assert [a.get("rejectionReason") for a in answers] == [
                "the host did not answer in time (it may still act)"
            ]
            accepted = await client.wait_for(by_origin(second))
            assert "rejectionReason" not in accepted["params"]

    run(host, body)


def test_a_local_command_leaves_no_origin_behind(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            handled = await client.dispatch(chat, turn("/help", "h-1"))
            await client.dispatch(chat, turn("hello", "t-1"))
            await client.wait_for(action_of("chat/turnComplete", turnId="t-1"))
            assert not any(map(by_origin(handled), client.notifications))  # no turn, no echo
            await asyncio.to_thread(start_turn_from_the_host, host, chat, "h-1")
            assert "origin" not in (await client.wait_for(turn_ran("h-1")))["params"]

    run(host, body)


def test_an_action_that_fails_forgets_its_origin(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused, the action is answered by the refusal alone: a later event of
    the same kind carries no stale origin."""
    fail_once(monkeypatch, "send", AgentHostError(code=ErrorCode.STORE_ERROR, message="full"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            refused = await client.dispatch(chat, turn("first", "t-1"))
            rejection = await client.wait_for(by_origin(refused))
            assert rejection["params"]["rejectionReason"] == "full"
            await asyncio.to_thread(start_turn_from_the_host, host, chat, "t-1")
            assert "origin" not in (await client.wait_for(turn_ran("t-1")))["params"]

    run(host, body)


def test_a_chat_channel_that_failed_to_open_is_opened_afresh_by_the_next_subscriber(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_once(monkeypatch, "subscribe", AgentHostError(code=ErrorCode.STORE_ERROR, message="again"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            _, chat = await new_session(client)
            with pytest.raises(RpcFailed):
                await client.call("subscribe", {"channel": chat})
            snapshot = (await client.call("subscribe", {"channel": chat}))["snapshot"]
            assert snapshot["resource"] == chat
            await client.dispatch(chat, turn("hello", "t-1"))
            await client.wait_for(action_of("chat/turnComplete", turnId="t-1"))

    run(host, body)


def test_a_chat_the_server_has_not_seen_loads_only_its_own_session(
    start_host: Callable[..., Host],
) -> None:
    """After a restart a client names a chat: the server finds its session in
    the store and loads that one, not every session of the identity."""
    first = start_host(ScriptedProvider())
    sessions = [first.create_session() for _ in range(3)]
    for session in sessions:
        session.set_config({OWNER_KEY: "alice"})
    chat_id = sessions[1].chat().id
    bobs = first.create_session()
    bobs.set_config({OWNER_KEY: "bob"})
    bobs_chat_id = bobs.chat().id
    first.stop()
    host = start_host(ScriptedProvider())
    found = host.find_session(chat_id=chat_id)
    assert found is not None and found.id == sessions[1].id
    assert dict(found.config) == {OWNER_KEY: "alice"}
    assert host.find_session(chat_id="no-such-chat") is None
    assert host.find_session(sessions[2].id) is not None
    assert host.counters()["resident"] == 0

    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            snapshot = (await client.call("subscribe", {"channel": f"ahp-chat:/{chat_id}"}))[
                "snapshot"
            ]
            assert snapshot["resource"] == f"ahp-chat:/{chat_id}"
            assert (await asyncio.to_thread(host.counters))["resident"] == 1
            with pytest.raises(RpcFailed):  # bob's chat is not alice's to see
                await client.call("subscribe", {"channel": f"ahp-chat:/{bobs_chat_id}"})

    run(host, body)


def test_an_ownership_lookup_that_outlives_a_dispose_leaves_the_id_free(
    start_host: Callable[..., Host], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lookup reads the owner, the session is disposed before the read
    returns: the lookup must not record the old owner for an id that is free."""
    host = start_host(ScriptedProvider())
    session_id = host.create_session().id
    host.open_session(session_id).set_config({OWNER_KEY: "alice"})
    real = AsyncHost.find_session
    reading = asyncio.Event()
    release = asyncio.Event()
    hold = [True]

    async def held_back(*args: Any, **kwargs: Any) -> Any:
        found = await real(*args, **kwargs)
        if hold:
            hold.clear()
            reading.set()
            await release.wait()
        return found

    monkeypatch.setattr(AsyncHost, "find_session", held_back)
    uri = f"ahp-session:/{session_id}"

    async def body(server: Server) -> None:
        async with server.client() as alice, server.client(OTHER_TOKEN) as bob:
            await alice.initialize()
            await bob.initialize(client_id="c2")
            looking = asyncio.ensure_future(bob.call("subscribe", {"channel": uri}))
            await asyncio.wait_for(reading.wait(), 10)  # bob's lookup read alice's session
            await alice.call("disposeSession", {"channel": uri})
            release.set()
            with pytest.raises(RpcFailed):
                await looking
            created = await bob.call("createSession", {"channel": uri})
            assert created["resource"] == uri

    run(host, body)


def test_a_lookup_of_another_identity_s_session_loads_nothing(
    start_host: Callable[..., Host],
) -> None:
    first = start_host(ScriptedProvider())
    session = first.create_session()
    session.set_config({OWNER_KEY: "alice"})
    chat_id = session.chat().id
    first.stop()
    host = start_host(ScriptedProvider())

    async def body(server: Server) -> None:
        async with server.client(OTHER_TOKEN) as bob:
            await bob.initialize(client_id="c2")
            for channel in (f"ahp-session:/{session.id}", f"ahp-chat:/{chat_id}"):
                with pytest.raises(RpcFailed):
                    await bob.call("subscribe", {"channel": channel})
            assert (await asyncio.to_thread(host.counters))["resident"] == 0

    run(host, body)


def test_a_chat_channel_nobody_follows_closes_after_its_grace(host: Host, clock: FakeClock) -> None:
    """Its subscription would keep the session in memory for good; a client
    that comes back gets a fresh snapshot, never a replay with a hole. A chat
    only dispatched to closes too; one followed again in time stays open."""
    grace = Limits().channel_idle_s

    async def channels(server: Server) -> str:
        async with server.http.get(server.url + "metrics") as metrics:
            text = await metrics.text()
        return next(line for line in text.splitlines() if line.startswith("agenthost_chat_"))

    async def after_the_grace(client: AhpClient) -> None:
        clock.advance(grace)
        await client.call("ping")  # the close went through the loop meanwhile

    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize(client_id="phone")
            _, chat = await new_session(client)
            await client.call("subscribe", {"channel": chat})
            await client.dispatch(chat, turn("one", "t1"))
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
            seen = client.actions(chat)[-1]["serverSeq"]
            await client.notify("unsubscribe", {"channel": chat})
            await client.call("ping")
            assert await channels(server) == "agenthost_chat_channels 1"  # in its grace
            await after_the_grace(client)
            assert await channels(server) == "agenthost_chat_channels 0"
            await asyncio.to_thread(start_turn_from_the_host, host, chat, "t2")
            result = await client.call(
                "reconnect",
                {"clientId": "phone", "lastSeenServerSeq": seen, "subscriptions": [chat]},
            )
            assert result["type"] == "snapshot"  # t2 ran while nobody recorded the chat
            state = result["snapshots"][0]["state"]
            active = [state["activeTurn"]["id"]] if state.get("activeTurn") else []
            assert [t["id"] for t in state["turns"]] + active == ["t1", "t2"]

            _, other = await new_session(client)
            await client.call("subscribe", {"channel": other})
            await client.notify("unsubscribe", {"channel": other})
            await client.call("subscribe", {"channel": other})  # followed again in time
            third_uri, third = await new_session(client)
            await client.dispatch(third, turn("unseen", "u1"))  # dispatched to, never followed
            await rename(client, third_uri, "later")  # dispatched after it: it is done
            await after_the_grace(client)
            assert await channels(server) == "agenthost_chat_channels 2"  # chat and other
            for followed in (chat, other):
                await client.notify("unsubscribe", {"channel": followed})
            await client.call("ping")
            await after_the_grace(client)
            assert await channels(server) == "agenthost_chat_channels 0"

    run(host, body)


def test_a_session_the_host_gives_an_owner_later_is_found_for_its_owner(host: Host) -> None:
    session = host.create_session()  # by the embedding host: no owner yet
    uri = f"ahp-session:/{session.id}"

    async def body(server: Server) -> None:
        async with server.client() as alice:
            await alice.initialize()
            with pytest.raises(RpcFailed):
                await alice.call("subscribe", {"channel": uri})
            await asyncio.to_thread(session.set_config, {OWNER_KEY: "alice"})
            snapshot = (await alice.call("subscribe", {"channel": uri}))["snapshot"]
            assert snapshot["resource"] == uri

    run(host, body)


def test_a_lookup_reads_again_only_when_its_own_session_was_disposed(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another session's dispose while a lookup reads does not make it read again
    (any client could otherwise keep every lookup reading)."""
    bobs = host.create_session()
    bobs.set_config({OWNER_KEY: "bob"})  # the server has not seen it: it looks the owner up
    real = AsyncHost.find_session
    reads: list[str | None] = []
    reading = asyncio.Event()
    release = asyncio.Event()

    async def counted(*args: Any, **kwargs: Any) -> Any:
        found = await real(*args, **kwargs)
        reads.append(None if found is None else found.id)
        if len(reads) == 1:
            reading.set()
            await release.wait()
        return found

    async def body(server: Server) -> None:
        async with server.client() as alice, server.client(OTHER_TOKEN) as bob:
            await alice.initialize()
            await bob.initialize(client_id="c2")
            others, _ = await new_session(alice)
            monkeypatch.setattr(AsyncHost, "find_session", counted)
            looking = bob.call("subscribe", {"channel": f"ahp-session:/{bobs.id}"})
            subscribing = asyncio.ensure_future(looking)
            await asyncio.wait_for(reading.wait(), 10)
            await alice.call("disposeSession", {"channel": others})
            release.set()
            await subscribing
            assert reads == [bobs.id]

    run(host, body)


def test_a_message_queued_while_the_chat_is_idle_runs_and_answers_its_action(
    host: Host,
) -> None:
    """AHP: setting a queued message appends it, and a turn started from it
    removes it. On an idle chat it runs at once: its turn names the queued id
    (a client that queued it sees it leave) and answers the action."""

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            queued = {
                "type": "chat/pendingMessageSet",
                "kind": "queued",
                "id": "q1",
                "message": {"text": "now"},
            }
            sent = await client.dispatch(chat, queued)
            answer = (await client.wait_for(by_origin(sent)))["params"]
            assert answer["action"]["type"] == "chat/turnStarted"
            assert answer["action"]["queuedMessageId"] == "q1"
            assert "rejectionReason" not in answer
            turn_id = answer["action"]["turnId"]
            await client.wait_for(action_of("chat/turnComplete", turnId=turn_id))
            state = (await client.call("subscribe", {"channel": chat}))["snapshot"]["state"]
            assert [t["message"]["text"] for t in state["turns"]] == ["now"]
            assert state.get("queuedMessages", []) == []

    run(host, body)
