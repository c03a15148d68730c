"""Shards and session leases (migration 0012): a session is resident on one shard at a time.

Belongs here: `LeaseBook`, the plain object a store with a shard identity
holds (on its StoreActor's thread only): the shard's registration, the
leases it holds, the acquisition of a lease, and which session each write
belongs to, so the store can fence a batch at commit. A store without a
shard identity has no LeaseBook and behaves as one process always did.

Invariants:
1. A shard's epoch grows on each registration, that is on each (re)start of
   the shard; an owner whose lease names an older epoch is stale.
2. A lease names its owner (shard id and the owner's epoch when it took the
   lease) and its own epoch, which grows on every acquisition (a released
   lease keeps its epoch and has no owner), so a shard that lost a session
   and took it back never mistakes its old copy for its new one.
3. Acquisition locks the lease row (FOR UPDATE) and fences a stale, released
   or absent owner, or (with `force`: the caller knows the owner is dead) a
   live one; in the same transaction it ends the session's running turns
   once, as execution_abandoned. A live, current owner is otherwise refused
   with LEASE_HELD naming it (the caller asks that shard). Nothing else is
   written: no turn, message or session is made or deleted by a takeover.
4. A write of a session whose lease this shard does not hold (owner, shard
   epoch and lease epoch all its own) never commits. The store locks the
   lease rows of the sessions a batch writes (FOR KEY SHARE, before their
   writes: an acquisition waits for the commit, or the commit sees the new
   owner), and refuses the writes of every session that moved (LEASE_LOST);
   the rest of the batch commits.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from typing import Any

import attrs
import structlog

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.fields import Json
from agenthost.messages.state import TurnState
from agenthost.store.records import (
    DeleteChat,
    DeleteMemento,
    DeletePending,
    DeleteSession,
    ImportSession,
    ReleaseLease,
    SaveAssistantText,
    SaveChat,
    SaveChatMeta,
    SavePending,
    SaveProviderRef,
    SaveSession,
    SaveSessionState,
    SaveSteeringRecorded,
    SaveTurnEnded,
    SaveTurnStarted,
    SessionRecord,
    SetMemento,
    StoreOp,
    TruncateChat,
)

log = structlog.get_logger(__name__)

ABANDONED_BY_TAKEOVER = "The shard running this turn stopped before it ended."

Execute = Callable[[str, Sequence[Any]], Any]


@attrs.frozen(kw_only=True)
class LeaseRow:
    """A lease as stored: its owner (None: released) and the epochs."""

    session_id: str
    shard_id: str | None
    shard_epoch: int
    lease_epoch: int


@attrs.frozen(kw_only=True)
class Takeover:
    """What an acquisition did: the lease's new epoch, whom it fenced (None:
    the lease was this shard's already, or nobody's), the turns it ended."""

    lease_epoch: int
    fenced_owner: str | None = None
    abandoned_turns: int = 0


def owner_of(error: AgentHostError) -> str | None:
    """The shard a LEASE_HELD error names."""
    value = None if error.meta is None else error.meta.value
    return str(value["owner"]) if isinstance(value, dict) and "owner" in value else None


def lease_held(session_id: str, owner: str) -> AgentHostError:
    return AgentHostError(
        code=ErrorCode.LEASE_HELD,
        message=f"session {session_id} is resident on shard {owner}",
        meta=Json.of({"owner": owner}),
    )


def lease_lost(session_id: str) -> AgentHostError:
    return AgentHostError(
        code=ErrorCode.LEASE_LOST,
        message=f"not stored: session {session_id} moved to another shard",
    )


class LeaseBook:
    """One shard's registration and leases, and the session of each write.

    `lock_row` and `share_rows` are the dialect's locking clauses (PostgreSQL:
    FOR UPDATE OF l, FOR KEY SHARE; SQLite, one process: none)."""

    def __init__(self, shard_id: str, *, lock_row: str = "", share_rows: str = "") -> None:
        self.shard_id = shard_id
        self.epoch = 0
        self._lock_row = lock_row
        self._share_rows = share_rows
        self.held: dict[str, int] = {}  # session id -> lease epoch
        # whose is each id a write may name (filled by writes and loads; dropped
        # with the session's lease)
        self._chats: dict[str, str] = {}
        self._turns: dict[str, str] = {}
        self._pending: dict[str, str] = {}
        self._tables = {"chats": self._chats, "turns": self._turns, "pending": self._pending}
        self._owned: dict[str, set[tuple[str, str]]] = {}  # session -> (table, id) it named
        self.log = log.bind(shard_id=shard_id)

    # -- registration and acquisition -------------------------------------------------
    def register(self, execute: Execute, now_ms: int) -> int:
        """Register the shard: its epoch is one more than any before it."""
        row = execute("SELECT epoch FROM shards WHERE id = ?", (self.shard_id,)).fetchone()
        if row is None:
            self.epoch = 1
            execute("INSERT INTO shards VALUES (?, ?, ?)", (self.shard_id, 1, now_ms))
        else:
            self.epoch = int(row[0]) + 1
            execute(
                "UPDATE shards SET epoch = ?, started_at = ? WHERE id = ?",
                (self.epoch, now_ms, self.shard_id),
            )
        self.held.clear()
        self.log = log.bind(shard_id=self.shard_id, shard_epoch=self.epoch)
        self.log.info("shard_registered")
        return self.epoch

    def acquire(self, execute: Execute, session_id: str, *, force: bool = False) -> Takeover | None:
        """Take the session's lease (see invariant 3); None if there is no such session.

        Raises:
            AgentHostError: LEASE_HELD naming the live owner (unless `force`).
        """
        row = self._locked_row(execute, session_id)
        if row is None:
            if execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                return None
            execute(
                "INSERT INTO session_leases VALUES (?, NULL, 0, 0) ON CONFLICT DO NOTHING",
                (session_id,),
            )
            row = self._locked_row(execute, session_id)
            assert row is not None
        lease, owner_epoch = row
        if lease.shard_id == self.shard_id and lease.shard_epoch == self.epoch:
            self._hold(session_id, lease.lease_epoch)
            return Takeover(lease_epoch=lease.lease_epoch)
        live = lease.shard_id is not None and owner_epoch == lease.shard_epoch
        if live and not force:
            raise lease_held(session_id, str(lease.shard_id))
        epoch = lease.lease_epoch + 1
        execute(
            "UPDATE session_leases SET shard_id = ?, shard_epoch = ?, lease_epoch = ?"
            " WHERE session_id = ?",
            (self.shard_id, self.epoch, epoch, session_id),
        )
        ended = execute(
            "UPDATE turns SET state = ?, error_code = ?, error_message = ?"
            " WHERE session_id = ? AND state IS NULL",
            (
                TurnState.ERROR.value,
                ErrorCode.EXECUTION_ABANDONED.value,
                ABANDONED_BY_TAKEOVER,
                session_id,
            ),
        ).rowcount
        self._hold(session_id, epoch)
        takeover = Takeover(
            lease_epoch=epoch, fenced_owner=lease.shard_id, abandoned_turns=max(ended, 0)
        )
        self.log.info(
            "lease_acquired",
            session_id=session_id,
            lease_epoch=epoch,
            fenced_owner=lease.shard_id,
            fenced_epoch=lease.shard_epoch,
            owner_live=live,
            abandoned_turns=takeover.abandoned_turns,
        )
        return takeover

    def _locked_row(self, execute: Execute, session_id: str) -> tuple[LeaseRow, int | None] | None:
        found = execute(
            "SELECT l.shard_id, l.shard_epoch, l.lease_epoch, s.epoch FROM session_leases l"
            f" LEFT JOIN shards s ON s.id = l.shard_id WHERE l.session_id = ?{self._lock_row}",
            (session_id,),
        ).fetchone()
        if found is None:
            return None
        shard_id, shard_epoch, lease_epoch, owner_epoch = found
        row = LeaseRow(
            session_id=session_id,
            shard_id=shard_id,
            shard_epoch=int(shard_epoch),
            lease_epoch=int(lease_epoch),
        )
        return row, None if owner_epoch is None else int(owner_epoch)

    def _hold(self, session_id: str, lease_epoch: int) -> None:
        self.held[session_id] = lease_epoch
        self._owned.setdefault(session_id, set())

    # -- the fence -----------------------------------------------------------------------
    def lease_rows(self, execute: Execute, session_ids: Sequence[str]) -> dict[str, LeaseRow]:
        """The sessions' lease rows, locked against acquisition until the commit."""
        if not session_ids:
            return {}
        marks = ",".join("?" * len(session_ids))
        rows = execute(
            "SELECT session_id, shard_id, shard_epoch, lease_epoch FROM session_leases"
            f" WHERE session_id IN ({marks}){self._share_rows}",
            tuple(session_ids),
        ).fetchall()
        return {
            r[0]: LeaseRow(
                session_id=r[0], shard_id=r[1], shard_epoch=int(r[2]), lease_epoch=int(r[3])
            )
            for r in rows
        }

    def fenced(self, rows: Mapping[str, LeaseRow | None], created: Set[str]) -> set[str]:
        """The sessions of `rows` (those a batch writes; None: no lease row) whose
        lease this shard does not hold; `created` are sessions the batch makes."""
        moved = set()
        for session_id, row in rows.items():
            if session_id in created:
                continue
            if row is None or not (
                row.shard_id == self.shard_id
                and row.shard_epoch == self.epoch
                and row.lease_epoch == self.held.get(session_id)
            ):
                moved.add(session_id)
        return moved

    def dropped(self, session_ids: Iterable[str]) -> None:
        """Forget sessions whose lease this shard released, lost or deleted."""
        for session_id in session_ids:
            self.held.pop(session_id, None)
            for table, key in self._owned.pop(session_id, ()):
                self._tables[table].pop(key, None)

    # -- whose write is it -----------------------------------------------------------------
    def session_of(self, op: StoreOp, lookup: Execute) -> str | None:
        """The session a write belongs to; ids the book has not seen are looked up."""
        match op:
            case (
                SaveSession()
                | SaveChat()
                | SaveTurnStarted()
                | SavePending()
                | DeleteSession()
                | SaveSessionState()
                | ReleaseLease()
            ):
                return op.session_id
            case ImportSession():
                return op.record.session_id
            case SetMemento() | DeleteMemento():
                return op.key.session_id
            case SaveAssistantText() | SaveTurnEnded() | SaveSteeringRecorded():
                return self._find("turns", op.turn_id, "turns", lookup)
            case SaveProviderRef() | SaveChatMeta() | DeleteChat() | TruncateChat():
                return self._find("chats", op.chat_id, "chats", lookup)
            case DeletePending():
                return self._find("pending", op.pending_id, "pending_messages", lookup)
        return None

    def _find(self, table: str, key: str, rows: str, lookup: Execute) -> str | None:
        found = self._tables[table].get(key)
        if found is not None:
            return found
        row = lookup(f"SELECT session_id FROM {rows} WHERE id = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def noted(self, op: StoreOp) -> None:
        """Learn the ids a write introduces (after it is sent) and forget those it ends."""
        match op:
            case SaveSession():
                self._hold(op.session_id, 1)
                for chat_id in op.chat_ids:
                    self._keep("chats", chat_id, op.session_id)
            case ImportSession():
                self._hold(op.record.session_id, 1)
                self.loaded(op.record)
            case SaveChat():
                self._keep("chats", op.chat_id, op.session_id)
            case SaveTurnStarted():
                self._keep("turns", op.turn_id, op.session_id)
            case SavePending():
                self._keep("pending", op.pending.id, op.session_id)
            case SaveTurnEnded():
                self._forget("turns", op.turn_id)
            case DeletePending():
                self._forget("pending", op.pending_id)

    def loaded(self, record: SessionRecord) -> None:
        """A session this shard loaded: the ids its later writes will name."""
        for chat in record.chats:
            self._keep("chats", chat.chat_id, record.session_id)
            for pending in chat.pending:
                self._keep("pending", pending.id, record.session_id)

    def _keep(self, table: str, key: str, session_id: str) -> None:
        self._tables[table][key] = session_id
        self._owned.setdefault(session_id, set()).add((table, key))

    def _forget(self, table: str, key: str) -> None:
        session_id = self._tables[table].pop(key, None)
        if session_id is not None:
            self._owned.get(session_id, set()).discard((table, key))
