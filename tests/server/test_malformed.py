"""Malformed input against a live server (`serve` on loopback): every frame
gets its JSON-RPC answer, and the connection still answers `ping` after it.

Hypothesis generates the frames: a wrong type for each field of each method
(requests, notifications, and each action a client may dispatch), nesting past
the depth limit, NaN and Infinity, ids JSON-RPC does not allow, and binary
frames. One server and one initialized connection serve every example, on a
loop thread of their own; each example sends its frame and then a ping, and
reads what came back before the ping's answer.
"""

import asyncio
import enum
import json
import threading
import types
import typing
from collections.abc import Iterator
from typing import Any

import aiohttp
import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from agenthost.actors import Host
from agenthost.messages import protocol as p
from agenthost.messages import rpc
from agenthost.messages.fields import WIRE_NAME, Json
from agenthost.messages.state import PendingMessage
from agenthost.messages.wire import camel
from agenthost.server.actions import CHAT_ACTIONS, SESSION_ACTIONS
from agenthost.server.ahp import Limits
from agenthost.server.requests import NOTIFICATIONS, REQUESTS
from agenthost.server.serve import ServeConfig, serve
from tests.server.ahp_client import TOKEN, TOKENS, WAIT_S

ROOT = "ahp-root://"
SESSION = "ahp-session:/nobody"
CHAT = "ahp-chat:/nobody"

BASE_PARAMS: dict[str, dict[str, Any]] = {
    "initialize": {"channel": ROOT, "clientId": "prop", "protocolVersions": ["1.1.0"]},
    "ping": {},
    "reconnect": {"clientId": "prop", "lastSeenServerSeq": 0, "subscriptions": []},
    "subscribe": {"channel": CHAT},
    "createSession": {"channel": SESSION},
    "disposeSession": {"channel": SESSION},
    "createChat": {"channel": SESSION},
    "disposeChat": {"channel": CHAT},
    "listSessions": {},
    "fetchTurns": {"channel": CHAT},
    "authenticate": {"resource": "https://api", "token": "t"},
    "completions": {"channel": CHAT, "kind": "text", "text": "/", "offset": 1},
    "resolveSessionConfig": {},
    "sessionConfigCompletions": {"property": "model"},
    "unsubscribe": {"channel": CHAT},
    "dispatchAction": {"channel": CHAT, "clientSeq": 1, "action": {"type": "chat/truncated"}},
    "channel/frame": {"channel": CHAT, "data": ""},
    "channel/credit": {"channel": CHAT, "consumedBytes": 0},
    "channel/reset": {"channel": CHAT},
}
"""Valid params of every method (a channel nobody has): one field is made wrong."""

BASE_ACTIONS: dict[str, dict[str, Any]] = {
    "chat/turnStarted": {"turnId": "t", "message": {"text": "x"}},
    "chat/turnCancelled": {"turnId": "t"},
    "chat/pendingMessageSet": {"kind": "queued", "id": "q", "message": {"text": "x"}},
    "chat/pendingMessageRemoved": {"kind": "queued", "id": "q"},
    "chat/queuedMessagesReordered": {"order": []},
    "chat/truncated": {},
    "chat/toolCallConfirmed": {"turnId": "t", "toolCallId": "c", "approved": True},
    "chat/toolCallComplete": {"turnId": "t", "toolCallId": "c"},
    "chat/inputCompleted": {"requestId": "r", "response": "accept"},
    "chat/draftChanged": {},
    "chat/toolCallResultConfirmed": {"turnId": "t", "toolCallId": "c", "approved": True},
    "chat/toolCallContentChanged": {"turnId": "t", "toolCallId": "c", "content": []},
    "chat/inputAnswerChanged": {"requestId": "r", "questionId": "q"},
    "chat/turnResume": {"turnId": "t"},
    "chat/isReadChanged": {"isRead": True},
    "chat/isArchivedChanged": {"isArchived": True},
    "session/titleChanged": {"title": "x"},
    "session/isReadChanged": {"isRead": True},
    "session/isArchivedChanged": {"isArchived": True},
    "session/configChanged": {"config": {}},
    "session/customizationToggled": {"id": "mark_unread", "enabled": False},
    "session/activeClientSet": {"activeClient": {"clientId": "c", "tools": []}},
    "session/activeClientRemoved": {"clientId": "c"},
}
"""Valid actions of every type a client may dispatch."""

