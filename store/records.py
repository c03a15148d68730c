"""What the store keeps: write operations and the records it loads back.

Operations are frozen values the StoreActor applies in order; the store
keeps rows (sessions, chats, turns, pending messages), not an action log.
"""

from collections.abc import Callable

import attrs

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.state import ChatOrigin, PendingMessage, Turn, TurnState, Worktree


@attrs.frozen(kw_only=True)
class SaveSession:
    session_id: str
    provider: str
    title: str
    created_at: int
    chat_ids: tuple[str, ...]
    worktree: Worktree | None = None


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


@attrs.frozen(kw_only=True)
class TruncateChat:
    """Keep only these turns of the chat (the first ones, in order)."""

    chat_id: str
    keep: tuple[str, ...]


@attrs.frozen(kw_only=True)
class ImportSession:
    """Write a whole session: an import, or a fork."""

    record: "SessionRecord"


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
    | TruncateChat
    | ImportSession
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
    worktree: Worktree | None = None


def fork_record(
    record: SessionRecord, turn_id: str, session_id: str, new_id: Callable[[], str]
) -> SessionRecord:
    """A new session with the default chat's turns up to and including `turn_id`.

    Raises:
        AgentHostError: NOT_FOUND when the default chat has no such turn.
    """
    chat = record.chats[0]
    ids = [turn.id for turn in chat.turns]
    if turn_id not in ids:
        raise AgentHostError(
            code=ErrorCode.NOT_FOUND, message=f"session {record.session_id} has no turn {turn_id}"
        )
    turns = tuple(attrs.evolve(t, id=new_id()) for t in chat.turns[: ids.index(turn_id) + 1])
    forked = ChatRecord(chat_id=new_id(), title=chat.title, draft=None, turns=turns, pending=())
    title = f"Forked: {record.title}" if record.title else "Forked"
    return SessionRecord(
        session_id=session_id,
        provider=record.provider,
        title=title,
        created_at=record.created_at,
        chats=(forked,),
    )
