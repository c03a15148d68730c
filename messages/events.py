"""Host -> client events, which are also the chat reducer's actions.

Each class is one AHP chat action under a Python name (`wire_type` is its
AHP type: TurnStarted is chat/turnStarted, AssistantDelta is chat/delta, ...).
Host-only events use AHP's `x-` extension names. Every event names its
session and chat; turn events name their turn.
"""

from enum import StrEnum
from typing import ClassVar

import attrs

from agenthost.messages.errors import AgentHostError
from agenthost.messages.fields import Json, extension, iso_time, wire_name
from agenthost.messages.state import (
    ActiveClient,
    ChatState,
    ChatStatus,
    ChatSummary,
    OpenRequest,
    PendingKind,
    PendingMessage,
    ResponsePart,
    SessionState,
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


@attrs.frozen(kw_only=True)
class UsageReported(ChatEvent):
    wire_type: ClassVar[str] = "chat/usage"
    turn_id: str
    usage: Usage


@attrs.frozen(kw_only=True)
class TurnCompleted(ChatEvent):
    wire_type: ClassVar[str] = "chat/turnComplete"
    turn_id: str


@attrs.frozen(kw_only=True)
class TurnCancelled(ChatEvent):
    wire_type: ClassVar[str] = "chat/turnCancelled"
    turn_id: str


@attrs.frozen(kw_only=True)
class TurnFailed(ChatEvent):
    wire_type: ClassVar[str] = "chat/error"
    turn_id: str
    error: AgentHostError


@attrs.frozen(kw_only=True)
class ToolCallStarted(ChatEvent):
    wire_type: ClassVar[str] = "chat/toolCallStart"
    turn_id: str
    tool_call_id: str
    tool_name: str
    display_name: str = ""
    intention: str | None = None
    contributor: Json | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class ToolCallDelta(ChatEvent):
    """Streamed tool input; only while the call is streaming."""

    wire_type: ClassVar[str] = "chat/toolCallDelta"
    turn_id: str
    tool_call_id: str
    content: str
    invocation_message: str | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class ToolCallReady(ChatEvent):
    """The call is ready: with `confirmed` it runs, without it waits for confirmation."""

    wire_type: ClassVar[str] = "chat/toolCallReady"
    turn_id: str
    tool_call_id: str
    invocation_message: str = ""
    tool_input: str | None = None
    confirmed: str | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class ToolCallConfirmed(ChatEvent):
    wire_type: ClassVar[str] = "chat/toolCallConfirmed"
    turn_id: str
    tool_call_id: str
    approved: bool
    confirmed: str | None = None
    reason: str | None = None
    reason_message: str | None = None
    user_suggestion: UserMessage | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class ToolCallCompleted(ChatEvent):
    """The result's fields (`success` ... `error`) are AHP's nested `result` on the wire."""

    wire_type: ClassVar[str] = "chat/toolCallComplete"
    turn_id: str
    tool_call_id: str
    success: bool = True
    past_tense_message: str | None = None
    requires_result_confirmation: bool = extension(default=False)
    content: Json | None = None
    structured_content: Json | None = None
    error: Json | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class ToolCallContentChanged(ChatEvent):
    """The running call's partial content (AHP ToolResultContent[]), replaced whole."""

    wire_type: ClassVar[str] = "chat/toolCallContentChanged"
    turn_id: str
    tool_call_id: str
    content: Json


@attrs.frozen(kw_only=True)
class ToolCallResultConfirmed(ChatEvent):
    wire_type: ClassVar[str] = "chat/toolCallResultConfirmed"
    turn_id: str
    tool_call_id: str
    approved: bool


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
    wire_type: ClassVar[str] = "x-chat/requestClosed"
    request_id: str
    outcome: RequestOutcome


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
    wire_type: ClassVar[str] = "chat/draftChanged"
    draft: str | None = None


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


# -- session actions ------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SessionEvent:
    wire_type: ClassVar[str] = ""
    session_id: str = extension(default="")


@attrs.frozen(kw_only=True)
class SessionReady(SessionEvent):
    """The session's backend is up: lifecycle creating -> ready."""

    wire_type: ClassVar[str] = "session/ready"


@attrs.frozen(kw_only=True)
class SessionCreationFailed(SessionEvent):
    """The session's backend failed to start: lifecycle creating -> failed."""

    wire_type: ClassVar[str] = "session/creationFailed"
    error: AgentHostError


@attrs.frozen(kw_only=True)
class ChatAdded(SessionEvent):
    """A chat joined the session's catalog (upsert by resource)."""

    wire_type: ClassVar[str] = "session/chatAdded"
    summary: ChatSummary


@attrs.frozen(kw_only=True)
class ChatRemoved(SessionEvent):
    wire_type: ClassVar[str] = "session/chatRemoved"
    chat: str


@attrs.frozen(kw_only=True)
class ChatUpdated(SessionEvent):
    """Changed fields of one chat's summary (None: unchanged); AHP nests them in
    `changes` on the wire."""

    wire_type: ClassVar[str] = "session/chatUpdated"
    chat: str
    title: str | None = None
    status: ChatStatus | None = None
    modified_at: int | None = iso_time(default=None)


@attrs.frozen(kw_only=True)
class DefaultChatChanged(SessionEvent):
    wire_type: ClassVar[str] = "session/defaultChatChanged"
    default_chat: str | None = None


@attrs.frozen(kw_only=True)
class ActiveClientSet(SessionEvent):
    """A client joined the session's active clients or refreshed its entry."""

    wire_type: ClassVar[str] = "session/activeClientSet"
    active_client: ActiveClient


@attrs.frozen(kw_only=True)
class ActiveClientRemoved(SessionEvent):
    wire_type: ClassVar[str] = "session/activeClientRemoved"
    client_id: str


@attrs.frozen(kw_only=True)
class SessionTitleChanged(SessionEvent):
    """`by_user` False: a title the host derived, which never replaces the user's."""

    wire_type: ClassVar[str] = "session/titleChanged"
    title: str
    by_user: bool = extension(default=True)


@attrs.frozen(kw_only=True)
class IsReadChanged(SessionEvent):
    wire_type: ClassVar[str] = "session/isReadChanged"
    read: bool = wire_name("isRead")


@attrs.frozen(kw_only=True)
class IsArchivedChanged(SessionEvent):
    wire_type: ClassVar[str] = "session/isArchivedChanged"
    archived: bool = wire_name("isArchived")


@attrs.frozen(kw_only=True)
class ConfigChanged(SessionEvent):
    """Set config values (an empty value removes the key)."""

    wire_type: ClassVar[str] = "session/configChanged"
    config: tuple[tuple[str, str], ...]


@attrs.frozen(kw_only=True)
class InputNeededSet(SessionEvent):
    wire_type: ClassVar[str] = "session/inputNeededSet"
    chat_id: str


@attrs.frozen(kw_only=True)
class InputNeededRemoved(SessionEvent):
    wire_type: ClassVar[str] = "session/inputNeededRemoved"
    chat_id: str


@attrs.frozen(kw_only=True)
class SessionSnapshot(SessionEvent):
    wire_type: ClassVar[str] = "x-session/snapshot"
    state: SessionState
