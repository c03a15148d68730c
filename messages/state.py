"""Value types of chat and session state, shaped after AHP's state tree.

Everything here is a frozen, slotted attrs value; sequences are tuples. The
AHP names (activeTurn, responseParts, queuedMessages, ...) are the wire names
of these fields; messages/wire.py does the translation. Views that the
public surface promises (`Turn.user_text`, `Turn.assistant_text`,
`ChatState.pending`, `ChatState.active_turn_id`) are derived, never stored.
"""

from enum import IntFlag, StrEnum

import attrs

from agenthost.messages.common import (  # noqa: F401  (TextPosition, TextRange: re-exported)
    AgentSelection,
    Artifact,
    ChangesSummary,
    ConfirmationOption,
    McpAuthRequirement,
    ModelSelection,
    ProjectInfo,
    ProtectedResourceMetadata,
    RepositorySource,
    SessionOrigin,
    TextPosition,
    TextRange,
    ToolDefinition,
    WorkingDirectory,
)
from agenthost.messages.customizations import AnyCustomization
from agenthost.messages.errors import AgentHostError, OpenStrEnum
from agenthost.messages.fields import (
    OMIT_DEFAULT,
    Json,
    extension,
    implicit,
    is_json_text,
    iso_time,
    wire_name,
)
from agenthost.messages.inputs import ChatInputRequest, InputQuestion
from agenthost.messages.parts import (  # noqa: F401  (re-exported: state's public names)
    Attachment,
    AttributionPart,
    AttributionSource,
    AttributionSpan,
    ConfirmationReason,
    ContentRefPart,
    ErrorPart,
    InputRequestPart,
    MarkdownPart,
    MessageOrigin,
    OriginKind,
    PageLocation,
    ReasoningPart,
    Reference,
    ResponsePart,
    SourceLocation,
    SystemNotificationPart,
    TextLocation,
    ToolCall,
    ToolCallPart,
    ToolCallStatus,
    Usage,
    UserMessage,
    markdown_part_id,
    markdown_text,
    part_id,
    with_attachments,
)


class ChatStatus(IntFlag):
    """AHP's status bitset (InputNeeded includes InProgress). Bits 0-4 are the
    activity (one of idle, error, in progress, input needed); IsRead, IsArchived
    and bits a newer peer defines are flags beside it, kept as they are."""

    IDLE = 1
    ERROR = 2
    IN_PROGRESS = 8
    INPUT_NEEDED = 24
    IS_READ = 32
    IS_ARCHIVED = 64


ACTIVITY_MASK = 0b11111
_KNOWN_STATUSES: dict[int, ChatStatus] = {}  # ChatStatus(value) for the bits above, made once


def status_of(value: int) -> ChatStatus:
    """`ChatStatus(value)`, without IntFlag's lookup for a combination of known bits."""
    status = _KNOWN_STATUSES.get(value)
    if status is None:
        status = ChatStatus(value)
        if value < 128:  # a newer peer's bits are kept, but not cached
            _KNOWN_STATUSES[value] = status
    return status


def with_activity(
    status: ChatStatus, activity: ChatStatus, *, read: bool | None = None
) -> ChatStatus:
    """`status` with its activity bits replaced by `activity`; the flags are kept,
    except IsRead when `read` says otherwise."""
    value = (int(status) & ~ACTIVITY_MASK) | int(activity)
    if read is not None:
        bit = int(ChatStatus.IS_READ)  # ints: IntFlag's ~ would drop unknown bits
        value = value | bit if read else value & ~bit
    return status_of(value)


class TurnState(OpenStrEnum):
    COMPLETE = "complete"
    CANCELLED = "cancelled"
    ERROR = "error"


class PendingKind(StrEnum):
    STEERING = "steering"
    QUEUED = "queued"


class RequestKind(StrEnum):
    PERMISSION = "permission"
    USER_INPUT = "user_input"
    CLIENT_TOOL = "client_tool"
    AUTHENTICATION = "authentication"


