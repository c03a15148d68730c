"""Value types of chat and session state, shaped after AHP's state tree.

Everything here is a frozen, slotted attrs value; sequences are tuples. The
AHP names (activeTurn, responseParts, queuedMessages, ...) are the wire names
of these fields; messages/wire.py does the translation. Views that the
public surface promises (`Turn.user_text`, `Turn.assistant_text`,
`ChatState.pending`, `ChatState.active_turn_id`) are derived, never stored.
"""

from enum import IntFlag, StrEnum

import attrs

from agenthost.messages.errors import AgentHostError, OpenStrEnum
from agenthost.messages.fields import OMIT_DEFAULT, Json, extension, iso_time, wire_name


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


def with_activity(
    status: ChatStatus, activity: ChatStatus, *, read: bool | None = None
) -> ChatStatus:
    """`status` with its activity bits replaced by `activity`; the flags are kept,
    except IsRead when `read` says otherwise."""
    value = (int(status) & ~ACTIVITY_MASK) | int(activity)
    if read is not None:
        bit = int(ChatStatus.IS_READ)  # ints: IntFlag's ~ would drop unknown bits
        value = value | bit if read else value & ~bit
    return ChatStatus(value)


class TurnState(OpenStrEnum):
    COMPLETE = "complete"
    CANCELLED = "cancelled"
    ERROR = "error"


class PendingKind(StrEnum):
    STEERING = "steering"
    QUEUED = "queued"


class OriginKind(OpenStrEnum):
    USER = "user"
    STEERING = "steering"
    QUEUED = "queued"


@attrs.frozen(kw_only=True)
class MessageOrigin:
    kind: OriginKind = OriginKind.USER


@attrs.frozen(kw_only=True)
class Attachment:
    """A text file sent with a message (its name and its text)."""

    name: str
    text: str


@attrs.frozen(kw_only=True)
class UserMessage:
    """A user's message as AHP carries it: text and where it came from, plus
    (an extension) the text attachments sent with it."""

    text: str
    origin: MessageOrigin = MessageOrigin()
    attachments: tuple[Attachment, ...] = extension(default=())

    @property
    def prompt(self) -> str:
        """The text with its attachments, as a model reads it."""
        return with_attachments(self.text, self.attachments)


def with_attachments(text: str, attachments: tuple[Attachment, ...]) -> str:
    """`text`, then each attachment in a fenced block named after its file."""
    blocks = [f'<attachment name="{a.name}">\n{a.text}\n</attachment>' for a in attachments]
    return "\n\n".join([text, *blocks])


@attrs.frozen(kw_only=True)
class MarkdownPart:
    """A markdown response part; deltas append to `content`."""

    id: str
    content: str = ""
    kind: str = attrs.field(default="markdown", init=False)


@attrs.frozen(kw_only=True)
class ReasoningPart:
    """The model's reasoning; chat/reasoning deltas append to `content`."""

    id: str
    content: str = ""
    kind: str = attrs.field(default="reasoning", init=False)


@attrs.frozen(kw_only=True)
class TextPosition:
    line: int
    character: int


@attrs.frozen(kw_only=True)
class TextRange:
    start: TextPosition
    end: TextPosition


@attrs.frozen(kw_only=True)
class TextLocation:
    """Where in a text source an attribution points."""

    range: TextRange
    kind: str = attrs.field(default="text", init=False)


@attrs.frozen(kw_only=True)
class PageLocation:
    """Which pages of a paged source (a PDF) an attribution points at."""

    start_page: int
    end_page: int | None = None
    kind: str = attrs.field(default="page", init=False)


SourceLocation = TextLocation | PageLocation


@attrs.frozen(kw_only=True)
class AttributionSource:
    id: str
    title: str
    uri: str | None = None
    content_type: str | None = None
    excerpt: str | None = None
    location: SourceLocation | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class AttributionSpan:
    """A range of the target part's text and the sources it rests on."""

    range: TextRange
    source_ids: tuple[str, ...]


@attrs.frozen(kw_only=True)
class AttributionPart:
    """Sources for the text of another response part (`target_part_id`)."""

    id: str
    target_part_id: str
    sources: tuple[AttributionSource, ...] = ()
    spans: tuple[AttributionSpan, ...] = ()
    meta: Json | None = wire_name("_meta", default=None)
    kind: str = attrs.field(default="attribution", init=False)


@attrs.frozen(kw_only=True)
class Usage:
    """Token usage; AHP's UsageInfo (`inputTokens`, `outputTokens`) on the wire."""

    prompt_tokens: int = wire_name("inputTokens", default=0)
    completion_tokens: int = wire_name("outputTokens", default=0)
    cache_read_tokens: int | None = None
    model: str | None = None


