"""AHP's protocol messages: JSON-RPC frames and the params and results of its
commands and notifications, as frozen values.

State and actions live in messages/state.py and messages/events.py; this
module holds what carries them between a host and its clients. Field names
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
    AuthRequiredReason,
    ChangesSummary,
    Implementation,
    ProjectInfo,
    ProtectedResourceMetadata,
    RepositorySource,
    SessionOrigin,
    WorkingDirectory,
)
from agenthost.messages.customizations import AnyCustomization
from agenthost.messages.errors import JsonRpcErrorCode
from agenthost.messages.events import ChatEvent, RootEvent, SessionEvent
from agenthost.messages.fields import Json, extension, wire_name
from agenthost.messages.parts import MessageAttachment, UserMessage
from agenthost.messages.state import (
    ActiveClient,
    AgentInfo,
    Artifact,
    ChatState,
    ChatStatus,
    ChatSummary,
    ModelInfo,
    RootState,
    SessionState,
    SideChatSelection,
    Turn,
)

__all__ = ["AgentInfo", "JsonRpcErrorCode", "ModelInfo", "RootState"]  # re-exported

JSONRPC_VERSION = "2.0"
ROOT_CHANNEL = "ahp-root://"
SESSION_SCHEME = "ahp-session:"
CHAT_SCHEME = "ahp-chat:"

Timestamp = int | str
"""A summary's createdAt / modifiedAt: protocol versions send ms or ISO-8601; kept as sent."""


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


# -- sessions: commands and root notifications ----------------------------------------


@attrs.frozen(kw_only=True)
class SessionListing:
    """What a session summary and a change to one share: its optional fields."""

    activity: str | None = None
    origin: SessionOrigin | None = None
    project: ProjectInfo | None = None
    working_directories: tuple[WorkingDirectory, ...] | None = None
    repositories: tuple[RepositorySource, ...] | None = None
    changes: ChangesSummary | None = None
    chats: tuple[ChatSummary, ...] | None = None
    default_chat: str | None = None
    artifacts: tuple[Artifact, ...] | None = None
    annotations: Json | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class SessionSummary(SessionListing):
    """A session as AHP lists it (listSessions, root/sessionAdded). Not
    agenthost.messages.state.SessionSummary, the embedding API's row."""

    resource: str
    provider: str
    title: str
    status: ChatStatus
    created_at: Timestamp
    modified_at: Timestamp


@attrs.frozen(kw_only=True)
class SessionSummaryChanges(SessionListing):
    """The fields of a session summary that changed (the others are None)."""

    title: str | None = None
    status: ChatStatus | None = None
    modified_at: Timestamp | None = None


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
    changes: SessionSummaryChanges


@attrs.frozen(kw_only=True)
class ProgressParams:
    """Progress of a long request that offered a `progress_token` (root/progress)."""

    channel: str
    progress_token: str
    progress: int
    total: int | None = None
    message: str | None = None


@attrs.frozen(kw_only=True)
class AuthRequiredParams:
    """auth/required: `resource` is RFC 9728 metadata (older peers sent its URI
    alone); `reason` is open: a newer peer's reason is kept as sent."""

    channel: str
    resource: str | ProtectedResourceMetadata
    reason: AuthRequiredReason | None = None


@attrs.frozen(kw_only=True)
class AuthenticateParams:
    """A bearer token for a protected resource; `expires_in`: its remaining
    lifetime in seconds when sent (absent: unknown). An empty token revokes."""

    resource: str
    token: str
    channel: str = ROOT_CHANNEL
    expires_in: int | None = None
    scopes: tuple[str, ...] | None = None


@attrs.frozen(kw_only=True)
class EmptyResult:
    """The `{}` result of authenticate, fetchTurns (0.5.1 on) and resource commands."""


@attrs.frozen(kw_only=True)
class CreateSessionParams:
    """`channel` is the new session's URI, chosen by the client."""

    channel: str
    provider: str | None = None
    model: str | None = None
    working_directories: tuple[str, ...] = extension(default=())
    repositories: tuple[RepositorySource, ...] | None = None
    config: Json | None = None
    active_client: ActiveClient | None = None
    progress_token: str | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class DisposeSessionParams:
    channel: str


@attrs.frozen(kw_only=True)
class ChatSource:
    """A new chat's source: a fork copies history through `turn_id`; a side chat
    takes it as context (with the selected text, if any)."""

    kind: str
    chat: str
    turn_id: str
    selection: SideChatSelection | None = None


@attrs.frozen(kw_only=True)
class CreateChatParams:
    """`channel`: the session the chat joins; `chat`: its URI when the client
    chooses it (1.x), else the host allocates one (CreateChatResult)."""

    channel: str
    chat: str | None = None
    title: str | None = None
    initial_message: UserMessage | None = None
    source: ChatSource | None = None
    working_directories: tuple[str, ...] | None = None


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
    """Older turns of a chat: from 0.5.1 by `cursor` (the chat's
    turnsNextCursor; the turns arrive as chat/turnsLoaded), before that by
    `before` (a turn id; None: the newest) and `limit`."""

    channel: str
    cursor: str | None = None
    before: str | None = None
    limit: int | None = None


@attrs.frozen(kw_only=True)
class FetchTurnsResult:
    """Before 0.5.1: the turns, oldest first, and whether older ones remain.
    From 0.5.1 the result is `{}` (both None)."""

    turns: tuple[Turn, ...] | None = None
    has_more: bool | None = None


@attrs.frozen(kw_only=True)
class CompletionsParams:
    """Completions for the text a user is composing in a chat, at `offset`
    (UTF-16 code units)."""

    channel: str
    kind: str
    text: str
    offset: int


@attrs.frozen(kw_only=True)
class CompletionItem:
    """Replace [range_start, range_end) with `insert_text` and attach `attachment`."""

    insert_text: str
    attachment: MessageAttachment
    range_start: int | None = None
    range_end: int | None = None


@attrs.frozen(kw_only=True)
class CompletionsResult:
    items: tuple[CompletionItem, ...] = ()


@attrs.frozen(kw_only=True)
class ResolveSessionConfigParams:
    channel: str = ROOT_CHANNEL
    provider: str | None = None
    working_directory: str | None = None
    repositories: tuple[RepositorySource, ...] | None = None
    config: Json | None = None


@attrs.frozen(kw_only=True)
class ResolveSessionConfigResult:
    schema: Json
    values: Json


@attrs.frozen(kw_only=True)
class SessionConfigCompletionsParams:
    property: str
    channel: str = ROOT_CHANNEL
    provider: str | None = None
    working_directory: str | None = None
    repositories: tuple[RepositorySource, ...] | None = None
    config: Json | None = None
    query: str | None = None


@attrs.frozen(kw_only=True)
class ConfigValueItem:
    value: str
    label: str
    description: str | None = None


@attrs.frozen(kw_only=True)
class SessionConfigCompletionsResult:
    items: tuple[ConfigValueItem, ...] = ()


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
