"""AHP's protocol messages: JSON-RPC frames and the params and results of its
commands and notifications, as frozen values.

State and actions live in messages/state.py and messages/events.py; this
module holds what carries them between a host and its clients. Field names
are Python's here and AHP's camelCase on the wire (messages/wire.py, which
registers everything below). `WIRE_TYPES` maps AHP's type names (the
conformance fixtures' `type`) to these classes.

Shapes follow ../shared/ahp/README.md (protocol 1.1.0). Reconnect is the
connection-wide shape (`lastSeenServerSeq`; a `replay` or `snapshot` result
with `missing`), not the per-channel one. Values AHP defines but agenthost
does not interpret (capabilities, `_meta`, JSON-RPC params and results,
flow-control extras) are `Json`.
"""

from enum import IntEnum
from typing import Any

import attrs

from agenthost.messages.events import ChatEvent, SessionEvent
from agenthost.messages.fields import Json, extension, wire_name
from agenthost.messages.state import (
    ChatState,
    ChatStatus,
    ChatSummary,
    SessionState,
    Turn,
)

JSONRPC_VERSION = "2.0"
ROOT_CHANNEL = "ahp-root://"
SESSION_SCHEME = "ahp-session:"
CHAT_SCHEME = "ahp-chat:"

Timestamp = int | str
"""A summary's createdAt / modifiedAt: protocol versions send ms or ISO-8601; kept as sent."""