@attrs.frozen(kw_only=True)
class OpenRequest:
    """Something the provider waits on the user or a client for.

    For a client tool `client_id` is the client that executes it; its request
    id is the tool call id. A permission offers `options` (empty: approve or
    deny) and is `editable` when it takes an edited tool input; user input
    asks `questions` (the chat's input request of the same id has them too);
    an authentication is the `auth` challenge its MCP tool call is blocked on
    (the resource to give a token for; the token itself is never here).
    """

    request_id: str
    kind: RequestKind
    turn_id: str
    tool_call_id: str | None = None
    tool_name: str | None = None
    question: str | None = None
    arguments: str = "{}"
    client_id: str | None = None
    options: tuple[ConfirmationOption, ...] = extension(default=())
    editable: bool = extension(default=False)
    questions: tuple[InputQuestion, ...] = extension(default=())
    auth: McpAuthRequirement | None = extension(default=None)


@attrs.frozen(kw_only=True)
class ClientTool:
    """A tool a client executes itself; calls to it wait for that client's result.
    AHP's ToolDefinition: `parameters` is its input schema as JSON text
    (`inputSchema` on the wire, left off while it is `{}`)."""

    name: str
    description: str = extension(default="")
    parameters: str = attrs.field(default="{}", validator=is_json_text)
    title: str | None = None
    output_schema: Json | None = None
    annotations: Json | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class PendingMessage:
    """A steering or queued message waiting in a chat. Inside a chat state's
    lists the wire leaves `kind` out (the list says it). `turn_id`, an
    extension: the turn id its sender chose for it (a turn dispatched while
    another ran); its turn runs under that id (None: one the host makes)."""

    id: str
    kind: PendingKind
    message: UserMessage
    turn_id: str | None = extension(default=None)

    @property
    def text(self) -> str:
        return self.message.text


@attrs.frozen(kw_only=True)
class ActiveTurn:
    """The running turn. `steering` holds steering messages the provider folded
    into this turn (claude, codex); it is an extension field on the AHP turn."""

    id: str
    message: UserMessage
    response_parts: tuple[ResponsePart, ...] = ()
    usage: Usage | None = None
    steering: tuple[PendingMessage, ...] = extension(default=())
    started_at: int | None = iso_time(default=None)

    @property
    def assistant_text(self) -> str:
        return markdown_text(self.response_parts)


@attrs.frozen(kw_only=True)
class Turn:
    """A finished turn. `user_text` and `assistant_text` are views."""

    id: str
    message: UserMessage
    response_parts: tuple[ResponsePart, ...] = ()
    usage: Usage | None = None
    steering: tuple[PendingMessage, ...] = extension(default=())
    state: TurnState
    error: AgentHostError | None = None
    started_at: int | None = iso_time(default=None)
    duration: int | None = None

    @property
    def user_text(self) -> str:
        return self.message.text

    @property
    def assistant_text(self) -> str:
        return markdown_text(self.response_parts)


class ChatOriginKind(OpenStrEnum):
    USER = "user"
    FORK = "fork"  # forked from another chat at a turn
    SIDE_CHAT = "sideChat"  # a side conversation from another chat's turn
    TOOL = "tool"  # a subagent's chat, spawned by a tool call of another chat


@attrs.frozen(kw_only=True)
class SideChatSelection:
    """The text selected when a side chat was created (a snapshot, not a range)."""

    text: str
    response_part_id: str | None = None


@attrs.frozen(kw_only=True)
class ChatOrigin:
    """How a chat came to be. `chat_id` is the source chat (AHP's `chat`, a URI
    on the wire); a fork or side chat names its source `turn_id`, a subagent's
    chat the `tool_call_id` that spawned it."""

    kind: ChatOriginKind = ChatOriginKind.USER
    chat_id: str | None = None
    tool_call_id: str | None = None
    turn_id: str | None = None
    selection: SideChatSelection | None = None


USER_CREATED = ChatOrigin()
"""A chat's origin when nobody said: made by the user (left off the wire)."""


class ChatInteractivity(OpenStrEnum):
    """How a user may use a chat (absent: full)."""

    FULL = "full"
    READ_ONLY = "read-only"
    HIDDEN = "hidden"


