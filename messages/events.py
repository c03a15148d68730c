"""Host -> client events, which are also the chat reducer's actions.

Each class is one AHP chat action under a Python name (`wire_type` is its
AHP type: TurnStarted is chat/turnStarted, AssistantDelta is chat/delta, ...).
Host-only events use AHP's `x-` extension names. Every event names its
session and chat; turn events name their turn. `meta` is AHP's `_meta` on
the action. Session and root actions live in session_events.py and are
re-exported here.
"""

from enum import StrEnum
from typing import ClassVar

import attrs

from agenthost.messages.common import (
    ConfirmationOption,
    McpAuthRequirement,
    StringOrMarkdown,
    ToolCallContributor,
    ToolInput,
)
from agenthost.messages.errors import AgentHostError
from agenthost.messages.fields import Json, as_object, extension, iso_time, wire_name
from agenthost.messages.inputs import (
    Answers,
    ChatInputRequest,
    InputAnswer,
    InputResponseKind,
    unique_answers,
)
from agenthost.messages.session_events import (  # noqa: F401  (re-exported)
    ActiveClientRemoved,
    ActiveClientSet,
    ActiveSessionsChanged,
    AgentsChanged,
    ChatAdded,
    ChatRemoved,
    ChatsReordered,
    ChatUpdated,
    ConfigChanged,
    CustomizationRemoved,
    CustomizationsChanged,
    CustomizationToggled,
    CustomizationUpdated,
    DefaultChatChanged,
    InputNeededRemoved,
    InputNeededSet,
    IsArchivedChanged,
    IsReadChanged,
    McpServerBackgroundRequested,
    McpServerStartRequested,
    McpServerStateChanged,
    McpServerStopRequested,
    RootConfigChanged,
    RootEvent,
    ServerToolsChanged,
    SessionActivityChanged,
    SessionAgentChanged,
    SessionChangesetsChanged,
    SessionCreationFailed,
    SessionEvent,
    SessionInputNeededRemoved,
    SessionInputNeededSet,
    SessionMetaChanged,
    SessionModelChanged,
    SessionReady,
    SessionSnapshot,
    SessionStatusChanged,
    SessionTitleChanged,
    WorkingDirectoryRemoved,
    WorkingDirectoryReplaced,
    WorkingDirectorySet,
)
from agenthost.messages.state import (
    ChatState,
    ErrorPart,
    OpenRequest,
    PendingKind,
    PendingMessage,
    RequestKind,
    ResponsePart,
    Turn,
    Usage,
    UserMessage,
)


@attrs.frozen(kw_only=True)
class ChatEvent:
    """`session_id` and `chat_id` route an event inside the host; on AHP's wire
    the envelope's channel says where an action belongs, so they are left off
    while empty."""

    wire_type: ClassVar[str] = ""
    session_id: str = extension(default="")
    chat_id: str = extension(default="")


@attrs.frozen(kw_only=True)
class ChatSnapshot(ChatEvent):
    """First event of every subscription: the chat's state at that moment."""

    wire_type: ClassVar[str] = "x-chat/snapshot"
    state: ChatState


@attrs.frozen(kw_only=True)
class TurnStarted(ChatEvent):
    wire_type: ClassVar[str] = "chat/turnStarted"
    turn_id: str
    message: UserMessage
    queued_message_id: str | None = None
    started_at: int | None = iso_time(default=None)
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class ResponsePartAdded(ChatEvent):
    wire_type: ClassVar[str] = "chat/responsePart"
    turn_id: str
    part: ResponsePart


@attrs.frozen(kw_only=True)
class AssistantDelta(ChatEvent):
    wire_type: ClassVar[str] = "chat/delta"
    turn_id: str
    part_id: str
    text: str = wire_name("content")


