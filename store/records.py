"""What the store keeps: write operations and the records it loads back.

Operations are frozen values the StoreActor applies in order; the store
keeps rows (sessions, chats, turns, pending messages), not an action log.
A turn or pending message is named by its chat and its id together: ids a
client chooses are unique within their chat only (migration 0011).
"""

from collections.abc import Callable

import attrs

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.state import (
    Attachment,
    ChatOrigin,
    MessageOrigin,
    PendingMessage,
    ResponsePart,
    SessionState,
    Turn,
    TurnState,
    Usage,
    Worktree,
)


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
class SaveProviderRef:
    """What the chat's provider needs to resume its conversation (opaque here).

    An update of the chat's row: the session's own write, which inserts the
    row, reaches the store before any connection of the session can report."""

    chat_id: str
    provider_ref: str


@attrs.frozen(kw_only=True)
class SaveTurnStarted:
    session_id: str
    chat_id: str
    turn_id: str
    seq: int
    user_text: str
    started_at: int
    attachments: tuple[Attachment, ...] = ()
    origin: MessageOrigin = attrs.field(factory=MessageOrigin)


@attrs.frozen(kw_only=True)
class SaveAssistantText:
    """The turn's assistant text as far as it became stable."""

    chat_id: str
    turn_id: str
    text: str


@attrs.frozen(kw_only=True)
class SaveTurnEnded:
    chat_id: str
    turn_id: str
    state: TurnState
    assistant_text: str
    ended_at: int
    error: AgentHostError | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    # The turn's response parts as it ended (None: its assistant text alone, one
    # markdown part). The store keeps them only where they say more than the text.
    response_parts: tuple[ResponsePart, ...] | None = None


@attrs.frozen(kw_only=True)
class SaveSteeringRecorded:
    """A steering message the provider folded into a turn."""

    chat_id: str
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
    chat_id: str
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


@attrs.frozen(kw_only=True)
class SaveSessionState:
    """The session entry: title and flags (input needed is not kept: it is live)."""

    session_id: str
    state: SessionState


@attrs.frozen(kw_only=True)
class SaveChatMeta:
    """A chat's title, read-only flag and its IsRead and IsArchived status flags
    (None: unchanged)."""

    chat_id: str
    title: str | None = None
    read_only: bool | None = None
    read: bool | None = None
    archived: bool | None = None


@attrs.frozen(kw_only=True)
class DeleteChat:
    chat_id: str


@attrs.frozen(kw_only=True)
class MementoKey:
    """A contribution's memento: per session (`chat_id` "") or per chat."""

    session_id: str
    chat_id: str
    contribution: str
    key: str


@attrs.frozen(kw_only=True)
class SetMemento:
    key: MementoKey
    value: str  # JSON


@attrs.frozen(kw_only=True)
class DeleteMemento:
    key: MementoKey


@attrs.frozen(kw_only=True)
class ReleaseLease:
    """The session left this shard's memory: its lease is released (a store
    without a shard identity ignores it)."""

    session_id: str


StoreOp = (
    SaveSession
    | SaveChat
    | SaveProviderRef
    | SaveTurnStarted
    | SaveAssistantText
    | SaveTurnEnded
    | SaveSteeringRecorded
    | SavePending
    | DeletePending
    | DeleteSession
    | TruncateChat
    | ImportSession
    | SaveSessionState
    | SaveChatMeta
    | DeleteChat
    | SetMemento
    | DeleteMemento
    | ReleaseLease
)


@attrs.frozen(kw_only=True)
class ChatRecord:
    chat_id: str
    title: str
    draft: str | None
    turns: tuple[Turn, ...]
    pending: tuple[PendingMessage, ...]
    origin: ChatOrigin = attrs.field(factory=ChatOrigin)
    read_only: bool = False
    provider_ref: str | None = None  # what its provider resumes it by (SaveProviderRef)
    read: bool = False  # its status's IsRead flag (a new chat has it clear)
    archived: bool = False  # its status's IsArchived flag


@attrs.frozen(kw_only=True)
class SessionRecord:
    session_id: str
    provider: str
    title: str
    created_at: int
    chats: tuple[ChatRecord, ...]
    worktree: Worktree | None = None
    state: SessionState = attrs.field(factory=SessionState)
    mementos: tuple[SetMemento, ...] = ()


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