ROUTING = ("session_id", "chat_id")  # the host's own ids, never on AHP's wire


# -- a wrong value for a type -------------------------------------------------------------
def _not_none(t: Any) -> Any:
    args = [a for a in typing.get_args(t) if a is not type(None)]
    return args[0] if len(args) == 1 else t


def _is_union(t: Any) -> bool:
    return typing.get_origin(t) in (typing.Union, types.UnionType)


def wrong_for(t: Any) -> st.SearchStrategy[Any] | None:
    """JSON values that are not a `t` (None where anything fits, as Json)."""
    t = _not_none(t)
    small_int = st.integers(-5, 5)
    scalars_not_str = st.one_of(small_int, st.booleans(), st.just(1.5))
    containers = st.one_of(st.just([]), st.just([1]), st.just({}), st.just({"k": 1}))
    if t is Json or (_is_union(t) and Json in typing.get_args(t)):
        return None
    if t is str or (isinstance(t, type) and issubclass(t, enum.StrEnum)):
        return st.one_of(scalars_not_str, containers)
    if t is bool:
        return st.one_of(small_int, st.just("yes"), st.just(1.5), containers)
    if t is int or (isinstance(t, type) and issubclass(t, enum.IntEnum | enum.IntFlag)):
        return st.one_of(st.just("3"), st.booleans(), st.just(1.5), containers)
    if typing.get_origin(t) is tuple:
        return st.one_of(st.just("abc"), small_int, st.booleans())
    if _is_union(t):  # int | str, str | an object, ...: an array is none of them
        return st.one_of(st.just([1]), st.just([]), st.booleans(), st.just(1.5))
    if attrs.has(t):
        return st.one_of(st.just("x"), small_int, st.booleans(), st.just([1]))
    return None


def wire_fields(cls: type) -> list[tuple[str, Any]]:
    """(wire name, type) of each field of a params or action class."""
    hints = typing.get_type_hints(cls)
    return [
        (f.metadata.get(WIRE_NAME) or camel(f.name), hints[f.name])
        for f in attrs.fields(cls)
        if f.name not in ROUTING and f.name != "type"
    ]


def _params_class(method: str) -> type:
    if method == "reconnect":
        return p.ConnectionReconnectParams
    if method in rpc.CLIENT_REQUESTS:
        return typing.cast(type, rpc.CLIENT_REQUESTS[method].params)
    return typing.cast(type, rpc.CLIENT_NOTIFICATIONS[method])


@attrs.frozen
class Wrong:
    """One field of one method with a value of the wrong type."""

    method: str
    field: str
    params: dict[str, Any]


def _wrong_params() -> st.SearchStrategy[Wrong]:
    cases = []
    for method, base in BASE_PARAMS.items():
        for name, t in wire_fields(_params_class(method)):
            values = wrong_for(t)
            if values is not None and name != "action":
                cases.append(
                    values.map(
                        lambda v, m=method, n=name, b=base: Wrong(
                            method=m, field=n, params={**b, n: v}
                        )
                    )
                )
    return st.one_of(cases)


def _action_class(kind: str) -> type:
    return next(c for c in (*CHAT_ACTIONS, *SESSION_ACTIONS) if c.wire_type == kind)


def _wrong_actions() -> st.SearchStrategy[Wrong]:
    cases = []
    for kind, base in BASE_ACTIONS.items():
        cls = _action_class(kind)
        fields = (
            wire_fields(PendingMessage) if kind == "chat/pendingMessageSet" else wire_fields(cls)
        )
        for name, t in fields:
            values = wrong_for(t)
            if values is not None:
                cases.append(
                    values.map(
                        lambda v, k=kind, n=name, b=base: Wrong(
                            method="dispatchAction", field=n, params={"type": k, **b, n: v}
                        )
                    )
                )
    return st.one_of(cases)


def test_every_client_action_and_method_has_a_valid_base_here() -> None:
    """The strategies cover what the server takes: a new method or action needs a base."""
    assert set(rpc.CLIENT_REQUESTS) | set(rpc.CLIENT_NOTIFICATIONS) == set(BASE_PARAMS)
    assert {c.wire_type for c in (*CHAT_ACTIONS, *SESSION_ACTIONS)} == set(BASE_ACTIONS)
    for method, params in BASE_PARAMS.items():
        rpc.decode_params(method, params)