@attrs.frozen(kw_only=True)
class ReasoningDelta(ChatEvent):
    """Reasoning text appended to a reasoning response part."""

    wire_type: ClassVar[str] = "chat/reasoning"
    turn_id: str
    part_id: str
    content: str
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class UsageReported(ChatEvent):
    wire_type: ClassVar[str] = "chat/usage"
    turn_id: str
    usage: Usage
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class TurnCompleted(ChatEvent):
    """`duration`: the turn's length in ms, by the producer's clock."""

    wire_type: ClassVar[str] = "chat/turnComplete"
    turn_id: str
    duration: int | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class TurnCancelled(ChatEvent):
    wire_type: ClassVar[str] = "chat/turnCancelled"
    turn_id: str
    duration: int | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class TurnFailed(ChatEvent):
    """The turn stopped at an error. Newer peers also send the error as a
    response part (`part`), whose `resumable` allows chat/turnResume."""

    wire_type: ClassVar[str] = "chat/error"
    turn_id: str
    error: AgentHostError
    duration: int | None = None
    part: ErrorPart | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class TurnResumed(ChatEvent):
    """A client resumes the latest turn, which stopped at a resumable error: it
    becomes the active turn again."""

    wire_type: ClassVar[str] = "chat/turnResume"
    turn_id: str
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class TurnsLoaded(ChatEvent):
    """Older turns (oldest first) go before the loaded ones; `turns_next_cursor`
    replaces the chat's cursor (None: every retained turn is loaded)."""

    wire_type: ClassVar[str] = "chat/turnsLoaded"
    turns: tuple[Turn, ...]
    turns_next_cursor: str | None = None


@attrs.frozen(kw_only=True)
class ToolCallStarted(ChatEvent):
    wire_type: ClassVar[str] = "chat/toolCallStart"
    turn_id: str
    tool_call_id: str
    tool_name: str
    display_name: str = ""
    intention: str | None = None
    contributor: ToolCallContributor | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class ToolCallDelta(ChatEvent):
    """Streamed tool input; only while the call is streaming."""

    wire_type: ClassVar[str] = "chat/toolCallDelta"
    turn_id: str
    tool_call_id: str
    content: str | None = None
    invocation_message: StringOrMarkdown | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class ToolCallReady(ChatEvent):
    """The call is ready: with `confirmed` it runs, without it waits for
    confirmation, offering `options` when it has them. A running call made
    ready again needs confirming again."""

    wire_type: ClassVar[str] = "chat/toolCallReady"
    turn_id: str
    tool_call_id: str
    invocation_message: StringOrMarkdown = ""
    tool_input: ToolInput | None = None
    confirmed: str | None = None
    meta: Json | None = wire_name("_meta", default=None)
    contributor: ToolCallContributor | None = None
    intention: str | None = None
    confirmation_title: StringOrMarkdown | None = None
    risk_assessment: Json | None = None
    edits: Json | None = None
    editable: bool | None = None
    options: tuple[ConfirmationOption, ...] | None = None
    started_at: int | None = iso_time(default=None)


@attrs.frozen(kw_only=True)
class ToolCallConfirmed(ChatEvent):
    wire_type: ClassVar[str] = "chat/toolCallConfirmed"
    turn_id: str
    tool_call_id: str
    approved: bool
    confirmed: str | None = None
    reason: str | None = None
    reason_message: StringOrMarkdown | None = None
    user_suggestion: UserMessage | None = None
    meta: Json | None = wire_name("_meta", default=None)
    selected_option_id: str | None = None
    edited_tool_input: str | None = None


@attrs.frozen(kw_only=True)
class ToolCallCompleted(ChatEvent):
    """The result's fields (`success` ... `error`) are AHP's nested `result` on the wire."""

    wire_type: ClassVar[str] = "chat/toolCallComplete"
    turn_id: str
    tool_call_id: str
    success: bool = True
    past_tense_message: StringOrMarkdown | None = None
    requires_result_confirmation: bool = extension(default=False)
    content: Json | None = None
    structured_content: Json | None = None
    error: Json | None = None
    meta: Json | None = wire_name("_meta", default=None)
    duration: int | None = None