@attrs.frozen(kw_only=True)
class ChatState:
    """One chat's state: AHP's chat state with a list of steering messages.

    `steering_message` is the single slot of protocols before 1.1, kept as a
    peer sent it: the host keeps steering in `steering_messages` and never
    fills the slot; reducers clear it when its message is consumed or removed
    (`with_legacy_steering_slot` shows the list's head there for older peers).
    `open_requests` is ours; `input_requests` are AHP's open input requests
    (`inputRequests`). Empty lists and an origin nobody gave are left off the
    wire, as AHP leaves them off.
    """

    resource: str
    title: str = ""
    status: ChatStatus = ChatStatus.IDLE
    modified_at: int = iso_time(default=0, validator=attrs.validators.ge(0))
    turns: tuple[Turn, ...] = ()
    active_turn: ActiveTurn | None = None
    steering_messages: tuple[PendingMessage, ...] = extension(default=())
    queued_messages: tuple[PendingMessage, ...] = extension(default=())
    draft: str | None = None
    open_requests: tuple[OpenRequest, ...] = extension(default=())
    origin: ChatOrigin = implicit(USER_CREATED)
    steering_message: PendingMessage | None = None
    input_requests: tuple[ChatInputRequest, ...] = extension(default=())
    activity: str | None = None
    interactivity: ChatInteractivity | None = None
    parent_chat: str | None = None
    working_directories: tuple[str, ...] | None = None
    changesets: Json | None = None
    turns_next_cursor: str | None = None
    meta: Json | None = wire_name("_meta", default=None)

    @property
    def active_turn_id(self) -> str | None:
        return None if self.active_turn is None else self.active_turn.id

    @property
    def pending(self) -> tuple[PendingMessage, ...]:
        """Steering messages first, then queued ones, each in order."""
        return self.steering_messages + self.queued_messages


def with_legacy_steering_slot(state: ChatState) -> ChatState:
    """The state as a peer of protocol < 1.1 sees it: the head of the steering
    list in the single slot, and no list."""
    head = state.steering_messages[0] if state.steering_messages else state.steering_message
    return attrs.evolve(state, steering_message=head, steering_messages=())


@attrs.frozen(kw_only=True)
class Worktree:
    """A session's git worktree: where it is, the repository, the commit it started at."""

    path: str
    repo: str
    base: str


class SessionLifecycle(OpenStrEnum):
    CREATING = "creating"
    READY = "ready"
    FAILED = "failed"


@attrs.frozen(kw_only=True)
class ChatSummary:
    """One entry of a session's chat catalog (AHP's ChatSummary), or of a session
    summary's chat list (its SessionChatSummary: no status needed there)."""

    resource: str
    title: str = ""
    status: ChatStatus | None = None
    modified_at: int | None = iso_time(default=None)
    activity: str | None = None
    origin: ChatOrigin | None = None
    parent_chat: str | None = None
    interactivity: ChatInteractivity | None = None
    working_directories: tuple[str, ...] | None = None
    changes: ChangesSummary | None = None


@attrs.frozen(kw_only=True)
class ActiveClient:
    """A client providing tools to a session (AHP's SessionActiveClient)."""

    client_id: str
    display_name: str | None = None
    tools: tuple[ClientTool, ...] = ()
    meta: Json | None = wire_name("_meta", default=None)
    customizations: tuple[AnyCustomization, ...] | None = None


class SessionInputKind(OpenStrEnum):
    CHAT_INPUT = "chatInput"
    TOOL_CONFIRMATION = "toolConfirmation"
    TOOL_CLIENT_EXECUTION = "toolClientExecution"
    TOOL_AUTHENTICATION = "toolAuthentication"


@attrs.frozen(kw_only=True)
class SessionInputRequest:
    """Input a session waits on, surfaced so a client can answer it from the
    session channel (AHP's SessionInputRequest): a chat's input `request`, or
    a `tool_call` to confirm, execute (`client_id`'s) or authenticate. `id` is
    the host's opaque key; `chat` the chat to dispatch the answer to."""

    kind: SessionInputKind
    id: str
    chat: str
    turn_id: str | None = None
    client_id: str | None = None
    tool_call: ToolCall | None = None
    request: ChatInputRequest | None = None

    @property
    def awaits_user(self) -> bool:
        """A client executing a tool is work handed out, not a question."""
        return self.kind != SessionInputKind.TOOL_CLIENT_EXECUTION