class ToolCallStatus(OpenStrEnum):
    """AHP's tool-call states; completed and cancelled are terminal."""

    STREAMING = "streaming"
    PENDING_CONFIRMATION = "pending-confirmation"
    RUNNING = "running"
    PENDING_RESULT_CONFIRMATION = "pending-result-confirmation"
    COMPLETED = "completed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (ToolCallStatus.COMPLETED, ToolCallStatus.CANCELLED)

    @property
    def waits_for_user(self) -> bool:
        return self in (
            ToolCallStatus.PENDING_CONFIRMATION,
            ToolCallStatus.PENDING_RESULT_CONFIRMATION,
        )


@attrs.frozen(kw_only=True)
class ToolCall:
    """One tool call of a turn: AHP's ToolCallState, one class for all its
    statuses (a field a status does not have is None). `reason` says why a
    cancelled call was cancelled: denied, skipped (its turn ended first) or
    result-denied. `partial_input` is the input while it streams; `content`,
    `structured_content`, `error`, `contributor` and `meta` are AHP values
    agenthost passes through. `subagent_chat_id` is ours."""

    tool_call_id: str
    tool_name: str
    display_name: str = ""
    status: ToolCallStatus = ToolCallStatus.STREAMING
    intention: str | None = None
    invocation_message: str = ""
    tool_input: str | None = None
    confirmed: str | None = None
    success: bool | None = None
    past_tense_message: str | None = None
    reason: str | None = None
    subagent_chat_id: str | None = None
    contributor: Json | None = None
    meta: Json | None = wire_name("_meta", default=None)
    partial_input: str | None = None
    content: Json | None = None
    structured_content: Json | None = None
    error: Json | None = None
    reason_message: str | None = None
    user_suggestion: UserMessage | None = None


@attrs.frozen(kw_only=True)
class ToolCallPart:
    tool_call: ToolCall
    kind: str = attrs.field(default="toolCall", init=False)

    @property
    def id(self) -> str:
        return self.tool_call.tool_call_id


ResponsePart = MarkdownPart | ToolCallPart | ReasoningPart | AttributionPart


def _markdown_text(parts: tuple[ResponsePart, ...]) -> str:
    return "".join(part.content for part in parts if isinstance(part, MarkdownPart))


class RequestKind(StrEnum):
    PERMISSION = "permission"
    USER_INPUT = "user_input"
    CLIENT_TOOL = "client_tool"


@attrs.frozen(kw_only=True)
class OpenRequest:
    """Something the provider waits on the user or a client for.

    For a client tool `client_id` is the client that executes it; its request
    id is the tool call id.
    """

    request_id: str
    kind: RequestKind
    turn_id: str
    tool_call_id: str | None = None
    tool_name: str | None = None
    question: str | None = None
    arguments: str = "{}"
    client_id: str | None = None


@attrs.frozen(kw_only=True)
class ClientTool:
    """A tool a client executes itself; calls to it wait for that client's result."""

    name: str
    description: str = ""
    parameters: str = "{}"


@attrs.frozen(kw_only=True)
class PendingMessage:
    """A steering or queued message waiting in a chat. Inside a chat state's
    lists the wire leaves `kind` out (the list says it)."""

    id: str
    kind: PendingKind
    message: UserMessage

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
        return _markdown_text(self.response_parts)


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
        return _markdown_text(self.response_parts)


class ChatOriginKind(OpenStrEnum):
    USER = "user"
    TOOL = "tool"  # a subagent's chat, spawned by a tool call of another chat


@attrs.frozen(kw_only=True)
class ChatOrigin:
    kind: ChatOriginKind = ChatOriginKind.USER
    chat_id: str | None = None
    tool_call_id: str | None = None


@attrs.frozen(kw_only=True)
class ChatState:
    """One chat's state: AHP's chat state with a list of steering messages.

    `steering_message` is the single slot of protocols before 1.1, kept as a
    peer sent it: the host keeps steering in `steering_messages` and never
    fills the slot; reducers clear it when its message is consumed or removed
    (`with_legacy_steering_slot` shows the list's head there for older peers).
    `open_requests` is ours; empty lists and the default origin are left off
    the wire, as AHP leaves them off.
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
    origin: ChatOrigin = extension(factory=ChatOrigin)
    steering_message: PendingMessage | None = None

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
    """One entry of a session's chat catalog."""

    resource: str
    title: str = ""
    status: ChatStatus = ChatStatus.IDLE
    modified_at: int | None = iso_time(default=None)


@attrs.frozen(kw_only=True)
class ActiveClient:
    """A client providing tools to a session (AHP's SessionActiveClient)."""

    client_id: str
    display_name: str | None = None
    tools: tuple[ClientTool, ...] = ()
    meta: Json | None = wire_name("_meta", default=None)


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
    wire: AHP's `inputNeeded` lists requests). `config` holds the config
    values, `config_schema` AHP's schema for them; both are `config` on the wire.
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
    working_directories: tuple[str, ...] = extension(default=())
    config_schema: Json | None = None


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


def chat_resource(chat_id: str) -> str:
    return f"ahp-chat:/{chat_id}"
