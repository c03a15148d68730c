"""Value types of chat and session state, shaped after AHP's state tree.

Everything here is a frozen, slotted attrs value; sequences are tuples. The
AHP names (activeTurn, responseParts, queuedMessages, ...) are the wire names
of these fields; messages/wire.py does the translation. Views that the
public surface promises (`Turn.user_text`, `Turn.assistant_text`,
`ChatState.pending`, `ChatState.active_turn_id`) are derived, never stored.
"""

from enum import IntFlag, StrEnum

import attrs

from agenthost.messages.errors import AgentHostError


class ChatStatus(IntFlag):
    """AHP's status bitset (InputNeeded includes InProgress)."""

    IDLE = 1
    ERROR = 2
    IN_PROGRESS = 8
    INPUT_NEEDED = 24
    IS_READ = 32
    IS_ARCHIVED = 64


class TurnState(StrEnum):
    COMPLETE = "complete"
    CANCELLED = "cancelled"
    ERROR = "error"


class PendingKind(StrEnum):
    STEERING = "steering"
    QUEUED = "queued"


class OriginKind(StrEnum):
    USER = "user"
    STEERING = "steering"
    QUEUED = "queued"


@attrs.frozen(kw_only=True)
class MessageOrigin:
    kind: OriginKind = OriginKind.USER


@attrs.frozen(kw_only=True)
class UserMessage:
    """A user's message as AHP carries it: text and where it came from."""

    text: str
    origin: MessageOrigin = MessageOrigin()


@attrs.frozen(kw_only=True)
class MarkdownPart:
    """A markdown response part; deltas append to `content`."""

    id: str
    content: str = ""
    kind: str = "markdown"


@attrs.frozen(kw_only=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ToolCallStatus(StrEnum):
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
    """One tool call of a turn. `reason` says why a cancelled call was cancelled:
    denied, skipped (its turn ended first) or result-denied."""

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


@attrs.frozen(kw_only=True)
class ToolCallPart:
    tool_call: ToolCall
    kind: str = "toolCall"

    @property
    def id(self) -> str:
        return self.tool_call.tool_call_id


ResponsePart = MarkdownPart | ToolCallPart


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
    """A steering or queued message waiting in a chat."""

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
    steering: tuple[PendingMessage, ...] = ()

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
    steering: tuple[PendingMessage, ...] = ()
    state: TurnState
    error: AgentHostError | None = None

    @property
    def user_text(self) -> str:
        return self.message.text

    @property
    def assistant_text(self) -> str:
        return _markdown_text(self.response_parts)


class ChatOriginKind(StrEnum):
    USER = "user"
    TOOL = "tool"  # a subagent's chat, spawned by a tool call of another chat


@attrs.frozen(kw_only=True)
class ChatOrigin:
    kind: ChatOriginKind = ChatOriginKind.USER
    chat_id: str | None = None
    tool_call_id: str | None = None


@attrs.frozen(kw_only=True)
class ChatState:
    """One chat's state: AHP's chat state with a list of steering messages."""

    resource: str
    title: str = ""
    status: ChatStatus = ChatStatus.IDLE
    modified_at: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    turns: tuple[Turn, ...] = ()
    active_turn: ActiveTurn | None = None
    steering_messages: tuple[PendingMessage, ...] = ()
    queued_messages: tuple[PendingMessage, ...] = ()
    draft: str | None = None
    open_requests: tuple[OpenRequest, ...] = ()
    origin: ChatOrigin = attrs.field(factory=ChatOrigin)

    @property
    def active_turn_id(self) -> str | None:
        return None if self.active_turn is None else self.active_turn.id

    @property
    def pending(self) -> tuple[PendingMessage, ...]:
        """Steering messages first, then queued ones, each in order."""
        return self.steering_messages + self.queued_messages


@attrs.frozen(kw_only=True)
class Worktree:
    """A session's git worktree: where it is, the repository, the commit it started at."""

    path: str
    repo: str
    base: str


@attrs.frozen(kw_only=True)
class SessionState:
    """A session's own entry: AHP's session metadata (title, the IsRead and
    IsArchived status bits, config, input needed). `user_titled`: the title
    is the user's, so titles the host derives no longer replace it.
    `input_needed` lists the chats that wait on the user."""

    title: str = ""
    user_titled: bool = False
    read: bool = True
    archived: bool = False
    config: tuple[tuple[str, str], ...] = ()
    input_needed: tuple[str, ...] = ()


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