# -- the live server ----------------------------------------------------------------------
class LiveConnection:
    """`serve` on loopback and one initialized connection, on a loop thread;
    `exchange` blocks the test's thread until the ping after its frame is answered."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._stop = asyncio.Event()
        self._ids = iter(range(1_000_000, 2_000_000))

    def __enter__(self) -> "LiveConnection":
        self._thread.start()
        self._call(self._open())
        return self

    def __exit__(self, *exc: object) -> None:
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(WAIT_S)
        self._loop.close()

    def _call(self, work: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(WAIT_S * 2)

    async def _open(self) -> None:
        ready: asyncio.Future[str] = self._loop.create_future()
        limits = Limits(rate=100_000.0, burst=100_000)
        config = ServeConfig(port=0, drain_s=1.0, limits=limits)
        self._server = self._loop.create_task(
            serve(self._host, TOKENS, config, ready=ready.set_result, stop=self._stop)
        )
        url = await asyncio.wait_for(ready, WAIT_S)
        self._http = aiohttp.ClientSession()
        self._ws = await self._http.ws_connect(
            url.replace("http", "ws", 1) + "ahp", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        answer = await self._roundtrip(json.dumps(BASE_FRAME), 0)
        assert "result" in answer[-1], answer

    async def _close(self) -> None:
        await self._ws.close()
        await self._http.close()
        self._stop.set()
        await asyncio.wait_for(self._server, WAIT_S)

    async def _roundtrip(
        self, frame: str | bytes, ping_id: int, answer_id: Any = 1
    ) -> list[dict[str, Any]]:
        if isinstance(frame, bytes):
            await self._ws.send_bytes(frame)
        else:
            await self._ws.send_str(frame)
        if ping_id:
            await self._ws.send_json({"jsonrpc": "2.0", "id": ping_id, "method": "ping"})
        received = []
        async with asyncio.timeout(WAIT_S):
            while True:
                message = await self._ws.receive()
                assert message.type is aiohttp.WSMsgType.TEXT, f"the socket went: {message}"
                received.append(json.loads(message.data))
                if (
                    received[-1].get("id") == (ping_id or answer_id)
                    and "method" not in received[-1]
                ):
                    return received

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The answer to a request (other frames before it are dropped)."""
        received = self._call(self._roundtrip(json.dumps(request), 0, request["id"]))
        return typing.cast(dict[str, Any], received[-1])

    def exchange(self, frame: str | bytes) -> list[dict[str, Any]]:
        """What the server sent after `frame`, up to the answer to the ping behind it."""
        ping_id = next(self._ids)
        received = self._call(self._roundtrip(frame, ping_id))
        assert received[-1].get("result", "missing") is None, received[-1]
        return received[:-1]


BASE_FRAME = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": BASE_PARAMS["initialize"],
}


@pytest.fixture
def live(host: Host) -> Iterator[LiveConnection]:
    with LiveConnection(host) as connection:
        yield connection


def errors(received: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in received if "error" in m]


PROPERTY = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY
@given(wrong=_wrong_params())
def test_a_wrong_type_for_any_field_of_any_method_is_answered_naming_it(
    live: LiveConnection, wrong: Wrong
) -> None:
    request = wrong.method in rpc.CLIENT_REQUESTS
    frame: dict[str, Any] = {"jsonrpc": "2.0", "method": wrong.method, "params": wrong.params}
    if request:
        frame["id"] = "bad"
    received = live.exchange(json.dumps(frame))
    if request and wrong.method not in REQUESTS:
        assert [e["error"]["code"] for e in errors(received)] == [-32601]  # not offered
        return
    if not request and wrong.method not in NOTIFICATIONS:
        assert received == []  # a notification this server does not take: not answered
        return
    [answer] = errors(received)
    assert answer["id"] == ("bad" if request else None)
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"]["field"].startswith(wrong.field), answer


