"""The rows every SQL store keeps, and the operations on them, in one place.

`SqlStore` holds what SqliteStore and PostgresStore share: how each write
operation becomes statements, how sessions are read back, the per-owner
listing and the client bindings. A subclass supplies the connection (the
lifecycle: open, checks, migrations, commit) and the few statements whose
spelling differs (`DialectSql`). Statements are written with `?` placeholders;
a subclass's `_execute` translates them where its driver spells them otherwise.

A turn and a pending message are rows keyed by (chat_id, id): an id a client
chose names a row of its own chat only, never another chat's (migration 0011).
A turn that was running when the process died has no end state in its row;
loading it closes it as an error (`execution_abandoned`), so no turn is ever
restored as running. A store with a shard identity (`shard=`) never closes
turns on a load: another shard may be running them. It closes them when it
takes the session's lease (store/leases.py), the one moment it knows their
producer is gone, and a load only shows them as closed.

A restored turn equals the live one as it ended: its message (text, origin,
attachments), its response parts, steering folded into it, state, error and
usage. The parts are kept (as AHP JSON) only where they say more than the
assistant text; a turn whose parts are its text alone keeps the text, and
comes back as one markdown part with the id the live turn's first part had.
A pending message keeps its message's origin.
"""

import contextlib
import importlib.resources
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

import attrs

from agenthost.messages.wire import to_wire
from agenthost.store.base import (
    OWNER_KEY,
)
from agenthost.store.columns import customizations_column, origin_column, parts_column
from agenthost.store.leases import LeaseBook, Takeover
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
from agenthost.store.sql_reads import SqlReads


def migrations(folder_name: str = "migrations") -> list[tuple[int, str]]:
    """The numbered migration scripts in store/<folder_name>/, in order."""
    folder = importlib.resources.files("agenthost.store").joinpath(*folder_name.split("/"))
    found = []
    for entry in folder.iterdir():
        match = re.match(r"(\d+)_.*\.sql$", entry.name)
        if match:
            found.append((int(match.group(1)), entry.read_text()))
    return sorted(found)


class Rows(Protocol):
    """A cursor as both drivers return it."""

    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


@attrs.frozen(kw_only=True)
class DialectSql:
    """The statements whose spelling differs between databases (an insert that
    ignores or replaces a row that exists)."""

    insert_chat: str
    insert_chat_at_end: str
    put_steering: str
    put_pending: str
    put_memento: str
    lock_lease: str = ""  # a lease row locked against other acquisitions
    share_leases: str = ""  # lease rows locked against acquisition until the commit


_SAVEPOINT = "SAVEPOINT one_write"
_ROLLBACK_TO = "ROLLBACK TO SAVEPOINT one_write"
_RELEASE = "RELEASE SAVEPOINT one_write"


