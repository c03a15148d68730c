"""AHP's methods, each with the types of its params and result, and the
decoding the server needs for them.

- `parse_json(text, max_depth)`: a frame's JSON, refusing NaN and Infinity
  (not JSON) and nesting deeper than `max_depth` (walked with a stack; the
  parser's own recursion guard stops nesting past the interpreter's limit
  first), as `FrameError` with the JSON-RPC code to answer (-32700, or
  -32600 for a frame too deep);
- `decode_params(method, params)`: the typed params of a client request or
  notification; a value that does not fit raises ValidationError naming the
  field (answer -32602 with its message), an unknown method MethodNotFound
  (answer -32601);
- `notification(method, params)`, `success(id, result)`, `failure(id, code,
  message, data)`: the frames the server sends, as JSON-ready dicts.

The tables say what the server must speak; which of these agenthost's
server speaks today is docs/protocol.md's to say.
"""

import json
from collections.abc import Mapping
from typing import Any

import attrs

from agenthost.messages import protocol as p
from agenthost.messages.errors import AgentHostError, JsonRpcErrorCode
from agenthost.messages.wire import from_wire, to_wire


@attrs.frozen(kw_only=True)
class Method:
    """A method: its params type, and its result type (None: `null`)."""

    params: Any
    result: Any = None


CLIENT_REQUESTS: dict[str, Method] = {
    "initialize": Method(params=p.InitializeParams, result=p.InitializeResult),
    "ping": Method(params=p.PingParams),
    "reconnect": Method(params=p.ReconnectParams, result=p.ReconnectResult),
    "subscribe": Method(params=p.SubscribeParams, result=p.SubscribeResult),
    "createSession": Method(params=p.CreateSessionParams),
    "disposeSession": Method(params=p.DisposeSessionParams),
    "createChat": Method(params=p.CreateChatParams, result=p.CreateChatResult),
    "disposeChat": Method(params=p.DisposeChatParams),
    "listSessions": Method(params=p.ListSessionsParams, result=p.ListSessionsResult),
    "fetchTurns": Method(params=p.FetchTurnsParams, result=p.FetchTurnsResult),
    "authenticate": Method(params=p.AuthenticateParams, result=p.EmptyResult),
    "completions": Method(params=p.CompletionsParams, result=p.CompletionsResult),
    "resolveSessionConfig": Method(
        params=p.ResolveSessionConfigParams, result=p.ResolveSessionConfigResult
    ),
    "sessionConfigCompletions": Method(
        params=p.SessionConfigCompletionsParams, result=p.SessionConfigCompletionsResult
    ),
}
"""Client -> server requests of the root, session and chat channels (AHP 1.1's
CommandMap without the terminal, resource*, changeset and canvas families)."""

CLIENT_NOTIFICATIONS: dict[str, Any] = {
    "unsubscribe": p.UnsubscribeParams,
    "dispatchAction": p.DispatchActionParams,
    "channel/frame": p.ChannelFrameParams,
    "channel/credit": p.ChannelCreditParams,
    "channel/reset": p.ChannelResetParams,
}
"""Client -> server notifications and their params."""

SERVER_NOTIFICATIONS: dict[str, Any] = {
    "action": p.ActionEnvelope,
    "root/sessionAdded": p.SessionAddedParams,
    "root/sessionRemoved": p.SessionRemovedParams,
    "root/sessionSummaryChanged": p.SessionSummaryChangedParams,
    "root/progress": p.ProgressParams,
    "auth/required": p.AuthRequiredParams,
    "channel/frame": p.ChannelFrameParams,
    "channel/credit": p.ChannelCreditParams,
    "channel/ready": p.ChannelReadyParams,
    "channel/reset": p.ChannelResetParams,
    "channel/snapshot": p.ChannelSnapshotParams,
}
"""Server -> client notifications and their params."""


class MethodNotFound(LookupError):
    """A method this host does not offer (answer -32601)."""

    code = JsonRpcErrorCode.METHOD_NOT_FOUND

    def __init__(self, method: str) -> None:
        super().__init__(f"unknown method {method!r}")
        self.method = method


