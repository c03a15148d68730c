"""AHP's protocol messages: JSON-RPC frames and the params and results of its
commands and notifications, as frozen values.

State and actions live in messages/state.py and messages/events.py; this
module holds what carries them between a host and its clients (the session
commands and root notifications in messages/session_protocol.py, re-exported
here). Field names
are Python's here and AHP's camelCase on the wire (messages/wire.py, which
registers everything below). `WIRE_TYPES` maps AHP's type names (the
conformance fixtures' `type`) to these classes; messages/rpc.py maps each
method to its params and result and decodes them.

Shapes follow AHP 1.1 (../shared/ahp/README.md), with the older forms a
negotiated version may still use beside them: reconnect is connection-wide
(`lastSeenServerSeq`; a `replay` or `snapshot` result with `missing`) or
per channel (a cursor per subscription; a recovery per channel);
`fetchTurns` takes a cursor (0.5.1 on, turns arrive as chat/turnsLoaded) or
`before`/`limit` (before 0.5.1, turns in the result). Values AHP defines but
agenthost does not interpret (capabilities, `_meta`, JSON-RPC params and
results, JSON schemas) are `Json`.
"""

from typing import Any

import attrs

from agenthost.messages.common import (
    CHAT_SCHEME,
    ROOT_CHANNEL,
    SESSION_SCHEME,
    Implementation,
    Timestamp,
)
from agenthost.messages.customizations import AnyCustomization
from agenthost.messages.errors import JsonRpcErrorCode
from agenthost.messages.events import ChatEvent, RootEvent, SessionEvent
from agenthost.messages.fields import Json, extension, wire_name
from agenthost.messages.session_protocol import (
    AuthenticateParams,
    AuthRequiredParams,
    ChatSource,
    CompletionItem,
    CompletionsParams,
    CompletionsResult,
    ConfigValueItem,
    CreateChatParams,
    CreateChatResult,
    CreateSessionParams,
    DisposeChatParams,
    DisposeSessionParams,
    EmptyResult,
    FetchTurnsParams,
    FetchTurnsResult,
    ListSessionsParams,
    ListSessionsResult,
    ProgressParams,
    ResolveSessionConfigParams,
    ResolveSessionConfigResult,
    SessionAddedParams,
    SessionConfigCompletionsParams,
    SessionConfigCompletionsResult,
    SessionListing,
    SessionRemovedParams,
    SessionSummary,
    SessionSummaryChangedParams,
    SessionSummaryChanges,
)
from agenthost.messages.state import (
    AgentInfo,
    ChatState,
    ModelInfo,
    RootState,
    SessionState,
    Turn,
)

__all__ = [  # re-exported
    "CHAT_SCHEME",
    "ROOT_CHANNEL",
    "SESSION_SCHEME",
    "AgentInfo",
    "AuthRequiredParams",
    "AuthenticateParams",
    "ChatSource",
    "CompletionItem",
    "CompletionsParams",
    "CompletionsResult",
    "ConfigValueItem",
    "CreateChatParams",
    "CreateChatResult",
    "CreateSessionParams",
    "DisposeChatParams",
    "DisposeSessionParams",
    "EmptyResult",
    "FetchTurnsParams",
    "FetchTurnsResult",
    "JsonRpcErrorCode",
    "ListSessionsParams",
    "ListSessionsResult",
    "ModelInfo",
    "ProgressParams",
    "ResolveSessionConfigParams",
    "ResolveSessionConfigResult",
    "RootState",
    "SessionAddedParams",
    "SessionConfigCompletionsParams",
    "SessionConfigCompletionsResult",
    "SessionListing",
    "SessionRemovedParams",
    "SessionSummary",
    "SessionSummaryChangedParams",
    "SessionSummaryChanges",
    "Timestamp",
]

JSONRPC_VERSION = "2.0"


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


StateAction = ChatEvent | SessionEvent | RootEvent | UnknownAction


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


# -- initialize and ping --------------------------------------------------------------