class SqlStore(SqlReads):
    """The shared rows and operations; not usable alone (see the module docstring).

    Runs on the StoreActor's thread once open, like its subclasses.
    """

    errors: tuple[type[Exception], ...] = ()
    dialect: DialectSql
    created = False
    read_only = False  # opened only to read: a load leaves a running turn's row alone
    leases: LeaseBook | None = None  # a shard's store: its registration and leases

    # -- what a subclass supplies ------------------------------------------------------
    def _execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        raise NotImplementedError

    def _executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        raise NotImplementedError

    def _needs_savepoint(self, op: StoreOp) -> bool:
        """Whether a failure inside `op` would leave part of it behind without one."""
        return True

    def _refusal(self, message: str) -> Exception:
        """The driver's integrity error, for a write this code refuses itself."""
        raise NotImplementedError

    # -- writes ---------------------------------------------------------------------
    def apply(self, op: StoreOp) -> None:
        """Apply one write, all or nothing: a failure undoes it alone, not its batch.

        A write of one statement needs no savepoint (SQLite undoes a failed
        statement by itself); a write of several gets one.
        """
        if not self._needs_savepoint(op):
            self._apply(op)
            return
        with self._alone():
            self._apply(op)

    @contextlib.contextmanager
    def _alone(self) -> Iterator[None]:
        """Statements that a failure undoes together, leaving the batch around them."""
        self._execute(_SAVEPOINT)
        try:
            yield
        except BaseException:
            self._execute(_ROLLBACK_TO)
            self._execute(_RELEASE)
            raise
        self._execute(_RELEASE)

    def _apply(self, op: StoreOp) -> None:
        sql = self.dialect
        match op:
            case SaveSession():
                tree = op.worktree
                self._execute(
                    "INSERT INTO sessions (id, provider, title, created_at, modified_at,"
                    " worktree_path, worktree_repo, worktree_base) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        op.session_id,
                        op.provider,
                        op.title,
                        op.created_at,
                        op.created_at,
                        None if tree is None else tree.path,
                        None if tree is None else tree.repo,
                        None if tree is None else tree.base,
                    ),
                )
                self._executemany(
                    sql.insert_chat,
                    [(chat_id, op.session_id, i) for i, chat_id in enumerate(op.chat_ids)],
                )
                if self.leases is not None:  # made here: resident here
                    self._execute(
                        "INSERT INTO session_leases VALUES (?, ?, ?, 1)",
                        (op.session_id, self.leases.shard_id, self.leases.epoch),
                    )
            case SaveChat():
                self._execute(
                    sql.insert_chat_at_end,
                    (
                        op.chat_id,
                        op.session_id,
                        op.session_id,
                        op.origin.kind.value,
                        op.origin.chat_id,
                        op.origin.tool_call_id,
                    ),
                )
            case SaveTurnStarted():
                self._execute(
                    "INSERT INTO turns (id, chat_id, session_id, seq, user_text, started_at,"
                    " origin) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        op.turn_id,
                        op.chat_id,
                        op.session_id,
                        op.seq,
                        op.user_text,
                        op.started_at,
                        origin_column(op.origin),
                    ),
                )
                if op.attachments:  # an empty executemany still costs a statement's setup
                    self._executemany(
                        "INSERT INTO turn_attachments (chat_id, turn_id, position, name, text)"
                        " VALUES (?, ?, ?, ?, ?)",
                        [
                            (op.chat_id, op.turn_id, i, a.name, a.text)
                            for i, a in enumerate(op.attachments)
                        ],
                    )
            case SaveAssistantText():
                self._execute(
                    "UPDATE turns SET assistant_text = ? WHERE chat_id = ? AND id = ?",
                    (op.text, op.chat_id, op.turn_id),
                )
            case SaveTurnEnded():
                error = op.error
                self._execute(
                    "UPDATE turns SET state = ?, assistant_text = ?, error_code = ?,"
                    " error_message = ?, finish_reason = ?, ended_at = ?, usage = ?,"
                    " response_parts = ? WHERE chat_id = ? AND id = ?",
                    (
                        op.state.value,
                        op.assistant_text,
                        None if error is None else error.code.value,
                        None if error is None else error.message,
                        op.finish_reason,
                        op.ended_at,
                        None if op.usage is None else json.dumps(to_wire(op.usage)),
                        parts_column(op.turn_id, op.assistant_text, op.response_parts),
                        op.chat_id,
                        op.turn_id,
                    ),
                )
            case SaveSteeringRecorded():
                self._execute(
                    sql.put_steering,
                    (op.chat_id, op.turn_id, op.position, op.pending_id, op.text),
                )
            case SavePending():
                pending = op.pending
                self._execute(
                    sql.put_pending,
                    (
                        pending.id,
                        op.chat_id,
                        op.session_id,
                        pending.kind.value,
                        pending.text,
                        op.position,
                        json.dumps([[a.name, a.text] for a in pending.message.attachments]),
                        pending.turn_id,
                        origin_column(pending.message.origin),
                    ),
                )
            case DeletePending():
                self._execute(
                    "DELETE FROM pending_messages WHERE chat_id = ? AND id = ?",
                    (op.chat_id, op.pending_id),
                )
            case TruncateChat():
                marks = ",".join("?" * len(op.keep))
                doomed = f"chat_id = ? AND id NOT IN ({marks})" if op.keep else "chat_id = ?"
                self._delete_turns(doomed, (op.chat_id, *op.keep))
            case ImportSession():
                self._import(op.record)
            case SaveSessionState(session_id=session_id, state=state):
                self._execute(
                    "UPDATE sessions SET title = ?, user_titled = ?, is_read = ?, is_archived = ?,"
                    " config = ?, owner = ?, customizations = ? WHERE id = ?",
                    (
                        state.title,
                        state.user_titled,
                        state.read,
                        state.archived,
                        json.dumps(dict(state.config)),
                        dict(state.config).get(OWNER_KEY),
                        customizations_column(state.customizations),
                        session_id,
                    ),
                )
            case SaveProviderRef(chat_id=chat_id, provider_ref=provider_ref):
                self._execute(
                    "UPDATE chats SET provider_ref = ? WHERE id = ?", (provider_ref, chat_id)
                )
            case SaveChatMeta(chat_id=chat_id):
                self._execute(
                    "UPDATE chats SET title = COALESCE(?, title),"
                    " read_only = COALESCE(?, read_only), is_read = COALESCE(?, is_read),"
                    " is_archived = COALESCE(?, is_archived) WHERE id = ?",
                    (op.title, op.read_only, op.read, op.archived, chat_id),
                )
            case SetMemento(key=key, value=value):
                self._execute(
                    sql.put_memento,
                    (key.session_id, key.chat_id, key.contribution, key.key, value),
                )
            case DeleteMemento(key=key):
                self._execute(
                    "DELETE FROM mementos WHERE session_id = ? AND chat_id = ?"
                    " AND contribution = ? AND key = ?",
                    (key.session_id, key.chat_id, key.contribution, key.key),
                )
            case DeleteChat(chat_id=chat_id):
                self._delete_turns("chat_id = ?", (chat_id,))
                for table in ("pending_messages", "mementos"):
                    self._execute(f"DELETE FROM {table} WHERE chat_id = ?", (chat_id,))
                self._execute("DELETE FROM chats WHERE id = ?", (chat_id,))
            case DeleteSession():
                self._delete_turns("session_id = ?", (op.session_id,))
                for table in ("pending_messages", "mementos"):
                    self._execute(f"DELETE FROM {table} WHERE session_id = ?", (op.session_id,))
                self._execute("DELETE FROM chats WHERE session_id = ?", (op.session_id,))
                self._execute("DELETE FROM sessions WHERE id = ?", (op.session_id,))
                if self.leases is not None:
                    self._execute(
                        "DELETE FROM session_leases WHERE session_id = ?", (op.session_id,)
                    )
            case ReleaseLease():
                if self.leases is not None:
                    self._execute(
                        "UPDATE session_leases SET shard_id = NULL WHERE session_id = ?"
                        " AND shard_id = ? AND shard_epoch = ?",
                        (op.session_id, self.leases.shard_id, self.leases.epoch),
                    )
            case _:
                raise TypeError(f"unknown store operation {type(op).__name__}")

    def _delete_turns(self, where: str, params: tuple[Any, ...]) -> None:
        """Delete the turns `where` selects, with their steering and attachments."""
        for table in ("turn_steering", "turn_attachments"):
            self._execute(
                f"DELETE FROM {table} WHERE (chat_id, turn_id) IN"
                f" (SELECT chat_id, id FROM turns WHERE {where})",
                params,
            )
        self._execute(f"DELETE FROM turns WHERE {where}", params)

    def _import(self, record: SessionRecord) -> None:
        if self._execute("SELECT 1 FROM sessions WHERE id = ?", (record.session_id,)).fetchone():
            raise self._refusal(f"session {record.session_id} exists already")
        self._apply(
            SaveSession(
                session_id=record.session_id,
                provider=record.provider,
                title=record.title,
                created_at=record.created_at,
                chat_ids=(),
                worktree=record.worktree,
            )
        )
        state = attrs.evolve(record.state, title=record.title)
        self._apply(SaveSessionState(session_id=record.session_id, state=state))
        for chat in record.chats:
            self._apply(
                SaveChat(session_id=record.session_id, chat_id=chat.chat_id, origin=chat.origin)
            )
            self._apply(
                SaveChatMeta(
                    chat_id=chat.chat_id,
                    title=chat.title,
                    read_only=chat.read_only,
                    read=chat.read,
                    archived=chat.archived,
                )
            )
            if chat.provider_ref is not None:  # the imported chat resumes its conversation
                self._apply(SaveProviderRef(chat_id=chat.chat_id, provider_ref=chat.provider_ref))
            for seq, turn in enumerate(chat.turns):
                self._apply(
                    SaveTurnStarted(
                        session_id=record.session_id,
                        chat_id=chat.chat_id,
                        turn_id=turn.id,
                        seq=seq,
                        user_text=turn.user_text,
                        started_at=record.created_at,
                        attachments=turn.message.attachments,
                        origin=turn.message.origin,
                    )
                )
                self._apply(
                    SaveTurnEnded(
                        chat_id=chat.chat_id,
                        turn_id=turn.id,
                        state=turn.state,
                        assistant_text=turn.assistant_text,
                        ended_at=record.created_at,
                        error=turn.error,
                        usage=turn.usage,
                        response_parts=turn.response_parts,
                    )
                )
                for position, steering in enumerate(turn.steering):
                    self._apply(
                        SaveSteeringRecorded(
                            chat_id=chat.chat_id,
                            turn_id=turn.id,
                            pending_id=steering.id,
                            text=steering.text,
                            position=position,
                        )
                    )
            for position, pending in enumerate(chat.pending):
                self._apply(
                    SavePending(
                        session_id=record.session_id,
                        chat_id=chat.chat_id,
                        pending=pending,
                        position=position,
                    )
                )

    # -- shards and leases (store/leases.py) --------------------------------------------
    def _use_shard(self, shard: str | None) -> None:
        if shard is not None:
            self.leases = LeaseBook(
                shard, lock_row=self.dialect.lock_lease, share_rows=self.dialect.share_leases
            )

    def _register_shard(self, now_ms: int) -> None:
        """(On open, before the store is used.) A shard's store registers it: a new epoch."""
        if self.leases is not None:
            self.leases.register(self._execute, now_ms)

    @property
    def shard_epoch(self) -> int | None:
        """The shard's epoch since it opened this store (None: no shard identity)."""
        return None if self.leases is None else self.leases.epoch

    def acquire_lease(self, session_id: str, *, force: bool = False) -> Takeover | None:
        """Take the session's lease for this shard (store/leases.py, invariant 3); a
        store without a shard identity has nothing to take (None). A write: durable
        once committed, which the caller does before it uses the session.

        Raises:
            AgentHostError: LEASE_HELD naming the live shard that holds it.
        """
        if self.leases is None:
            return None
        with self._alone():
            return self.leases.acquire(self._execute, session_id, force=force)
