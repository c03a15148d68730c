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


ResponsePart = MarkdownPart


def _markdown_text(parts: tuple[ResponsePart, ...]) -> str:
    return "".join(part.content for part in parts if part.kind == "markdown")


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

    @property
    def active_turn_id(self) -> str | None:
        return None if self.active_turn is None else self.active_turn.id

    @property
    def pending(self) -> tuple[PendingMessage, ...]:
        """Steering messages first, then queued ones, each in order."""
        return self.steering_messages + self.queued_messages


@attrs.frozen(kw_only=True)
class SessionSummary:
    id: str
    title: str
    provider: str
    turn_count: int
    created_at: int = 0


def chat_resource(chat_id: str) -> str:
    return f"ahp-chat:/{chat_id}"
