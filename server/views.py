"""How the server shows the host's values on the AHP wire, as typed values.

AHP's types (messages/protocol.py, messages/state.py) where agenthost answers
in them; where agenthost's answer adds to them or keeps an older form its own
clients read, a subclass names what it adds:
- `ListedSession`: AHP's SessionSummary (listSessions, root notifications),
  plus `turnCount` and `inputNeeded` (ours: the web page shows the count);
  `SessionsPage` and `SessionAdded` carry it as such;
- `CreatedSession`: createSession's answer (AHP: null), the new session's
  resource and state, which every client here reads its default chat from;
- `CreatedChat`: createChat's answer with the chat in both spellings:
  AHP's `chat` and the `resource` older clients here read;
- `SessionRemoved`: root/sessionRemoved in AHP's shape (`session`) with the
  `resource` older clients here read beside it;
- `SummaryChanged`: root/sessionSummaryChanged in AHP's shape, `changes`
  holding only what changed (`summary_changes`), ours (`turnCount`,
  `inputNeeded`) among them;
- `TurnsPage`: fetchTurns' answer: the turns (AHP before 0.5.1), `hasMore`,
  and `nextCursor` (ours: an offset into the chat's turns).

Nothing here reads the host: these are pure functions of what it answered.
"""

import attrs

from agenthost.messages import protocol as p
from agenthost.messages.common import ProtectedResourceMetadata
from agenthost.messages.fields import extension
from agenthost.messages.state import (
    AgentInfo,
    ChatStatus,
    RootState,
    SessionState,
    SessionSummary,
    Turn,
)
from agenthost.messages.wire import ms_to_iso
from agenthost.server.channels import session_uri

RESERVED_CONFIG = "ahp."
"""Config keys the server keeps for itself (the owner); clients neither see nor set them."""


@attrs.frozen(kw_only=True)
class ListedSession(p.SessionSummary):
    """A session as listSessions and the root notifications show it."""

    turn_count: int = 0
    input_needed: bool = False


@attrs.frozen(kw_only=True)
class SessionsPage(p.ListSessionsResult):
    """listSessions' answer, its items as listed here (the wire encodes a field by
    its declared type: AHP's SessionSummary would drop ours)."""

    items: tuple[ListedSession, ...] = ()


@attrs.frozen(kw_only=True)
class SessionAdded(p.SessionAddedParams):
    summary: ListedSession


@attrs.frozen(kw_only=True)
class CreatedSession:
    resource: str
    state: SessionState


@attrs.frozen(kw_only=True)
class CreatedChat(p.CreateChatResult):
    resource: str


@attrs.frozen(kw_only=True)
class SessionRemoved(p.SessionRemovedParams):
    resource: str


@attrs.frozen(kw_only=True)
class ListedChanges(p.SessionSummaryChanges):
    """What changed of a session as listed (None: unchanged), ours included."""

    turn_count: int | None = None
    input_needed: bool | None = None


@attrs.frozen(kw_only=True)
class SummaryChanged(p.SessionSummaryChangedParams):
    changes: ListedChanges


_CHANGING = ("title", "status", "modified_at", "turn_count", "input_needed")
"""The fields of a listed session that change (the others are its identity)."""


def summary_changes(before: ListedSession | None, after: ListedSession) -> ListedChanges | None:
    """What changed from `before` (None: nothing was sent, so everything is
    news); None when nothing did."""
    changed = {
        name: getattr(after, name)
        for name in _CHANGING
        if before is None or getattr(before, name) != getattr(after, name)
    }
    return ListedChanges(**changed) if changed else None


@attrs.frozen(kw_only=True)
class TurnsPage:
    turns: tuple[Turn, ...]
    has_more: bool
    next_cursor: str | None = extension(default=None)


def status_bits(summary: SessionSummary) -> ChatStatus:
    """AHP's session status: the chats' activity, IsRead 32, IsArchived 64."""
    bits = int(summary.status) | (0 if summary.unread else 32) | (64 if summary.archived else 0)
    return ChatStatus(bits)


def listed(summary: SessionSummary) -> ListedSession:
    return ListedSession(
        resource=session_uri(summary.id),
        provider=summary.provider,
        title=summary.title,
        status=status_bits(summary),
        created_at=ms_to_iso(summary.created_at),
        modified_at=ms_to_iso(summary.modified_at or summary.created_at),
        turn_count=summary.turn_count,
        input_needed=summary.input_needed,
    )


def client_config(pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in pairs if not k.startswith(RESERVED_CONFIG))


def agents(
    providers: list[str], protected: tuple[ProtectedResourceMetadata, ...] = ()
) -> tuple[AgentInfo, ...]:
    """An agent per provider, each behind the server's `protected` resources."""
    return tuple(
        AgentInfo(provider=p, display_name=p, protected_resources=protected or None)
        for p in providers
    )


def root_state(
    providers: list[str],
    protected: tuple[ProtectedResourceMetadata, ...] = (),
    active_sessions: int | None = None,
) -> RootState:
    """The root as an identity sees it: the agents, and how many sessions it holds."""
    return RootState(agents=agents(providers, protected), active_sessions=active_sessions)
