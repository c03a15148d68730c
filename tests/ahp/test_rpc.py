"""The JSON-RPC side of AHP (messages/rpc.py): every method's typed params,
errors that name the offending field, and frames refused before they cost
anything (NaN, Infinity, nesting too deep)."""

import json

import pytest

from agenthost.messages import protocol as p
from agenthost.messages import rpc
from agenthost.messages.common import ProtectedResourceMetadata
from agenthost.messages.errors import JsonRpcErrorCode, ValidationError
from agenthost.messages.events import TurnStarted
from agenthost.messages.parts import UserMessage
from agenthost.messages.wire import to_wire

SESSION = "ahp-session:/s1"
CHAT = "ahp-chat:/c1"

PARAMS = [
    (
        "initialize",
        {"channel": "ahp-root://", "clientId": "k", "protocolVersions": ["1.1.0"], "locale": "en"},
        p.InitializeParams,
    ),
    ("ping", None, p.PingParams),
    (
        "reconnect",
        {
            "channel": "ahp-root://",
            "clientId": "k",
            "lastSeenServerSeq": 3,
            "subscriptions": [CHAT],
        },
        p.ConnectionReconnectParams,
    ),
    (
        "reconnect",
        {
            "channel": "ahp-root://",
            "clientId": "k",
            "subscriptions": [{"channel": CHAT, "lastSeenServerSeq": 3}],
        },
        p.ChannelReconnectParams,
    ),
    ("subscribe", {"channel": CHAT, "view": {"turns": 20}}, p.SubscribeParams),
    ("unsubscribe", {"channel": CHAT}, p.UnsubscribeParams),
    ("createSession", {"channel": SESSION, "provider": "scripted"}, p.CreateSessionParams),
    ("disposeSession", {"channel": SESSION}, p.DisposeSessionParams),
    ("createChat", {"channel": SESSION, "chat": CHAT, "title": "Side"}, p.CreateChatParams),
    ("disposeChat", {"channel": CHAT}, p.DisposeChatParams),
    ("listSessions", {"channel": "ahp-root://", "limit": 50}, p.ListSessionsParams),
    ("fetchTurns", {"channel": CHAT, "cursor": "c2"}, p.FetchTurnsParams),
    ("fetchTurns", {"channel": CHAT, "before": "t9", "limit": 10}, p.FetchTurnsParams),
    (
        "authenticate",
        {"channel": "ahp-root://", "resource": "https://api", "token": "t", "expiresIn": 3540},
        p.AuthenticateParams,
    ),
    (
        "completions",
        {"channel": CHAT, "kind": "userMessage", "text": "/he", "offset": 3},
        p.CompletionsParams,
    ),
    (
        "resolveSessionConfig",
        {"channel": "ahp-root://", "provider": "x"},
        p.ResolveSessionConfigParams,
    ),
    (
        "sessionConfigCompletions",
        {"channel": "ahp-root://", "property": "branch", "query": "ma"},
        p.SessionConfigCompletionsParams,
    ),
    (
        "dispatchAction",
        {"channel": CHAT, "clientSeq": 1, "action": {"type": "chat/turnCancelled", "turnId": "t"}},
        p.DispatchActionParams,
    ),
    ("channel/frame", {"channel": CHAT, "data": "{", "final": False}, p.ChannelFrameParams),
    ("channel/credit", {"channel": CHAT, "consumedBytes": 2**33}, p.ChannelCreditParams),
    ("channel/reset", {"channel": CHAT}, p.ChannelResetParams),
]


@pytest.mark.parametrize(("method", "params", "cls"), PARAMS, ids=lambda v: str(v)[:30])
def test_every_client_method_decodes_to_its_type_and_re_encodes_as_it_came(
    method: str, params: dict | None, cls: type
) -> None:
    value = rpc.decode_params(method, params)
    assert type(value) is cls
    if params is not None:
        assert to_wire(value) == params


