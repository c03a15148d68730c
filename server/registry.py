"""Who owns which session, and the handles of the sessions the server uses.

`Registry` answers "this session (or chat), if this identity owns it", on the
event loop's thread. The owner is the session's `ahp.owner` config value,
kept in the store; the registry caches it with the session's handle and its
chats only while the session is in memory.

Invariants:
1. Anyone but the owner is told "not found", and nobody else's lookup loads
   a session: the owner is read from the store (`find_session`, one indexed
   row) before the session is opened.
2. Nothing here outlives its session's stay in memory: `departed` (the host
   released, collected or disposed it) drops its owner, handle and chats, so
   the tables hold only resident sessions, whatever the store holds.
3. A lookup whose session was disposed while it read the store reads again
   (the id may be free or another identity's by now); each lookup in flight
   records the disposals it overlapped, and nothing stays once it ends.
4. Only a session opened here (so resident) is cached: a lookup that finds
   another identity's session, or none, or one with no owner yet, keeps
   nothing (the host may give it an owner later).
"""

from collections.abc import Callable
from typing import Any

import attrs

from agenthost.actors.aio import AsyncChat, AsyncHost, AsyncSession
from agenthost.messages.errors import AgentHostError
from agenthost.messages.state import SessionSummary
from agenthost.server.errors import RpcError, chat_not_found, is_not_found, session_not_found
from agenthost.store.base import OWNER_KEY


@attrs.define(eq=False)
class _Lookup:
    """A store read in flight, and the sessions disposed meanwhile."""

    disposed: set[str] = attrs.field(factory=set)


@attrs.frozen(kw_only=True)
class TableSizes:
    """How many entries the registry holds (all zero once no session is resident)."""

    owners: int
    identities: int
    handles: int
    chats: int
    sessions_with_chats: int
    lookups: int


def _owner_of(found: SessionSummary | None) -> str | None:
    """A stored session's owner; None for none, or a session nobody owns yet."""
    return None if found is None else dict(found.config).get(OWNER_KEY) or None