@PROPERTY
@given(wrong=_wrong_actions())
def test_a_dispatched_action_with_a_wrong_field_is_echoed_naming_it(
    live: LiveConnection, wrong: Wrong
) -> None:
    params = {"channel": CHAT, "clientSeq": 7, "action": wrong.params}
    frame = {"jsonrpc": "2.0", "method": "dispatchAction", "params": params}
    [echo] = live.exchange(json.dumps(frame))
    assert echo["method"] == "action"
    assert echo["params"]["action"] == wrong.params
    assert echo["params"]["origin"] == {"clientId": "prop", "clientSeq": 7}
    reason = echo["params"]["rejectionReason"]
    assert reason.startswith("invalid action: 'action.") and wrong.field in reason, reason


def _deep(depth: int, opener: str) -> str:
    closer = "]" if opener == "[" else "}"
    inner = "[" if opener == "[" else '{"a":'
    return inner * depth + "1" + closer * depth


def _frame(request_id: str, method: str = "ping", params: str | None = None) -> str:
    """A frame's text with its id and params as given (not necessarily JSON)."""
    rest = "" if params is None else ',"params":' + params
    return '{"jsonrpc":"2.0","id":' + request_id + ',"method":"' + method + '"' + rest + "}"


unreadable = st.one_of(
    st.builds(  # nesting past the limit, in params or as the id
        lambda depth, opener, where: (
            _frame("3", params='{"x":' + _deep(depth, opener) + "}")
            if where
            else _frame(_deep(depth, opener))
        ),
        st.integers(65, 3000),
        st.sampled_from("[{"),
        st.booleans(),
    ).map(lambda text: (text, -32600)),
    st.builds(  # NaN and Infinity are not JSON, as the id or anywhere in the params
        lambda constant, where: (
            _frame(constant) if where else _frame("4", "listSessions", '{"limit":' + constant + "}")
        ),
        st.sampled_from(["NaN", "Infinity", "-Infinity"]),
        st.booleans(),
    ).map(lambda text: (text, -32700)),
    st.one_of(st.booleans(), st.just(1.5), st.just([1]), st.just({}), st.none())
    .map(lambda bad_id: json.dumps({"jsonrpc": "2.0", "id": bad_id, "method": "ping"}))
    .map(lambda text: (text, -32600)),
    st.binary(max_size=64).map(lambda data: (data, -32600)),
    st.sampled_from(["", "{", "[1,", "not json", '{"jsonrpc":"2.0","id":5,']).map(
        lambda text: (text, -32700)
    ),
    st.sampled_from(["[]", "1", '"x"', "{}", '{"jsonrpc":"1.0","id":6,"method":"ping"}']).map(
        lambda text: (text, -32600)
    ),
)


@PROPERTY
@given(case=unreadable)
def test_a_frame_that_cannot_be_read_is_answered_with_a_null_id(
    live: LiveConnection, case: tuple[str | bytes, int]
) -> None:
    frame, code = case
    [answer] = errors(live.exchange(frame))
    assert (answer["id"], answer["error"]["code"]) == (None, code)


def test_json_nested_a_thousand_deep_is_refused_without_a_traceback(live: LiveConnection) -> None:
    frame = '{"jsonrpc":"2.0","id":8,"method":"ping","params":' + "[" * 1000 + "]" * 1000 + "}"
    assert len(frame) < 2100
    with capture_logs() as logs:
        [answer] = errors(live.exchange(frame))
    assert answer["error"]["code"] == -32600
    assert not [entry for entry in logs if entry.get("exc_info") or entry["log_level"] == "error"]


def test_a_request_id_that_is_nan_is_never_echoed(live: LiveConnection) -> None:
    [answer] = errors(live.exchange('{"jsonrpc":"2.0","id":NaN,"method":"ping"}'))
    assert answer["id"] is None and answer["error"]["code"] == -32700


def test_a_readable_id_of_an_unreadable_request_is_answered_with_it(live: LiveConnection) -> None:
    [answer] = errors(live.exchange('{"jsonrpc":"2.0","id":"r1","method":7}'))
    assert (answer["id"], answer["error"]["code"]) == ("r1", -32600)


def test_older_clients_forms_are_still_taken(live: LiveConnection) -> None:
    """The singular protocolVersion of older clients, and keys this server does not know."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "initialize",
        "params": {"clientId": "prop", "protocolVersion": "1.1.0", "someday": {"x": 1}},
        "extra": True,
    }
    assert live.answer(initialize)["result"]["protocolVersion"] == "1.1.0"
