"""Client -> host commands (imperative names) and their replies.

The public surface turns each call into one of these and asks the owning
actor; replies are `<Command>Reply` values or `TurnOutcome`.
"""

from enum import StrEnum

import attrs

from agenthost.messages.errors import AgentHostError
from agenthost.messages.state import PendingMessage


@attrs.frozen(kw_only=True)
class CreateSession:
    provider: str


@attrs.frozen(kw_only=True)
class OpenSession:
    session_id: str


@attrs.frozen(kw_only=True)
class ListSessions:
    pass


@attrs.frozen(kw_only=True)
class DisposeSession:
    session_id: str


@attrs.frozen(kw_only=True)
class SendMessage:
    text: str


@attrs.frozen(kw_only=True)
class SteerMessage:
    text: str


@attrs.frozen(kw_only=True)
class RemovePendingMessage:
    pending_id: str


@attrs.frozen(kw_only=True)
class EditPendingMessage:
    pending_id: str
    text: str


@attrs.frozen(kw_only=True)
class ReorderQueue:
    pending_ids: tuple[str, ...]


@attrs.frozen(kw_only=True)
class CancelTurn:
    pass


@attrs.frozen(kw_only=True)
class GetChatState:
    pass


class OutcomeState(StrEnum):
    COMPLETE = "complete"
    CANCELLED = "cancelled"
    ERROR = "error"
    REJECTED = "rejected"
    HANDLED = "handled"
    REMOVED = "removed"


@attrs.frozen(kw_only=True)
class TurnOutcome:
    """How a send ended: the turn's state, its final assistant text, its error."""

    state: OutcomeState
    text: str = ""
    error: AgentHostError | None = None
    turn_id: str | None = None


@attrs.frozen(kw_only=True)
class SendMessageReply:
    """`turn_id` is None when the message was queued; `pending` is then its entry."""

    turn_id: str | None
    pending: PendingMessage | None = None


COMMAND_TYPES = (
    CreateSession,
    OpenSession,
    ListSessions,
    DisposeSession,
    SendMessage,
    SteerMessage,
    RemovePendingMessage,
    EditPendingMessage,
    ReorderQueue,
    CancelTurn,
    GetChatState,
)