def test_the_tables_cover_every_method_the_server_must_speak() -> None:
    requests = {"initialize", "ping", "reconnect", "subscribe", "createSession", "disposeSession"}
    requests |= {"createChat", "disposeChat", "listSessions", "fetchTurns", "authenticate"}
    requests |= {"completions", "resolveSessionConfig", "sessionConfigCompletions"}
    assert set(rpc.CLIENT_REQUESTS) == requests
    assert {"unsubscribe", "dispatchAction"} <= set(rpc.CLIENT_NOTIFICATIONS)
    notifications = {"action", "root/sessionAdded", "root/sessionRemoved", "auth/required"}
    notifications |= {"root/sessionSummaryChanged", "channel/frame", "channel/credit"}
    assert notifications <= set(rpc.SERVER_NOTIFICATIONS)


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("subscribe", {}, "channel"),
        ("subscribe", {"channel": 3}, "channel"),
        ("initialize", {"clientId": "k", "protocolVersions": ["1.1.0", 2]}, "protocolVersions[1]"),
        ("dispatchAction", {"channel": CHAT, "clientSeq": "1", "action": {}}, "clientSeq"),
        (
            "dispatchAction",
            {"channel": CHAT, "clientSeq": 1, "action": {"type": "chat/turnStarted", "turnId": 1}},
            "action.turnId",
        ),
        ("authenticate", {"resource": "r", "token": "t", "expiresIn": "soon"}, "expiresIn"),
        ("channel/frame", {"channel": CHAT, "data": "x", "final": "yes"}, "final"),
        ("createSession", [], ""),
    ],
)
def test_params_that_do_not_fit_name_the_offending_field(
    method: str, params: object, field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        rpc.decode_params(method, params)
    assert caught.value.field == field
    assert caught.value.message.startswith(f"{field}: " if field else "")


def test_an_unknown_method_is_method_not_found() -> None:
    with pytest.raises(rpc.MethodNotFound) as caught:
        rpc.decode_params("terminal/create", {})
    assert caught.value.code == JsonRpcErrorCode.METHOD_NOT_FOUND == -32601


@pytest.mark.parametrize("text", ['{"a": NaN}', "[Infinity]", '{"x": [-Infinity]}', "{", "\ud800"])
def test_what_is_not_json_is_a_parse_error(text: str) -> None:
    with pytest.raises(rpc.FrameError) as caught:
        rpc.parse_json(text)
    assert caught.value.code == JsonRpcErrorCode.PARSE_ERROR


@pytest.mark.parametrize("depth", [65, 1_000, 200_000])
def test_nesting_deeper_than_the_limit_is_refused_without_a_recursion_error(depth: int) -> None:
    for text in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth):
        with pytest.raises(rpc.FrameError) as caught:
            rpc.parse_json(text, max_depth=64)
        assert caught.value.code == JsonRpcErrorCode.INVALID_REQUEST


def test_nesting_up_to_the_limit_parses() -> None:
    assert rpc.parse_json("[" * 64 + "]" * 64, max_depth=64) is not None


def test_a_frame_is_a_json_rpc_message_or_an_invalid_request() -> None:
    frame = rpc.parse_frame('{"jsonrpc":"2.0","id":1,"method":"ping"}')
    assert frame == p.JsonRpcRequest(id=1, method="ping")
    for text in ("[1]", '{"id":1,"method":"ping"}', '{"jsonrpc":"2.0","id":true,"method":"ping"}'):
        with pytest.raises(rpc.FrameError) as caught:
            rpc.parse_frame(text)
        assert caught.value.code == JsonRpcErrorCode.INVALID_REQUEST


def test_an_invalid_request_keeps_the_id_it_can_be_answered_with() -> None:
    with pytest.raises(rpc.FrameError) as named:
        rpc.parse_frame('{"jsonrpc":"2.0","id":"r1","method":7}')
    assert (named.value.code, named.value.request_id) == (JsonRpcErrorCode.INVALID_REQUEST, "r1")
    for bad_id in ("true", "1.5", "[1]", "null"):
        with pytest.raises(rpc.FrameError) as unnamed:
            rpc.parse_frame('{"jsonrpc":"2.0","id":' + bad_id + ',"method":"ping"}')
        assert unnamed.value.request_id is None


def test_the_server_frames_are_json_rpc_with_typed_params() -> None:
    removed = rpc.notification(
        "root/sessionRemoved", p.SessionRemovedParams(channel="ahp-root://", session=SESSION)
    )
    assert removed == {
        "jsonrpc": "2.0",
        "method": "root/sessionRemoved",
        "params": {"channel": "ahp-root://", "session": SESSION},
    }
    auth = rpc.notification(
        "auth/required",
        p.AuthRequiredParams(
            channel="ahp-root://", resource=ProtectedResourceMetadata(resource="https://api")
        ),
    )
    assert auth["params"]["resource"] == {"resource": "https://api"}
    assert rpc.success(7, None) == {"jsonrpc": "2.0", "id": 7, "result": None}
    refused = rpc.unsupported_version(1, ("^1.0.0",))
    assert refused["error"] == {
        "code": -32005,
        "message": "none of the offered protocol versions is supported",
        "data": {"supportedVersions": ["^1.0.0"]},
    }
    assert json.loads(json.dumps(refused)) == refused


def test_each_error_code_is_declared_once_and_protocol_names_the_same_one() -> None:
    assert p.JsonRpcErrorCode is JsonRpcErrorCode
    assert JsonRpcErrorCode.INVALID_PARAMS == -32602
    assert JsonRpcErrorCode.UNSUPPORTED_PROTOCOL_VERSION == -32005
    assert JsonRpcErrorCode.AUTH_REQUIRED == -32007


def test_an_action_envelope_carries_a_typed_action() -> None:
    action = TurnStarted(turn_id="t", message=UserMessage(text="hi"))
    envelope = rpc.notification(
        "action", p.ActionEnvelope(channel=CHAT, action=action, server_seq=4)
    )
    assert envelope["params"]["action"]["type"] == "chat/turnStarted"