@attrs.frozen(kw_only=True)
class ToolCallContentChanged(ChatEvent):
    """The running call's partial content (AHP ToolResultContent[]), replaced whole."""

    wire_type: ClassVar[str] = "chat/toolCallContentChanged"
    turn_id: str
    tool_call_id: str
    content: Json
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class ToolCallResultConfirmed(ChatEvent):
    wire_type: ClassVar[str] = "chat/toolCallResultConfirmed"
    turn_id: str
    tool_call_id: str
    approved: bool
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class ToolCallAuthRequired(ChatEvent):
    """A running call of an MCP server waits for authentication (`auth`)."""

    wire_type: ClassVar[str] = "chat/toolCallAuthRequired"
    turn_id: str
    tool_call_id: str
    auth: McpAuthRequirement
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class ToolCallAuthResolved(ChatEvent):
    """The token arrived: the call runs again."""

    wire_type: ClassVar[str] = "chat/toolCallAuthResolved"
    turn_id: str
    tool_call_id: str
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class ToolCallSubagentStarted(ChatEvent):
    """The tool call spawned a subagent, whose chat is `subagent_chat_id`."""

    wire_type: ClassVar[str] = "x-chat/toolCallSubagent"
    turn_id: str
    tool_call_id: str
    subagent_chat_id: str


@attrs.frozen(kw_only=True)
class RequestOpened(ChatEvent):
    """The provider waits on the user (permission, input) or a client (its tool)."""

    wire_type: ClassVar[str] = "x-chat/requestOpened"
    request: OpenRequest


class RequestOutcome(StrEnum):
    ANSWERED = "answered"
    DENIED = "denied"
    FAILED = "failed"  # e.g. the client that owned a tool is gone
    CANCELLED = "cancelled"  # its turn ended first


@attrs.frozen(kw_only=True)
class RequestClosed(ChatEvent):
    """`kind`: the closed request's (what a peer that gets questions as
    chat/inputRequested needs to leave a question's close out)."""

    wire_type: ClassVar[str] = "x-chat/requestClosed"
    request_id: str
    outcome: RequestOutcome
    kind: RequestKind | None = extension(default=None)


class RemovalReason(StrEnum):
    CLIENT = "client"
    CONSUMED = "consumed"
    CANCELLED = "cancelled"
    WITHDRAWN = "withdrawn"
    REQUEUED = "requeued"  # steering the provider could not take became a queued message
    REJECTED = "rejected"  # admission refused it when its turn came


@attrs.frozen(kw_only=True)
class PendingMessageAdded(ChatEvent):
    """On the wire the pending message's fields are the action's: {kind, id, message}."""

    wire_type: ClassVar[str] = "chat/pendingMessageSet"
    pending: PendingMessage


@attrs.frozen(kw_only=True)
class PendingMessageRemoved(ChatEvent):
    """`reason` is ours (AHP's action is {kind, id})."""

    wire_type: ClassVar[str] = "chat/pendingMessageRemoved"
    kind: PendingKind
    pending_id: str = wire_name("id")
    reason: RemovalReason = extension(default=RemovalReason.CLIENT)


@attrs.frozen(kw_only=True)
class QueuedMessagesReordered(ChatEvent):
    """The queue's new order (every queued id, in order)."""

    wire_type: ClassVar[str] = "chat/queuedMessagesReordered"
    order: tuple[str, ...]


@attrs.frozen(kw_only=True)
class SteeringRecorded(ChatEvent):
    """The provider folded a steering message into the running turn (claude, codex)."""

    wire_type: ClassVar[str] = "x-chat/steeringRecorded"
    turn_id: str
    pending: PendingMessage


@attrs.frozen(kw_only=True)
class SteeringWithdrawn(ChatEvent):
    """The provider gave back a steering message: the model never saw it."""

    wire_type: ClassVar[str] = "x-chat/steeringWithdrawn"
    pending_id: str


