"""AHP 1.1's windowed delivery (server/windows.py) against a live server: a
subscription that offers flowControl gets its channel as frames, within the
credit it grants, counted in UTF-16 bytes."""

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost.actors import Host
from agenthost.providers.scripted import Say, ScriptedProvider
from agenthost.server.ahp import Limits
from agenthost.server.windows import WindowLimits, fragments, frame_text, utf16_size
from tests.server.ahp_client import AhpClient, Server, action_of, running

CHAT = "ahp-chat:/" + "c" * 36


def run(
    host: Host, body: Callable[[Server], Awaitable[None]], limits: Limits | None = None
) -> None:
    async def main() -> None:
        async with running(host, limits) as server:
            await body(server)

    asyncio.run(main())


def receive(window: int = 1 << 20, frame: int = 16_384, message: int = 4 << 20) -> dict[str, Any]:
    return {
        "receive": {
            "windowBytes": window,
            "maximumFrameBytes": frame,
            "maximumMessageBytes": message,
        }
    }


def turn(text: str, turn_id: str | None = None) -> dict[str, Any]:
    return {
        "type": "chat/turnStarted",
        "turnId": turn_id or uuid.uuid4().hex,
        "message": {"text": text, "origin": {"kind": "user"}},
    }


@attrs.frozen
class Delivered:
    """What one channel's frames carried, in order: a whole logical message
    (`kind` 'message', its text, UTF-16 size and raw frames), or a control."""

    kind: str
    text: str = ""
    size: int = 0
    frames: tuple[str, ...] = ()

    @property
    def message(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.text)
        return parsed


def delivered(client: AhpClient, channel: str) -> list[Delivered]:
    """The channel's frames reassembled, with channel/ready and channel/reset in place."""
    out: list[Delivered] = []
    data: list[str] = []
    raw: list[str] = []
    for note in client.notifications:
        text = getattr(note, "text", "")
        method, params = note.get("method"), note.get("params", {})
        if params.get("channel") != channel:
            continue
        if method == "channel/frame":
            data.append(params["data"])
            raw.append(text)
            if params.get("final"):
                whole = "".join(data)
                out.append(Delivered("message", whole, utf16_size(whole), tuple(raw)))
                data, raw = [], []
        elif method in ("channel/ready", "channel/reset"):
            out.append(Delivered(method))
    return out


def messages(client: AhpClient, channel: str) -> list[Delivered]:
    return [d for d in delivered(client, channel) if d.kind == "message"]


def actions_in(client: AhpClient, channel: str) -> list[dict[str, Any]]:
    return [
        m.message["params"] for m in messages(client, channel) if m.message["method"] == "action"
    ]


async def settled(client: AhpClient) -> None:
    """Everything the server offered this client before now has arrived (its
    outbox is in order: a ping's answer comes behind it)."""
    await client.call("ping")


async def session_with_chat(client: AhpClient) -> tuple[str, str]:
    uri = f"ahp-session:/{uuid.uuid4()}"
    created = await client.call("createSession", {"channel": uri})
    return uri, created["state"]["defaultChat"]


async def credit_all(client: AhpClient, channel: str) -> int:
    consumed = sum(m.size for m in messages(client, channel))
    await client.notify("channel/credit", {"channel": channel, "consumedBytes": consumed})
    return consumed


# -- frames, counted ------------------------------------------------------------------


def test_utf16_size_counts_code_units_twice_so_an_emoji_takes_four_bytes() -> None:
    assert utf16_size("ab") == 4
    assert utf16_size("é") == 2
    assert utf16_size("😀") == 4  # a surrogate pair
    assert utf16_size("中文") == 4


@settings(max_examples=200, deadline=None)
@given(text=st.text(min_size=1, max_size=400), limit=st.integers(min_value=320, max_value=800))
def test_fragments_fit_the_frame_limit_as_sent_and_rejoin_to_the_text(
    text: str, limit: int
) -> None:
    frames = fragments(CHAT, text, limit)
    assert "".join(f["params"]["data"] for f in frames) == text
    assert all(f["params"]["data"] for f in frames)  # never empty
    assert all(utf16_size(frame_text(f)) <= limit for f in frames)
    assert [f["params"].get("final", False) for f in frames] == [False] * (len(frames) - 1) + [True]
    for frame in frames:  # a surrogate pair is never cut: each fragment is valid UTF-16
        frame["params"]["data"].encode("utf-16-le")