def _config_pairs(pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """Config values are a mapping: one value per key, in key order."""
    return tuple(sorted(dict(pairs).items()))


def _session_status(value: ChatStatus) -> ChatStatus:
    """The activity and unknown flags; IsRead and IsArchived are `read` and `archived`."""
    return ChatStatus(int(value) & ~int(ChatStatus.IS_READ | ChatStatus.IS_ARCHIVED))


@attrs.frozen(kw_only=True)
class SessionState:
    """A session's own entry: AHP's flat SessionState (provider, title, status,
    lifecycle, active clients, chat catalog, default chat, config).

    `read` and `archived` are the IsRead and IsArchived bits of the wire's
    `status`; `status` holds the rest. `user_titled`: the title is the
    user's, so titles the host derives no longer replace it. `input_needed`
    lists the chats that wait on the user (ours, `inputNeededChats` on the
    wire); `input_requests` is AHP's `inputNeeded`, the requests themselves.
    `config` holds the config values, `config_schema` AHP's schema for them;
    both are `config` on the wire. `model` and `agent` are the session-wide
    selections of protocols before 0.5 (later ones carry them per message).
    """

    title: str = ""
    user_titled: bool = extension(default=False)
    read: bool = True
    archived: bool = False
    config: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_config_pairs)
    input_needed: tuple[str, ...] = wire_name(
        "inputNeededChats", default=(), metadata={OMIT_DEFAULT: True}
    )
    provider: str = ""
    status: ChatStatus = attrs.field(default=ChatStatus.IDLE, converter=_session_status)
    lifecycle: SessionLifecycle = SessionLifecycle.READY
    creation_error: AgentHostError | None = None
    active_clients: tuple[ActiveClient, ...] = ()
    chats: tuple[ChatSummary, ...] = ()
    default_chat: str | None = None
    working_directories: tuple[WorkingDirectory, ...] = extension(default=())
    config_schema: Json | None = None
    input_requests: tuple[SessionInputRequest, ...] = wire_name(
        "inputNeeded", default=(), metadata={OMIT_DEFAULT: True}
    )
    activity: str | None = None
    origin: SessionOrigin | None = None
    project: ProjectInfo | None = None
    repositories: tuple[RepositorySource, ...] | None = None
    server_tools: tuple[ToolDefinition, ...] | None = None
    customizations: tuple[AnyCustomization, ...] | None = None
    changesets: Json | None = None
    artifacts: tuple[Artifact, ...] | None = None
    model: ModelSelection | None = None
    agent: AgentSelection | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class SessionSummary:
    """One row of list_sessions. `status` is the ChatStatus the session's chats add
    up to (idle for a session not in memory)."""

    id: str
    title: str
    provider: str
    turn_count: int
    created_at: int = 0
    status: ChatStatus = ChatStatus.IDLE
    unread: bool = False
    archived: bool = False
    input_needed: bool = False
    config: tuple[tuple[str, str], ...] = ()
    modified_at: int = 0  # the last turn's start or end (ms since the epoch), else created_at


def chat_resource(chat_id: str) -> str:
    return f"ahp-chat:/{chat_id}"


# -- the root channel -------------------------------------------------------------------


class PolicyState(OpenStrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"
    UNCONFIGURED = "unconfigured"


@attrs.frozen(kw_only=True)
class ModelInfo:
    """A model an agent offers (AHP's SessionModelInfo; `vendor` as the provider
    reports it)."""

    id: str
    name: str | None = None
    provider: str | None = None
    vendor: str | None = None
    max_context_window: int | None = None
    supports_vision: bool | None = None
    policy_state: PolicyState | None = None
    config_schema: Json | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class AgentInfo:
    """One agent (provider) the host offers."""

    provider: str
    display_name: str = ""
    description: str = ""
    models: tuple[ModelInfo, ...] = ()
    protected_resources: tuple[ProtectedResourceMetadata, ...] | None = None
    customizations: tuple[AnyCustomization, ...] | None = None


@attrs.frozen(kw_only=True)
class RootState:
    """The root channel's state. Sessions are listed with listSessions and kept
    current by root/* notifications, not held here; `config` is AHP's
    `{schema, values}` as it came."""

    agents: tuple[AgentInfo, ...] = ()
    active_sessions: int | None = None
    terminals: Json | None = None
    config: Json | None = None
    meta: Json | None = wire_name("_meta", default=None)