ClientInfo = Implementation
ServerInfo = Implementation


@attrs.frozen(kw_only=True)
class InitializeParams:
    """`protocol_versions`: most preferred first."""

    client_id: str
    protocol_versions: tuple[str, ...]
    channel: str = ROOT_CHANNEL
    client_info: Implementation | None = None
    initial_subscriptions: tuple[str, ...] = extension(default=())
    locale: str | None = None
    capabilities: Json | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class RepositoryPreparation:
    """The host prepares repositories for new sessions (empty: one, at its
    default revision)."""

    revision: bool | None = None
    multiple_repositories: bool | None = None


@attrs.frozen(kw_only=True)
class InitializeResult:
    """`steering_messages` present: the host keeps a list of steering messages
    (protocol 1.1) beside the legacy single slot."""

    protocol_version: str
    server_seq: int
    snapshots: tuple[Snapshot, ...] = ()
    server_info: Implementation | None = None
    capabilities: Json | None = None
    steering_messages: Json | None = None
    default_directory: str | None = None
    repository_preparation: RepositoryPreparation | None = None
    completion_trigger_characters: tuple[str, ...] | None = None
    terminal_command_prefix: str | None = None
    telemetry: Json | None = None
    automations: Json | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class UnsupportedProtocolVersionData:
    """The `data` of error -32005: versions or caret ranges (`^1.0.0`) the host speaks."""

    supported_versions: tuple[str, ...]


@attrs.frozen(kw_only=True)
class PingParams:
    channel: str = ROOT_CHANNEL


# -- subscriptions and channel delivery ---------------------------------------------------


@attrs.frozen(kw_only=True)
class ReceiveWindow:
    """Flow-control limits one side sets for what it receives on a channel
    (bytes are UTF-16 code units times two)."""

    window_bytes: int | None = None
    maximum_frame_bytes: int | None = None
    maximum_message_bytes: int | None = None


@attrs.frozen(kw_only=True)
class SubscribeFlowControl:
    receive: ReceiveWindow | None = None


@attrs.frozen(kw_only=True)
class DeliveryOptions:
    """How long the host may hold updates back to coalesce them (0: never)."""

    max_latency_ms: int | None = None


@attrs.frozen(kw_only=True)
class SubscribeView:
    """How many of the newest completed turns a chat snapshot should hold (advisory)."""

    turns: int | None = None


@attrs.frozen(kw_only=True)
class SubscribeParams:
    channel: str
    flow_control: SubscribeFlowControl | None = None
    delivery: DeliveryOptions | None = None
    view: SubscribeView | None = None


@attrs.frozen(kw_only=True)
class ChannelFlowControl:
    """The receive limits both sides accepted for a windowed channel."""

    client_receive: ReceiveWindow | None = None
    host_receive: ReceiveWindow | None = None


@attrs.frozen(kw_only=True)
class SubscribeResult:
    """`flow_control`: the channel is delivered in frames under these windows
    (absent: ordinary delivery)."""

    snapshot: Snapshot | None = None
    flow_control: ChannelFlowControl | None = None


@attrs.frozen(kw_only=True)
class UnsubscribeParams:
    channel: str


@attrs.frozen(kw_only=True)
class ChannelFrameParams:
    """A fragment of a serialized channel message (`final`: the last one)."""

    channel: str
    data: str
    final: bool | None = None


@attrs.frozen(kw_only=True)
class ChannelCreditParams:
    """The receiver released everything up to `consumed_bytes` (cumulative)."""

    channel: str
    consumed_bytes: int


@attrs.frozen(kw_only=True)
class ChannelReadyParams:
    """Snapshot and replay frames are done; live delivery follows."""

    channel: str


@attrs.frozen(kw_only=True)
class ChannelResetParams:
    """Delivery cannot continue: the subscription ends."""

    channel: str


@attrs.frozen(kw_only=True)
class ChannelSnapshotParams:
    """A snapshot carried inside a windowed channel's frames."""

    channel: str
    snapshot: Snapshot