class Registry:
    """Sessions' owners, handles and chats while they are in memory (loop thread only)."""

    def __init__(
        self, host: AsyncHost, admit: Callable[[str, int], None] = lambda identity, count: None
    ) -> None:
        self._host = host
        self._admit = admit  # (identity, its resident sessions): raises past its quota
        self._owners: dict[str, str] = {}  # session id -> identity
        self._per_owner: dict[str, int] = {}  # identity -> its sessions noted here
        self._handles: dict[str, AsyncSession] = {}
        self._chat_sessions: dict[str, str] = {}  # chat id -> session id
        self._session_chats: dict[str, set[str]] = {}  # session id -> its chat ids
        self._lookups: set[_Lookup] = set()

    # -- lookups ----------------------------------------------------------------------
    async def session(self, session_id: str, identity: str) -> AsyncSession:
        """The session, if `identity` owns it.

        Raises:
            RpcError: SESSION_NOT_FOUND, whether it does not exist or is another's.
        """
        owner = self._owners.get(session_id)
        if owner is None:
            owner = _owner_of(await self.find(session_id=session_id))
        if owner != identity:
            raise session_not_found(session_id)
        return await self._open_owned(session_id, owner)

    async def chat(self, chat_id: str, identity: str) -> tuple[AsyncSession, AsyncChat]:
        """The chat and its session, if `identity` owns it; a chat not seen yet is
        looked up in the store, and only its own session is loaded.

        Raises:
            RpcError: NOT_FOUND, whether it does not exist or is another's.
        """
        session_id = self._chat_sessions.get(chat_id)
        owner = None if session_id is None else self._owners.get(session_id)
        if session_id is None or owner is None:
            found = await self.find(chat_id=chat_id)
            if found is None:
                raise chat_not_found(chat_id)
            session_id, owner = found.id, _owner_of(found)
        if owner != identity:
            raise chat_not_found(chat_id)
        try:
            session = await self._open_owned(session_id, owner)
        except RpcError as error:
            if not is_not_found(error):
                raise  # the owner's own quota: it says so
            raise chat_not_found(chat_id) from error
        self.note_chats(session_id, (chat_id,))
        return session, await session.chat(chat_id)

    async def find(
        self, session_id: str | None = None, chat_id: str | None = None
    ) -> SessionSummary | None:
        """The stored session (`session_id=` or `chat_id=`), read again when that
        session was disposed while this read ran (its id may be free or another
        identity's by now). Caches nothing: only a session opened is noted."""
        while True:
            lookup = _Lookup()
            self._lookups.add(lookup)
            try:
                found = await self._host.find_session(session_id, chat_id=chat_id)
            finally:
                self._lookups.discard(lookup)
            if found is None or found.id not in lookup.disposed:
                return found

    async def _open_owned(self, session_id: str, owner: str) -> AsyncSession:
        """Open a session known to be `owner`'s (within its resident quota); now
        resident, its owner is kept until it leaves memory (what a creator
        noted meanwhile wins)."""
        if session_id not in self._owners:
            self._admit(owner, self._per_owner.get(owner, 0))
        handle = await self.open(session_id)
        self._note_owner(session_id, owner)
        return handle

    def _note_owner(self, session_id: str, owner: str) -> None:
        if session_id not in self._owners:
            self._owners[session_id] = owner
            self._per_owner[owner] = self._per_owner.get(owner, 0) + 1

    def owned_by(self, identity: str) -> tuple[str, ...]:
        """The ids of the identity's sessions in memory, as far as the server knows."""
        return tuple(sid for sid, owner in self._owners.items() if owner == identity)

    def resident_of(self, identity: str) -> int:
        """How many of the identity's sessions are in memory as far as the server knows."""
        return self._per_owner.get(identity, 0)

    async def open(self, session_id: str) -> AsyncSession:
        """The session's handle (restored into memory by its next call if released).

        Raises:
            RpcError: SESSION_NOT_FOUND when the host cannot open it.
        """
        handle = self._handles.get(session_id)
        if handle is None:
            try:
                handle = await self._host.open_session(session_id)
            except AgentHostError as error:
                raise session_not_found(session_id) from error
            self._handles[session_id] = handle
        return handle

    def owner(self, session_id: str) -> str | None:
        """The owner, if the session is known here."""
        return self._owners.get(session_id)

    # -- what the server learns -----------------------------------------------------------
    def created(self, session_id: str, identity: str, handle: AsyncSession) -> None:
        self._note_owner(session_id, identity)
        self._handles[session_id] = handle

    def note_chats(self, session_id: str, chat_ids: Any) -> None:
        """These chats belong to the session (known while it is in memory)."""
        if session_id not in self._owners and session_id not in self._handles:
            return  # the session is not known here (a creator may not have noted it yet)
        chats = self._session_chats.setdefault(session_id, set())
        for chat_id in chat_ids:
            self._chat_sessions[chat_id] = session_id
            chats.add(chat_id)

    def chat_gone(self, chat_id: str) -> None:
        session_id = self._chat_sessions.pop(chat_id, None)
        chats = self._session_chats.get(session_id or "")
        if chats is not None:
            chats.discard(chat_id)

    def disposed(self, session_id: str) -> tuple[str, ...]:
        """The session was disposed: lookups in flight read again; what it left
        here goes (see `departed`)."""
        for lookup in self._lookups:
            lookup.disposed.add(session_id)
        return self.departed(session_id)

    def departed(self, session_id: str) -> tuple[str, ...]:
        """The session left memory (released, collected or disposed): forget its
        owner, handle and chats; answers its chat ids."""
        owner = self._owners.pop(session_id, None)
        if owner is not None:
            left = self._per_owner[owner] - 1
            if left:
                self._per_owner[owner] = left
            else:
                del self._per_owner[owner]
        self._handles.pop(session_id, None)
        chats = tuple(self._session_chats.pop(session_id, ()))
        for chat_id in chats:
            self._chat_sessions.pop(chat_id, None)
        return chats

    def sizes(self) -> TableSizes:
        return TableSizes(
            owners=len(self._owners),
            identities=len(self._per_owner),
            handles=len(self._handles),
            chats=len(self._chat_sessions),
            sessions_with_chats=len(self._session_chats),
            lookups=len(self._lookups),
        )