def test_fragments_fill_each_frame_as_far_as_the_limit_allows() -> None:
    text = "x" * 1000
    frames = fragments(CHAT, text, 500)
    sizes = [utf16_size(frame_text(f)) for f in frames]
    assert all(size > 500 - 4 for size in sizes[:-1])  # one more character would not fit


# -- subscribe ------------------------------------------------------------------------


def test_a_windowed_subscribe_answers_the_limits_then_frames_the_snapshot_then_ready(
    host: Host,
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            _, chat = await session_with_chat(client)
            result = await client.call(
                "subscribe", {"channel": chat, "flowControl": receive(window=8192, frame=4096)}
            )
            assert "snapshot" not in result
            flow = result["flowControl"]
            assert flow["clientReceive"] == receive(window=8192, frame=4096)["receive"]
            assert set(flow["hostReceive"]) == {
                "windowBytes",
                "maximumFrameBytes",
                "maximumMessageBytes",
            }
            await client.wait_for(lambda n: n.get("method") == "channel/ready")
            first, ready = delivered(client, chat)
            assert first.message["method"] == "channel/snapshot"
            assert first.message["params"]["snapshot"]["resource"] == chat
            assert first.message["params"]["snapshot"]["state"]["turns"] == []
            assert ready.kind == "channel/ready"
            # the answer came before any frame of the channel
            answered = client.answered_at  # the subscribe's answer: the latest
            framed = next(n for n in client.notifications if "frame" in n["method"])
            assert answered < getattr(framed, "order", -1)

    run(host, body)


def test_an_ordinary_subscribe_replaces_a_windowed_one(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            _, chat = await session_with_chat(client)
            await client.call("subscribe", {"channel": chat, "flowControl": receive()})
            result = await client.call("subscribe", {"channel": chat})
            assert result["snapshot"]["resource"] == chat
            await client.dispatch(chat, turn("plain", "t1"))
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
            assert not actions_in(client, chat)  # none of it in frames

    run(host, body)


def test_a_client_of_protocol_1_0_offering_flow_control_gets_ordinary_delivery(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.call(
                "initialize",
                {"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": "old"},
            )
            _, chat = await session_with_chat(client)
            result = await client.call("subscribe", {"channel": chat, "flowControl": receive()})
            assert "flowControl" not in result and result["snapshot"]["resource"] == chat

    run(host, body)


def test_a_frame_limit_too_small_to_carry_data_is_refused_naming_it(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            _, chat = await session_with_chat(client)
            response = await client.response(
                await _send(
                    client, "subscribe", {"channel": chat, "flowControl": receive(frame=64)}
                )
            )
            assert response["error"]["code"] == -32602
            assert "maximumFrameBytes" in response["error"]["message"]

    run(host, body)


async def _send(client: AhpClient, method: str, params: dict[str, Any]) -> int:
    request_id = 10_000 + len(client.notifications)
    await client.ws.send_json(
        {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    )
    return request_id


# -- the window -------------------------------------------------------------------------


def test_the_window_is_honoured_to_the_byte_and_credit_resumes_delivery_in_order(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("burst", *(Say(f"{i} ") for i in range(60)))
    window = 3000

    async def body(server: Server) -> None:
        async with server.client() as slow, server.client() as fast:
            await slow.initialize(client_id="slow")
            await fast.initialize(client_id="fast")
            _, chat = await session_with_chat(fast)
            await slow.call("subscribe", {"channel": chat, "flowControl": receive(window=window)})
            await fast.call("subscribe", {"channel": chat})
            await slow.wait_for(lambda n: n.get("method") == "channel/ready")
            await fast.dispatch(chat, turn("burst", "t1"))
            # the slow client grants nothing: the other's turn runs to its end regardless
            await fast.wait_for(action_of("chat/turnComplete", turnId="t1"))
            await settled(slow)
            sizes = [m.size for m in messages(slow, chat)]
            assert sum(sizes[:-1]) < window <= sum(sizes)  # the last one started below the window
            assert not any(
                a["action"]["type"] == "chat/turnComplete" for a in actions_in(slow, chat)
            )
            while not any(
                a["action"]["type"] == "chat/turnComplete" for a in actions_in(slow, chat)
            ):
                before = len(messages(slow, chat))
                await credit_all(slow, chat)
                await slow.wait_until(lambda n=before: len(messages(slow, chat)) > n)
                await settled(slow)
                granted = sum(m.size for m in messages(slow, chat)[:before])
                started = [m.size for m in messages(slow, chat)[before:]]
                assert sum(started[:-1]) < window  # none started at or past the window
                if not any(
                    a["action"]["type"] == "chat/turnComplete" for a in actions_in(slow, chat)
                ):
                    assert sum(started) >= window, (granted, started)
            got = actions_in(slow, chat)
            await settled(fast)
            seen = fast.actions(chat)
            assert [a["serverSeq"] for a in got] == [a["serverSeq"] for a in seen]
            assert [a["action"] for a in got] == [a["action"] for a in seen]
            assert not slow.actions(chat)  # nothing came outside the frames

    run(host, body)


def test_unicode_text_is_split_across_frames_within_the_frame_limit(
    host: Host, provider: ScriptedProvider
) -> None:
    reply = '😀 中文 "quoted" back\\slash é ' * 40
    provider.on("unicode", Say(reply))
    limit = 600

    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            _, chat = await session_with_chat(client)
            await client.call("subscribe", {"channel": chat, "flowControl": receive(frame=limit)})
            await client.dispatch(chat, turn("unicode", "t1"))
            await client.wait_until(
                lambda: any(
                    a["action"]["type"] == "chat/turnComplete" for a in actions_in(client, chat)
                )
            )
            deltas = [
                (m, m.message["params"]["action"])
                for m in messages(client, chat)
                if m.message["method"] == "action"
                and m.message["params"]["action"]["type"] == "chat/delta"
            ]
            assert "".join(a["content"] for _, a in deltas) == reply
            split = [m for m, _ in deltas if len(m.frames) > 1]
            assert split, "the reply's delta crossed several frames"
            for message in messages(client, chat):
                for raw in message.frames:
                    assert utf16_size(raw) <= limit
                    json.loads(raw)["params"]["data"].encode("utf-16-le")  # whole pairs only

    run(host, body)


# -- reset ------------------------------------------------------------------------------


def test_a_client_that_never_grants_credit_is_reset_at_the_queue_bound_and_slows_nobody(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("burst", *(Say("x" * 200) for _ in range(100)))
    limits = Limits(windows=WindowLimits(queue_bytes=20_000))

    async def body(server: Server) -> None:
        async with server.client() as stuck, server.client() as other:
            await stuck.initialize(client_id="stuck")
            await other.initialize(client_id="other")
            _, chat = await session_with_chat(other)
            await stuck.call("subscribe", {"channel": chat, "flowControl": receive(window=1)})
            await other.call("subscribe", {"channel": chat})
            await other.dispatch(chat, turn("burst", "t1"))
            await other.wait_for(action_of("chat/turnComplete", turnId="t1"))
            await stuck.wait_for(lambda n: n.get("method") == "channel/reset")
            kinds = [d.kind for d in delivered(stuck, chat)]
            # the snapshot alone took the one-byte window: nothing else started
            assert kinds == ["message", "channel/ready", "channel/reset"]
            # the subscription ended: the next turn sends it nothing
            await other.dispatch(chat, turn("again", "t2"))
            await other.wait_for(action_of("chat/turnComplete", turnId="t2"))
            await settled(stuck)
            assert [d.kind for d in delivered(stuck, chat)] == kinds
            metrics = await (await server.http.get(server.url + "metrics")).text()
            assert "agenthost_window_resets_total 1" in metrics

    run(host, body, limits)


def test_credit_inside_a_message_or_beyond_what_was_sent_resets_the_subscription(
    host: Host,
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            _, chat = await session_with_chat(client)
            for consumed in (1, 10**9):
                await client.call("subscribe", {"channel": chat, "flowControl": receive()})
                await client.wait_until(
                    lambda: [d.kind for d in delivered(client, chat)][-1:] == ["channel/ready"]
                )
                await client.notify("channel/credit", {"channel": chat, "consumedBytes": consumed})
                await client.wait_until(
                    lambda: [d.kind for d in delivered(client, chat)][-1:] == ["channel/reset"]
                )
            # an older or repeated credit is harmless
            await client.call("subscribe", {"channel": chat, "flowControl": receive()})
            await client.wait_until(
                lambda: [d.kind for d in delivered(client, chat)][-1:] == ["channel/ready"]
            )
            snapshot = messages(client, chat)[-1].size
            for consumed in (snapshot, snapshot, 0):
                await client.notify("channel/credit", {"channel": chat, "consumedBytes": consumed})
            await settled(client)
            assert [d.kind for d in delivered(client, chat)][-1] == "channel/ready"

    run(host, body)


def test_a_message_over_the_client_s_maximum_is_a_reset_not_a_cut(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("big", Say("y" * 5000))

    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            _, chat = await session_with_chat(client)
            await client.call("subscribe", {"channel": chat, "flowControl": receive(message=4000)})
            await client.dispatch(chat, turn("big", "t1"))
            await client.wait_for(lambda n: n.get("method") == "channel/reset")
            assert all(m.size <= 4000 for m in messages(client, chat))

    run(host, body)


# -- the session channel, and what a client sends in frames --------------------------


def test_a_session_channel_is_windowed_too(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            uri, _ = await session_with_chat(client)
            await client.call("subscribe", {"channel": uri, "flowControl": receive()})
            plain = len(client.actions(uri))  # session/ready, before the windowed subscribe
            await client.wait_until(
                lambda: [d.kind for d in delivered(client, uri)][-1:] == ["channel/ready"]
            )
            assert messages(client, uri)[0].message["params"]["snapshot"]["resource"] == uri
            await client.dispatch(uri, {"type": "session/titleChanged", "title": "framed"})
            await client.wait_until(
                lambda: any(
                    a["action"] == {"type": "session/titleChanged", "title": "framed"}
                    for a in actions_in(client, uri)
                )
            )
            assert len(client.actions(uri)) == plain

    run(host, body)


def test_a_dispatch_sent_in_frames_runs_and_is_credited_back(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize(client_id="framer")
            _, chat = await session_with_chat(client)
            result = await client.call("subscribe", {"channel": chat, "flowControl": receive()})
            limit = result["flowControl"]["hostReceive"]["maximumFrameBytes"]
            text = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "dispatchAction",
                    "params": {"channel": chat, "clientSeq": 1, "action": turn("hi 😀", "t1")},
                },
                ensure_ascii=False,
            )
            pieces = fragments(chat, text, min(limit, 400))
            assert len(pieces) > 1
            for piece in pieces:
                await client.notify("channel/frame", piece["params"])
            credit = await client.wait_for(lambda n: n.get("method") == "channel/credit")
            assert credit["params"] == {"channel": chat, "consumedBytes": utf16_size(text)}
            await client.wait_until(
                lambda: any(
                    a["action"]["type"] == "chat/turnComplete" for a in actions_in(client, chat)
                )
            )
            started = next(
                a for a in actions_in(client, chat) if a["action"]["type"] == "chat/turnStarted"
            )
            assert started["origin"] == {"clientId": "framer", "clientSeq": 1}

    run(host, body)


# -- reconnect ------------------------------------------------------------------------


def test_a_reconnect_resumes_a_window_from_the_applied_checkpoint_with_fresh_credit(
    host: Host, provider: ScriptedProvider
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as other:
            await other.initialize(client_id="other")
            _, chat = await session_with_chat(other)
            await other.call("subscribe", {"channel": chat})
            async with server.client() as first:
                await first.initialize(client_id="phone")
                flow = (await first.call("subscribe", {"channel": chat, "flowControl": receive()}))[
                    "flowControl"
                ]
                await other.dispatch(chat, turn("one", "t1"))
                await first.wait_until(
                    lambda: any(
                        a["action"]["type"] == "chat/turnComplete" for a in actions_in(first, chat)
                    )
                )
                applied = actions_in(first, chat)[-1]["serverSeq"]
            await other.dispatch(chat, turn("two", "t2"))  # missed while away
            await other.wait_for(action_of("chat/turnComplete", turnId="t2"))
            async with server.client() as again:
                result = await again.call(
                    "reconnect",
                    {
                        "clientId": "phone",
                        "lastSeenServerSeq": applied,
                        "subscriptions": [chat, "ahp-chat:/never-windowed"],
                        "windows": {
                            "items": [
                                {"channel": chat, "lastAppliedServerSeq": applied},
                                {"channel": "ahp-chat:/never-windowed"},
                            ]
                        },
                    },
                )
                assert result["type"] == "replay"
                assert not any(a["channel"] == chat for a in result["actions"])  # not inline
                assert result["windows"] == {
                    "items": [{"channel": chat, "flowControl": flow, "recovery": "replay"}]
                }
                await again.wait_until(
                    lambda: [d.kind for d in delivered(again, chat)][-1:] == ["channel/ready"]
                )
                replayed = actions_in(again, chat)
                await settled(other)  # all it was sent before the replay was taken has come
                missed = [a for a in other.actions(chat) if a["serverSeq"] > applied]
                assert [a["serverSeq"] for a in replayed] == [a["serverSeq"] for a in missed]
                # fresh counters: credit for what this transport carried resumes it
                await credit_all(again, chat)
                await other.dispatch(chat, turn("three", "t3"))
                await again.wait_until(
                    lambda: any(
                        a["action"]["type"] == "chat/turnComplete"
                        and a["action"].get("turnId") == "t3"
                        for a in actions_in(again, chat)
                    )
                )
            async with server.client() as fresh:
                result = await fresh.call(
                    "reconnect",
                    {
                        "clientId": "phone",
                        "lastSeenServerSeq": 0,
                        "subscriptions": [chat],
                        "windows": {"items": [{"channel": chat}]},  # no checkpoint: a snapshot
                    },
                )
                assert result["windows"]["items"][0]["recovery"] == "snapshot"
                await fresh.wait_until(
                    lambda: "channel/ready" in [d.kind for d in delivered(fresh, chat)]
                )
                snapshot = messages(fresh, chat)[0].message
                assert snapshot["method"] == "channel/snapshot"
                texts = [
                    t["message"]["text"] for t in snapshot["params"]["snapshot"]["state"]["turns"]
                ]
                assert texts == ["one", "two", "three"]

    run(host, body)


def test_a_reconnect_while_the_old_connection_is_open_takes_its_window_over(host: Host) -> None:
    async def body(server: Server) -> None:
        async with server.client() as old, server.client() as new:
            await old.initialize(client_id="laptop")
            _, chat = await session_with_chat(old)
            flow = (await old.call("subscribe", {"channel": chat, "flowControl": receive()}))[
                "flowControl"
            ]
            await old.wait_until(
                lambda: [d.kind for d in delivered(old, chat)][-1:] == ["channel/ready"]
            )
            result = await new.call(
                "reconnect",
                {
                    "clientId": "laptop",
                    "lastSeenServerSeq": 0,
                    "subscriptions": [chat],
                    "windows": {"items": [{"channel": chat}]},
                },
            )
            assert result["windows"]["items"] == [
                {"channel": chat, "flowControl": flow, "recovery": "snapshot"}
            ]
            await new.dispatch(chat, turn("hello", "t1"))
            await new.wait_until(
                lambda: any(
                    a["action"]["type"] == "chat/turnComplete" for a in actions_in(new, chat)
                )
            )
            await settled(old)
            assert not actions_in(old, chat) and not old.actions(chat)  # the old one ended

    run(host, body)


def test_a_large_message_s_frames_take_turns_with_another_channel_and_never_fill_the_outbox(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("long", Say("z" * 1_000_000))
    limits = Limits(outbox=100)  # the snapshot's 1,500 frames at once would cut the client off

    async def body(server: Server) -> None:
        async with server.client() as writer, server.client() as reader:
            await writer.initialize(client_id="writer")
            session, chat = await session_with_chat(writer)
            await writer.call("subscribe", {"channel": chat})
            await writer.dispatch(chat, turn("long", "t1"))
            await writer.wait_for(action_of("chat/turnComplete", turnId="t1"))
            await reader.initialize(client_id="reader")
            await asyncio.gather(  # both sent at once: the second answered while the first streams
                reader.call("subscribe", {"channel": chat, "flowControl": receive(frame=1500)}),
                reader.call("subscribe", {"channel": session, "flowControl": receive()}),
            )
            await reader.wait_until(
                lambda: "channel/ready" in [d.kind for d in delivered(reader, chat)]
            )
            big = messages(reader, chat)[0]
            assert big.message["method"] == "channel/snapshot" and len(big.frames) > 1_000
            turns = big.message["params"]["snapshot"]["state"]["turns"]
            assert turns[0]["responseParts"][0]["content"] == "z" * 1_000_000
            order = [
                (n["params"]["channel"], n["params"].get("final", False))
                for n in reader.notifications
                if n.get("method") == "channel/frame"
            ]
            session_done = order.index((session, True))
            chat_done = order.index((chat, True))
            assert session_done < chat_done  # the small snapshot did not wait for the large one

    run(host, body, limits)