class JsonRpcErrorCode(IntEnum):
    """The JSON-RPC error codes AHP uses; an error response's `code` is a plain
    int, so a peer's unknown code survives."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    UNSUPPORTED_PROTOCOL_VERSION = -32005


# -- JSON-RPC frames ----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class JsonRpcError:
    code: int = wire_name("code")  # not AgentHostError's errorType
    message: str
    data: Json | None = None


@attrs.frozen(kw_only=True)
class JsonRpcRequest:
    id: int | str
    method: str
    params: Json | None = None
    jsonrpc: str = JSONRPC_VERSION


@attrs.frozen(kw_only=True)
class JsonRpcNotification:
    method: str
    params: Json | None = None
    jsonrpc: str = JSONRPC_VERSION


@attrs.frozen(kw_only=True)
class JsonRpcSuccess:
    id: int | str
    result: Json
    jsonrpc: str = JSONRPC_VERSION


@attrs.frozen(kw_only=True)
class JsonRpcErrorResponse:
    """`id` is null when the request could not be read (-32700)."""

    id: int | str | None
    error: JsonRpcError
    jsonrpc: str = JSONRPC_VERSION


JsonRpcMessage = JsonRpcRequest | JsonRpcNotification | JsonRpcSuccess | JsonRpcErrorResponse


# -- actions on the wire ------------------------------------------------------------


@attrs.frozen(kw_only=True)
class UnknownAction:
    """An action whose type this host does not know (a newer peer's): reducers
    ignore it, and it re-encodes as it came."""

    type: str
    data: Json


StateAction = ChatEvent | SessionEvent | UnknownAction


@attrs.frozen(kw_only=True)
class ActionOrigin:
    """Which client dispatched an action, and its sequence number for it."""

    client_id: str
    client_seq: int


@attrs.frozen(kw_only=True)
class ActionEnvelope:
    """An action as the host broadcasts it on a channel (the `action`
    notification's params). `rejection_reason` is set on an echo of a
    dispatched action that was not applied."""

    channel: str
    action: StateAction
    server_seq: int
    origin: ActionOrigin | None = None
    rejection_reason: str | None = None


@attrs.frozen(kw_only=True)
class DispatchActionParams:
    """The client's `dispatchAction` notification."""

    channel: str
    client_seq: int
    action: StateAction


# -- state snapshots ----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ModelInfo:
    id: str
    name: str | None = None


@attrs.frozen(kw_only=True)
class AgentInfo:
    """One agent (provider) the host offers."""

    provider: str
    display_name: str = ""
    description: str = ""
    models: tuple[ModelInfo, ...] = ()


@attrs.frozen(kw_only=True)
class RootState:
    """The root channel's state. Sessions are listed with listSessions and kept
    current by root/* notifications, not held here."""

    agents: tuple[AgentInfo, ...] = ()
    config: Json | None = None


ChannelState = RootState | SessionState | ChatState | Json
"""A snapshot's state, by its resource's scheme (Json: a channel kind agenthost does not offer)."""


@attrs.frozen(kw_only=True)
class Snapshot:
    """A channel's state at `from_seq`: the state after every action up to it."""

    resource: str
    state: ChannelState
    from_seq: int


def state_type_for(resource: str) -> type:
    """The state class of a channel, by its URI's scheme."""
    if resource.startswith("ahp-root:"):
        return RootState
    if resource.startswith(SESSION_SCHEME):
        return SessionState
    if resource.startswith(CHAT_SCHEME):
        return ChatState
    return Json


# -- initialize, subscribe, reconnect -------------------------------------------------


@attrs.frozen(kw_only=True)
class ClientInfo:
    name: str
    version: str | None = None


@attrs.frozen(kw_only=True)
class ServerInfo:
    name: str
    version: str | None = None


@attrs.frozen(kw_only=True)
class InitializeParams:
    """`protocol_versions`: most preferred first."""

    client_id: str
    protocol_versions: tuple[str, ...]
    channel: str = ROOT_CHANNEL
    client_info: ClientInfo | None = None
    initial_subscriptions: tuple[str, ...] = extension(default=())
    capabilities: Json | None = None


@attrs.frozen(kw_only=True)
class InitializeResult:
    """`steering_messages` present: the host keeps a list of steering messages
    (protocol 1.1) beside the legacy single slot."""

    protocol_version: str
    server_seq: int
    snapshots: tuple[Snapshot, ...] = ()
    server_info: ServerInfo | None = None
    capabilities: Json | None = None
    steering_messages: Json | None = None


@attrs.frozen(kw_only=True)
class UnsupportedProtocolVersionData:
    """The `data` of error -32005."""

    supported_versions: tuple[str, ...]


@attrs.frozen(kw_only=True)
class ReceiveWindow:
    """Flow-control limits one side sets for what it receives on a channel."""

    window_bytes: int | None = None
    maximum_frame_bytes: int | None = None
    maximum_message_bytes: int | None = None


@attrs.frozen(kw_only=True)
class SubscribeFlowControl:
    receive: ReceiveWindow | None = None


@attrs.frozen(kw_only=True)
class SubscribeParams:
    channel: str
    flow_control: SubscribeFlowControl | None = None


@attrs.frozen(kw_only=True)
class SubscribeResult:
    snapshot: Snapshot | None = None


@attrs.frozen(kw_only=True)
class UnsubscribeParams:
    channel: str


@attrs.frozen(kw_only=True)
class ChannelCheckpoint:
    """The last serverSeq a client applied on one windowed channel."""

    channel: str
    last_applied_server_seq: int


@attrs.frozen(kw_only=True)
class ReconnectCheckpoints:
    items: tuple[ChannelCheckpoint, ...] = ()


@attrs.frozen(kw_only=True)
class ReconnectParams:
    """The connection-wide reconnect: one watermark for every subscription."""

    client_id: str
    last_seen_server_seq: int
    subscriptions: tuple[str, ...] = ()
    channel: str = ROOT_CHANNEL
    windows: ReconnectCheckpoints | None = None


@attrs.frozen(kw_only=True)
class ChannelFlowControl:
    client_receive: ReceiveWindow | None = None
    host_receive: ReceiveWindow | None = None


@attrs.frozen(kw_only=True)
class ChannelWindow:
    """A windowed channel's fresh flow-control state after a reconnect."""

    channel: str
    flow_control: ChannelFlowControl | None = None
    recovery: str | None = None


@attrs.frozen(kw_only=True)
class ChannelWindows:
    items: tuple[ChannelWindow, ...] = ()


@attrs.frozen(kw_only=True)
class ReconnectReplay:
    """The missed actions, in serverSeq order; `missing`: subscriptions that no
    longer exist."""

    actions: tuple[ActionEnvelope, ...] = ()
    missing: tuple[str, ...] = ()
    windows: ChannelWindows | None = None
    type: str = "replay"


@attrs.frozen(kw_only=True)
class ReconnectSnapshot:
    """The gap was larger than the replay buffer: fresh snapshots instead.
    `missing` None: the host did not say (older hosts leave it out)."""

    snapshots: tuple[Snapshot, ...] = ()
    missing: tuple[str, ...] | None = None
    windows: ChannelWindows | None = None
    type: str = "snapshot"


ReconnectResult = ReconnectReplay | ReconnectSnapshot


# -- sessions: commands and root notifications ----------------------------------------


@attrs.frozen(kw_only=True)
class SessionSummary:
    """A session as AHP lists it (listSessions, root/sessionAdded). Not
    agenthost.messages.state.SessionSummary, the embedding API's row."""

    resource: str
    provider: str
    title: str
    status: ChatStatus
    created_at: Timestamp
    modified_at: Timestamp
    activity: str | None = None
    project: Json | None = None
    working_directories: tuple[str, ...] | None = None
    chats: tuple[ChatSummary, ...] | None = None
    default_chat: str | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class SessionAddedParams:
    channel: str
    summary: SessionSummary


@attrs.frozen(kw_only=True)
class SessionRemovedParams:
    channel: str
    session: str


@attrs.frozen(kw_only=True)
class SessionSummaryChangedParams:
    """`changes`: the summary fields that changed (a partial SessionSummary)."""

    channel: str
    session: str
    changes: Json


@attrs.frozen(kw_only=True)
class AuthRequiredParams:
    """`reason` is open: a newer peer's reason is kept as sent."""

    channel: str
    resource: str
    reason: str | None = None


@attrs.frozen(kw_only=True)
class CreateSessionParams:
    """`channel` is the new session's URI, chosen by the client."""

    channel: str
    provider: str
    model: str | None = None
    working_directories: tuple[str, ...] = extension(default=())
    config: Json | None = None


@attrs.frozen(kw_only=True)
class DisposeSessionParams:
    channel: str


@attrs.frozen(kw_only=True)
class CreateChatParams:
    """`channel`: the session the chat joins."""

    channel: str
    title: str | None = None


@attrs.frozen(kw_only=True)
class CreateChatResult:
    chat: str


@attrs.frozen(kw_only=True)
class DisposeChatParams:
    channel: str


@attrs.frozen(kw_only=True)
class ListSessionsParams:
    channel: str = ROOT_CHANNEL
    cursor: str | None = None
    limit: int | None = None


@attrs.frozen(kw_only=True)
class ListSessionsResult:
    items: tuple[SessionSummary, ...] = ()
    next_cursor: str | None = None


@attrs.frozen(kw_only=True)
class FetchTurnsParams:
    """Turns of a chat before `before` (a turn id; None: the newest)."""

    channel: str
    before: str | None = None
    limit: int | None = None


@attrs.frozen(kw_only=True)
class FetchTurnsResult:
    turns: tuple[Turn, ...] = ()
    has_more: bool = False


WIRE_TYPES: dict[str, Any] = {
    "ActionEnvelope": ActionEnvelope,
    "AuthRequiredParams": AuthRequiredParams,
    "ChatState": ChatState,
    "CreateChatParams": CreateChatParams,
    "CreateChatResult": CreateChatResult,
    "CreateSessionParams": CreateSessionParams,
    "DispatchActionParams": DispatchActionParams,
    "DisposeChatParams": DisposeChatParams,
    "DisposeSessionParams": DisposeSessionParams,
    "FetchTurnsParams": FetchTurnsParams,
    "FetchTurnsResult": FetchTurnsResult,
    "InitializeParams": InitializeParams,
    "InitializeResult": InitializeResult,
    "JsonRpcMessage": JsonRpcMessage,
    "ListSessionsParams": ListSessionsParams,
    "ListSessionsResult": ListSessionsResult,
    "ReconnectParams": ReconnectParams,
    "ReconnectResult": ReconnectResult,
    "RootState": RootState,
    "SessionAddedParams": SessionAddedParams,
    "SessionRemovedParams": SessionRemovedParams,
    "SessionState": SessionState,
    "SessionSummary": SessionSummary,
    "SessionSummaryChangedParams": SessionSummaryChangedParams,
    "Snapshot": Snapshot,
    "StateAction": StateAction,
    "SubscribeParams": SubscribeParams,
    "SubscribeResult": SubscribeResult,
    "Turn": Turn,
    "UnsubscribeParams": UnsubscribeParams,
}
"""AHP's type names (a round-trip fixture's `type`) -> class or union; decode
with `agenthost.messages.wire.from_wire(data, WIRE_TYPES[name])`."""