# -- reconnect ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ChannelCheckpoint:
    """The last serverSeq a client applied on one windowed channel (None:
    recover from a snapshot, or the live edge)."""

    channel: str
    last_applied_server_seq: int | None = None


@attrs.frozen(kw_only=True)
class ReconnectCheckpoints:
    items: tuple[ChannelCheckpoint, ...] = ()


@attrs.frozen(kw_only=True)
class ConnectionReconnectParams:
    """The connection-wide reconnect: one watermark for every subscription."""

    client_id: str
    last_seen_server_seq: int
    subscriptions: tuple[str, ...] = ()
    channel: str = ROOT_CHANNEL
    windows: ReconnectCheckpoints | None = None


@attrs.frozen(kw_only=True)
class ChannelCursor:
    """The last serverSeq a client saw on one channel (0: none)."""

    channel: str
    last_seen_server_seq: int


@attrs.frozen(kw_only=True)
class ChannelReconnectParams:
    """The per-channel reconnect: a cursor for each subscription."""

    client_id: str
    subscriptions: tuple[ChannelCursor, ...]
    channel: str = ROOT_CHANNEL


ReconnectParams = ConnectionReconnectParams | ChannelReconnectParams
"""Told apart by shape: a top-level `lastSeenServerSeq`, or cursors per subscription."""


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


@attrs.frozen(kw_only=True)
class ChannelReplay:
    """One channel's missed actions, in serverSeq order."""

    channel: str
    actions: tuple[ActionEnvelope, ...] = ()
    kind: str = attrs.field(default="replay", init=False)


@attrs.frozen(kw_only=True)
class ChannelSnapshot:
    """One channel's gap was too large: its fresh snapshot (`from_seq` the new base)."""

    channel: str
    snapshot: Snapshot
    kind: str = attrs.field(default="snapshot", init=False)


@attrs.frozen(kw_only=True)
class ChannelMissing:
    """One channel the host can no longer resume."""

    channel: str
    kind: str = attrs.field(default="missing", init=False)


ChannelRecovery = ChannelReplay | ChannelSnapshot | ChannelMissing


@attrs.frozen(kw_only=True)
class ChannelReconnectResult:
    """The per-channel reconnect's answer: a recovery for each subscription."""

    channels: tuple[ChannelRecovery, ...] = ()


ReconnectResult = ReconnectReplay | ReconnectSnapshot | ChannelReconnectResult


WIRE_TYPES: dict[str, Any] = {
    cls.__name__: cls
    for cls in (
        ActionEnvelope,
        AuthRequiredParams,
        AuthenticateParams,
        ChannelCreditParams,
        ChannelFrameParams,
        ChannelReadyParams,
        ChannelResetParams,
        ChannelSnapshotParams,
        ChatState,
        CompletionsParams,
        CompletionsResult,
        CreateChatParams,
        CreateChatResult,
        CreateSessionParams,
        DispatchActionParams,
        DisposeChatParams,
        DisposeSessionParams,
        FetchTurnsParams,
        FetchTurnsResult,
        InitializeParams,
        InitializeResult,
        ListSessionsParams,
        ListSessionsResult,
        PingParams,
        ProgressParams,
        ResolveSessionConfigParams,
        ResolveSessionConfigResult,
        RootState,
        SessionAddedParams,
        SessionConfigCompletionsParams,
        SessionConfigCompletionsResult,
        SessionRemovedParams,
        SessionState,
        SessionSummary,
        SessionSummaryChangedParams,
        Snapshot,
        SubscribeParams,
        SubscribeResult,
        Turn,
        UnsubscribeParams,
    )
} | {
    "Customization": AnyCustomization,
    "JsonRpcMessage": JsonRpcMessage,
    "ReconnectParams": ReconnectParams,
    "ReconnectResult": ReconnectResult,
    "StateAction": StateAction,
}
"""AHP's type names (a round-trip fixture's `type`) -> class or union; decode
with `agenthost.messages.wire.from_wire(data, WIRE_TYPES[name])`."""