@attrs.frozen(kw_only=True)
class SteeringNotWithdrawn(ChatEvent):
    """The model already had the steering message: it stays until its echo consumes it."""

    wire_type: ClassVar[str] = "x-chat/steeringNotWithdrawn"
    pending_id: str


@attrs.frozen(kw_only=True)
class Truncated(ChatEvent):
    wire_type: ClassVar[str] = "chat/truncated"
    turn_id: str | None = None


@attrs.frozen(kw_only=True)
class Lagged(ChatEvent):
    """Sent to a subscriber that fell too far behind, just before it is closed."""

    wire_type: ClassVar[str] = "x-lagged"
    dropped: int = 0


@attrs.frozen(kw_only=True)
class DraftChanged(ChatEvent):
    """The chat's draft text (AHP's draft is a message; agenthost keeps its text)."""

    wire_type: ClassVar[str] = "chat/draftChanged"
    draft: str | None = None


@attrs.frozen(kw_only=True)
class ActivityChanged(ChatEvent):
    """What the chat is doing now, in words (None clears it)."""

    wire_type: ClassVar[str] = "chat/activityChanged"
    activity: str | None = None


@attrs.frozen(kw_only=True)
class ChatIsReadChanged(ChatEvent):
    wire_type: ClassVar[str] = "chat/isReadChanged"
    read: bool = wire_name("isRead")


@attrs.frozen(kw_only=True)
class ChatIsArchivedChanged(ChatEvent):
    wire_type: ClassVar[str] = "chat/isArchivedChanged"
    archived: bool = wire_name("isArchived")


@attrs.frozen(kw_only=True)
class ChatWorkingDirectorySet(ChatEvent):
    """A session working directory joins the chat's subset."""

    wire_type: ClassVar[str] = "chat/workingDirectorySet"
    directory: str


@attrs.frozen(kw_only=True)
class ChatWorkingDirectoryRemoved(ChatEvent):
    wire_type: ClassVar[str] = "chat/workingDirectoryRemoved"
    directory: str


@attrs.frozen(kw_only=True)
class ChatChangesetsChanged(ChatEvent):
    """The chat's changeset catalogue replaced whole (None clears it)."""

    wire_type: ClassVar[str] = "chat/changesetsChanged"
    changesets: Json | None = None


@attrs.frozen(kw_only=True)
class InputRequested(ChatEvent):
    """The chat asks for input: a request is added, or replaces the open one with
    its id (keeping that one's answers unless it brings its own)."""

    wire_type: ClassVar[str] = "chat/inputRequested"
    request: ChatInputRequest


@attrs.frozen(kw_only=True)
class InputAnswerChanged(ChatEvent):
    """A client drafts, submits, skips (or, with None, clears) one answer."""

    wire_type: ClassVar[str] = "chat/inputAnswerChanged"
    request_id: str
    question_id: str
    answer: InputAnswer | None = None


@attrs.frozen(kw_only=True)
class InputCompleted(ChatEvent):
    """A client accepts, declines or cancels an input request; `answers` replace
    the synced ones of the same questions."""

    wire_type: ClassVar[str] = "chat/inputCompleted"
    request_id: str
    response: InputResponseKind
    answers: Answers | None = as_object(default=None, converter=unique_answers)


@attrs.frozen(kw_only=True)
class ChatTitleChanged(ChatEvent):
    """A chat's title changed (`by_user`: the user named it)."""

    wire_type: ClassVar[str] = "x-chat/titleChanged"
    title: str
    by_user: bool = True


@attrs.frozen(kw_only=True)
class ReadOnlyChanged(ChatEvent):
    """A chat became read-only, or writable again (a host flag, not chat state)."""

    wire_type: ClassVar[str] = "x-chat/readOnlyChanged"
    read_only: bool


TERMINAL_EVENTS = (TurnCompleted, TurnCancelled, TurnFailed)
