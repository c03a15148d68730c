"""What the store keeps: write operations and the records it loads back.

Operations are frozen values the StoreActor applies in order; the store
keeps rows (sessions, chats, turns, pending messages), not an action log.
"""

import attrs

from agenthost.messages.errors import AgentHostError
from agenthost.messages.state import ChatOrigin, PendingMessage, Turn, TurnState


@attrs.frozen(kw_only=True)
class SaveSession:
    session_id: str
    provider: str
    title: str
    created_at: int
    chat_ids: tuple[str, ...]


@attrs.frozen(kw_only=True)
class SaveChat:
    """A chat added to a session after it was created (a subagent's)."""

    session_id: str
    chat_id: str
    origin: ChatOrigin


@attrs.frozen(kw_only=True)
class SaveTurnStarted:
    session_id: str
    chat_id: str
    turn_id: str
    seq: int
    user_text: str
    started_at: int


@attrs.frozen(kw_only=True)
class SaveAssistantText:
    """The turn's assistant text as far as it became stable."""

    turn_id: str
    text: str


@attrs.frozen(kw_only=True)
class SaveTurnEnded:
    turn_id: str
    state: TurnState
    assistant_text: str
    ended_at: int
    error: AgentHostError | None = None
    finish_reason: str | None = None


@attrs.frozen(kw_only=True)
class SaveSteeringRecorded:
    """A steering message the provider folded into a turn."""

    turn_id: str
    pending_id: str
    text: str
    position: int


@attrs.frozen(kw_only=True)
class SavePending:
    session_id: str
    chat_id: str
    pending: PendingMessage
    position: int


@attrs.frozen(kw_only=True)
class DeletePending:
    pending_id: str


@attrs.frozen(kw_only=True)
class DeleteSession:
    session_id: str


StoreOp = (
    SaveSession
    | SaveChat
    | SaveTurnStarted
    | SaveAssistantText
    | SaveTurnEnded
    | SaveSteeringRecorded
    | SavePending
    | DeletePending
    | DeleteSession
)


@attrs.frozen(kw_only=True)
class ChatRecord:
    chat_id: str
    title: str
    draft: str | None
    turns: tuple[Turn, ...]
    pending: tuple[PendingMessage, ...]
    origin: ChatOrigin = attrs.field(factory=ChatOrigin)


@attrs.frozen(kw_only=True)
class SessionRecord:
    session_id: str
    provider: str
    title: str
    created_at: int
    chats: tuple[ChatRecord, ...]