class FrameError(ValueError):
    """A frame that is not JSON-RPC's JSON: `code` is what to answer, and
    `request_id` the id to answer with (None when it cannot be read)."""

    def __init__(
        self, code: JsonRpcErrorCode, message: str, request_id: int | str | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


def _readable_id(value: Mapping[str, Any]) -> int | str | None:
    """A frame's id when it is one JSON-RPC allows an answer to name."""
    request_id = value.get("id")
    if isinstance(request_id, str) or (
        isinstance(request_id, int) and not isinstance(request_id, bool)
    ):
        return request_id
    return None


def decode_params(method: str, params: object) -> Any:
    """The typed params of a client request or notification (absent params are
    `{}`: every required field is then missing).

    Raises:
        MethodNotFound: `method` is not one of CLIENT_REQUESTS or CLIENT_NOTIFICATIONS.
        ValidationError: the params do not fit; `.field` names the field.
    """
    if method in CLIENT_REQUESTS:
        cls = CLIENT_REQUESTS[method].params
    elif method in CLIENT_NOTIFICATIONS:
        cls = CLIENT_NOTIFICATIONS[method]
    else:
        raise MethodNotFound(method)
    return from_wire({} if params is None else params, cls)


def json_depth_exceeds(value: object, limit: int) -> bool:
    """Whether a parsed JSON value nests arrays and objects deeper than `limit`
    (walked with a stack, not recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(text: str | bytes, max_depth: int = 64) -> Any:
    """A frame's JSON value.

    Raises:
        FrameError: INVALID_REQUEST when it nests deeper than `max_depth`;
            PARSE_ERROR when it is not JSON (NaN and Infinity are not).
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FrameError(JsonRpcErrorCode.PARSE_ERROR, f"not UTF-8: {exc}") from exc
    too_deep = FrameError(
        JsonRpcErrorCode.INVALID_REQUEST, f"JSON nested deeper than {max_depth} levels"
    )
    try:
        # The C parser guards its own recursion: nesting past the interpreter's
        # limit raises RecursionError at once instead of overflowing the stack.
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise too_deep from None
    except ValueError as exc:
        raise FrameError(JsonRpcErrorCode.PARSE_ERROR, f"not JSON: {exc}") from exc
    if json_depth_exceeds(value, max_depth):
        raise too_deep
    return value


def parse_frame(text: str | bytes, max_depth: int = 64) -> p.JsonRpcMessage:
    """A frame as a typed JSON-RPC message (its params still JSON).

    Raises:
        FrameError: as parse_json, or INVALID_REQUEST when it is not a JSON-RPC 2.0
            message (its `request_id` set when the frame has a usable id).
    """
    value = parse_json(text, max_depth)
    if not isinstance(value, Mapping) or value.get("jsonrpc") != p.JSONRPC_VERSION:
        raise FrameError(JsonRpcErrorCode.INVALID_REQUEST, "not a JSON-RPC 2.0 message")
    try:
        message: p.JsonRpcMessage = from_wire(value, p.JsonRpcMessage)  # type: ignore[arg-type]
    except AgentHostError as exc:
        raise FrameError(
            JsonRpcErrorCode.INVALID_REQUEST, exc.message, _readable_id(value)
        ) from exc
    return message


def notification(method: str, params: Any) -> dict[str, Any]:
    """A notification frame (`params` a typed value or JSON)."""
    return {"jsonrpc": p.JSONRPC_VERSION, "method": method, "params": to_wire(params)}


def success(request_id: int | str, result: Any) -> dict[str, Any]:
    """A result frame; `result` None is JSON's null."""
    return {"jsonrpc": p.JSONRPC_VERSION, "id": request_id, "result": to_wire(result)}


def failure(
    request_id: int | str | None, code: int, message: str, data: Any = None
) -> dict[str, Any]:
    """An error frame (`data` left off while None)."""
    error: dict[str, Any] = {"code": int(code), "message": message}
    if data is not None:
        error["data"] = to_wire(data)
    return {"jsonrpc": p.JSONRPC_VERSION, "id": request_id, "error": error}


def unsupported_version(request_id: int | str | None, supported: tuple[str, ...]) -> dict[str, Any]:
    """The -32005 answer to an initialize none of whose versions is served."""
    return failure(
        request_id,
        JsonRpcErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
        "none of the offered protocol versions is supported",
        p.UnsupportedProtocolVersionData(supported_versions=supported),
    )
