"""PostgreSQL store (psycopg 3): SqliteStore's contract for several processes.

`PostgresStore` keeps the same rows, operations and group commit as
SqliteStore (store/sql.py holds them): one StoreActor owns it, applies
operations inside an open transaction and commits when its mailbox drains;
reads on its connection see writes not yet committed. Its numbered
migrations are store/migrations/postgresql/, twins of the SQLite ones, and
run in one transaction under an advisory lock, so processes that open the
same store at once migrate it once.

The URL is libpq's (`postgresql://user@host:port/database`, its options
kept) plus `?schema=NAME` (default `agenthost`): the store's tables live in
that schema, created on first open, so one database can hold several stores
(tests make a schema each). Several processes may share a store; there is no
lock file. A shard's store (`shard=NAME`) registers the shard when it opens,
takes leases and fences its commits (store/leases.py); closed cleanly, it
releases the leases it holds.

Round trips: `apply` only queues a write. The batch's writes go to the
server in one pipeline (psycopg's pipeline mode) before the next read (reads
see the open batch) or at the commit, so a group commit costs two round
trips (the writes, COMMIT) however many writes it holds.

Differences from SQLite that callers may meet: PostgreSQL aborts a whole
transaction on a failed statement. A failed write is still undone alone, as
in SQLite, but found later: a pipeline that fails is rolled back and the
batch applied again one write at a time, each in a savepoint, and the
commit's report (CommitReport) names the writes that failed. A commit
refuses a batch that a failed read aborted rather than let PostgreSQL turn
it into a silent rollback. A text with a NUL character
cannot be stored (the write fails and its ack says so). A lost connection
fails the batch in flight; `rollback()` connects again.
"""

import contextlib
import os
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import structlog
from psycopg import sql
from psycopg.pq import TransactionStatus

from agenthost.messages.errors import AgentHostError
from agenthost.store.base import CommitReport, StoreReport, store_error
from agenthost.store.leases import LeaseRow, Takeover, lease_lost
from agenthost.store.records import DeleteSession, ImportSession, ReleaseLease, SaveSession, StoreOp
from agenthost.store.sql import DialectSql, SqlStore, migrations

log = structlog.get_logger(__name__)

DEFAULT_SCHEMA = "agenthost"
CONNECT_TIMEOUT_S = 10
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


@lru_cache(maxsize=512)
def _pg(statement: str) -> str:
    """A statement written with `?` placeholders, in psycopg's spelling."""
    return statement.replace("%", "%%").replace("?", "%s")


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]


def _latest() -> int:
    return migrations("migrations/postgresql")[-1][0]


class PostgresStore(SqlStore):
    """A store in a PostgreSQL database (see the module docstring).

    Args:
        url: postgresql://... with an optional `schema=NAME` parameter.
        create: make the schema and its tables where they do not exist (else refuse).

    Raises:
        AgentHostError: STORE_ERROR for a schema name that is not a plain identifier.
    """

    errors: tuple[type[Exception], ...] = (psycopg.Error,)
    dialect = DialectSql(
        insert_chat="INSERT INTO chats (id, session_id, position) VALUES (?, ?, ?)"
        " ON CONFLICT DO NOTHING",
        insert_chat_at_end="INSERT INTO chats (id, session_id, position, origin_kind,"
        " origin_chat, origin_tool_call) VALUES"
        " (?, ?, (SELECT COUNT(*) FROM chats WHERE session_id = ?), ?, ?, ?)"
        " ON CONFLICT DO NOTHING",
        put_steering="INSERT INTO turn_steering (chat_id, turn_id, position, pending_id, text)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (chat_id, turn_id, position) DO UPDATE"
        " SET pending_id = excluded.pending_id, text = excluded.text",
        # As SQLite's INSERT OR REPLACE: a replaced row is a new row (a new rowid).
        put_pending="INSERT INTO pending_messages"
        " (id, chat_id, session_id, kind, text, position, attachments, turn_id, origin)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (chat_id, id) DO UPDATE SET"
        " session_id = excluded.session_id, kind = excluded.kind,"
        " text = excluded.text, position = excluded.position,"
        " attachments = excluded.attachments, turn_id = excluded.turn_id,"
        " origin = excluded.origin, rowid = DEFAULT",
        put_memento="INSERT INTO mementos VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (session_id, chat_id, contribution, key) DO UPDATE"
        " SET value = excluded.value",
        lock_lease=" FOR UPDATE OF l",
        share_leases=" FOR KEY SHARE",
    )

    def __init__(self, url: str, *, create: bool = True, shard: str | None = None) -> None:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        schemas = [value for key, value in query if key == "schema"]
        self.schema = schemas[-1] if schemas else DEFAULT_SCHEMA
        self.conninfo = urlunsplit(
            parts._replace(query=urlencode([(k, v) for k, v in query if k != "schema"]))
        )
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
        user = f"{parts.username}@" if parts.username else ""
        self._location = f"{parts.scheme}://{user}{host}{port}{parts.path}?schema={self.schema}"
        if not _SCHEMA_NAME.match(self.schema):
            raise store_error(
                f"store {self._location}: the schema name must be lowercase letters, digits and _"
            )
        self.create = create
        self.created = False
        self._db: psycopg.Connection[Any] | None = None
        self._cursor: psycopg.Cursor[Any] | None = None
        self._batch: list[StoreOp] = []
        self._sent = 0  # how many of the batch's writes went to the server
        self._failed: dict[int, AgentHostError] = {}  # by position: refused, undone alone
        self._flushing = False
        # a shard's store: each write's session, the lease rows locked, the sessions made
        self._session_at: list[str | None] = []
        self._locks: dict[str, LeaseRow | None] = {}
        self._created: set[str] = set()
        self._use_shard(shard)

    @property
    def location(self) -> str:
        return self._location

    # -- lifecycle (StoreActor's thread) ------------------------------------------
    def open(self) -> None:
        """Connect, check and migrate.

        Raises:
            AgentHostError: STORE_ERROR when the server cannot be reached, or the
                schema holds no store (with create=False), another program's
                tables or a newer schema than this code knows.
        """
        db = self._connect()
        try:
            self.created = self._verify(db, create=self.create) is None
            self._migrate(db)
            self._use_schema(db)
        except psycopg.Error as exc:
            db.close()
            raise self._refused(
                f"cannot open it ({_one_line(exc)})", "check the user's rights on the database"
            ) from None
        except BaseException:
            db.close()
            raise
        self._db, self._cursor = db, db.cursor()
        if self.leases is not None:
            self._register_shard(int(time.time() * 1000))
            db.commit()

    def _refused(self, problem: str, remedy: str) -> Exception:
        return store_error(f"store {self._location}: {problem}; {remedy}")

    def _connect(self) -> "psycopg.Connection[Any]":
        try:
            db = psycopg.connect(self.conninfo, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.Error as exc:
            raise self._refused(
                f"cannot connect ({_one_line(exc)})", "start PostgreSQL, or correct the URL"
            ) from None
        return db

    def _use_schema(self, db: "psycopg.Connection[Any]") -> None:
        db.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        db.commit()

    def _verify(self, db: "psycopg.Connection[Any]", *, create: bool) -> int | None:
        """Refuse a schema of another program or too new a version; its schema
        version (None: nothing there yet, so it may be made, if `create`)."""
        tables = {
            row[0]
            for row in db.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (self.schema,),
            ).fetchall()
        }
        db.commit()
        if not tables:
            if not create:
                raise self._refused("no agenthost store there", "give the URL of an existing one")
            return None
        if "schema_version" not in tables:
            shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
            raise self._refused(
                f"the schema holds another program's tables ({shown})",
                "give agenthost a schema of its own (?schema=NAME)",
            )
        version = db.execute(
            sql.SQL("SELECT MAX(version) FROM {}.schema_version").format(
                sql.Identifier(self.schema)
            )
        ).fetchone()
        db.commit()
        current = int((version and version[0]) or 0)
        if current > _latest():
            raise self._refused(
                f"its schema version {current} is newer than this agenthost knows ({_latest()})",
                "open it with a newer agenthost",
            )
        return current

    def _migrate(self, db: "psycopg.Connection[Any]") -> None:
        """Apply the missing migrations in one transaction, under an advisory lock
        that makes processes opening the store at once take turns."""
        schema = sql.Identifier(self.schema)
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"agenthost:{self.schema}",))
            if self.created:
                db.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
            db.execute(sql.SQL("SET LOCAL search_path TO {}").format(schema))
            db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = db.execute("SELECT MAX(version) FROM schema_version").fetchone()
            current = (row and row[0]) or 0
            for version, script in migrations("migrations/postgresql"):
                if version <= current:
                    continue
                db.execute(script.encode())
                db.execute("INSERT INTO schema_version VALUES (%s)", (version,))
                log.info("store_migrated", version=version, store=self._location)
        if self.created:
            log.info("store_created", store=self._location)

    # -- writes ---------------------------------------------------------------------
    def apply(self, op: StoreOp) -> None:
        """Queue one write. The batch's writes go to the server together (one
        pipeline) before the next read or at the commit; one the database
        refuses is undone alone and named in the commit's report."""
        self._batch.append(op)

    @contextlib.contextmanager
    def _sending(self) -> Iterator[None]:
        self._flushing = True
        try:
            yield
        finally:
            self._flushing = False

    def _flush(self) -> None:
        """Send the writes not sent yet in one pipeline, behind the locks on their
        sessions' leases (a shard's store: leases.py, invariant 4). A write that
        fails aborts the transaction: the batch is then applied again one write at
        a time, each in a savepoint, and the failed ones are named."""
        start, end = self._sent, len(self._batch)
        if start == end:
            return
        db = self._conn
        with self._sending():
            positions = [i for i in range(start, end) if i not in self._failed]
            sessions = self._sessions_of(start, end)
            self._sent = end
            try:
                with db.pipeline():
                    locking = self._lock_leases(sessions)
                    for i in positions:
                        self._apply(self._batch[i])
                self._locked(locking, sessions)
            except psycopg.Error:
                if db.broken:
                    raise
                self._replay()
            if self.leases is not None:
                for i in positions:
                    self.leases.noted(self._batch[i])

    def _sessions_of(self, start: int, end: int) -> list[str]:
        """(A shard's store.) The sessions of the batch's writes from `start`,
        recorded by position; those whose leases this transaction has not locked."""
        if self.leases is None:
            return []
        new = []
        for i in range(start, end):
            op = self._batch[i]
            session_id = self.leases.session_of(op, self._execute)
            self._session_at.append(session_id)
            if isinstance(op, (SaveSession, ImportSession)) and session_id is not None:
                self._created.add(session_id)
            elif session_id is not None and session_id not in self._locks:
                new.append(session_id)
                self._locks[session_id] = None
        return new

    def _lock_leases(self, sessions: list[str]) -> "psycopg.Cursor[Any] | None":
        if not sessions or self.leases is None:
            return None
        cursor = self._conn.cursor()
        marks = ",".join("?" * len(sessions))
        cursor.execute(
            _pg(
                "SELECT session_id, shard_id, shard_epoch, lease_epoch FROM session_leases"
                f" WHERE session_id IN ({marks}){self.dialect.share_leases}"
            ),
            sessions,
        )
        return cursor

    def _locked(self, cursor: "psycopg.Cursor[Any] | None", sessions: list[str]) -> None:
        if cursor is None:
            return
        for r in cursor.fetchall():
            self._locks[r[0]] = LeaseRow(
                session_id=r[0], shard_id=r[1], shard_epoch=int(r[2]), lease_epoch=int(r[3])
            )

    def _replay(self) -> None:
        """The slow path: roll back and apply every write of the batch again, one
        at a time in a savepoint; those that fail are undone alone and named."""
        db = self._conn
        db.rollback()
        self._locks = {}
        for i in range(self._sent):
            if i in self._failed:
                continue
            session_id = self._session_at[i] if self._session_at else None
            fresh = session_id is not None and session_id not in self._created
            if fresh and session_id not in self._locks:
                assert session_id is not None
                locking = self._lock_leases([session_id])
                self._locks[session_id] = None
                self._locked(locking, [session_id])
            try:
                with self._alone():
                    self._apply(self._batch[i])
            except psycopg.Error as exc:
                if db.broken:
                    raise
                log.error("store_write_failed", op=type(self._batch[i]).__name__, exc_info=True)
                self._failed[i] = store_error(f"not stored: {_one_line(exc)}")

    def commit(self) -> CommitReport:
        """Send what is left, fence the batch (a shard's store: the writes of a
        session it no longer holds are undone, the rest sent again), commit.

        Raises:
            psycopg.Error: the batch could not be committed (the caller rolls back).
        """
        db = self._conn
        self._flush()
        if db.info.transaction_status is TransactionStatus.INERROR:
            # PostgreSQL would answer COMMIT with a rollback and no error.
            raise psycopg.errors.InFailedSqlTransaction(
                "a statement failed in this batch; it was rolled back"
            )
        fenced: set[str] = set()
        while self.leases is not None:
            moved = self.leases.fenced(self._locks, self._created) - fenced
            if not moved:
                break
            fenced |= moved
            for i, session_id in enumerate(self._session_at):
                if session_id in moved:
                    self._failed.setdefault(i, lease_lost(session_id))
            log.warning("store_writes_fenced", sessions=sorted(moved), store=self._location)
            db.rollback()
            self._locks, self._sent, self._session_at = {}, 0, []
            self._flush()
        db.commit()
        report = CommitReport(failed=dict(self._failed), fenced=frozenset(fenced))
        if self.leases is not None:
            gone = {
                op.session_id
                for i, op in enumerate(self._batch)
                if isinstance(op, (ReleaseLease, DeleteSession)) and i not in self._failed
            }
            self.leases.dropped(gone | fenced)
        self._reset()
        return report

    def _reset(self) -> None:
        self._batch, self._sent, self._failed = [], 0, {}
        self._session_at, self._locks, self._created = [], {}, set()

    def rollback(self) -> None:
        """Drop the open batch (after a failed commit); connect again if the
        connection was lost."""
        db = self._conn
        self._reset()
        if db.broken or db.closed:
            log.warning("store_reconnecting", store=self._location)
            db.close()
            self._db = self._cursor = None
            fresh = self._connect()
            self._use_schema(fresh)
            self._db, self._cursor = fresh, fresh.cursor()
            return
        db.rollback()

    def acquire_lease(self, session_id: str, *, force: bool = False) -> Takeover | None:
        self._flush()
        return super().acquire_lease(session_id, force=force)

    def close(self) -> None:
        if self._db is not None:
            try:
                if not self._db.broken:
                    self.commit()
                    if self.leases is not None:  # its sessions are free for any shard now
                        self._db.execute(
                            "UPDATE session_leases SET shard_id = NULL"
                            " WHERE shard_id = %s AND shard_epoch = %s",
                            (self.leases.shard_id, self.leases.epoch),
                        )
                        self._db.commit()
            finally:
                self._db.close()
                self._db = self._cursor = None

    @property
    def _conn(self) -> "psycopg.Connection[Any]":
        if self._db is None:
            raise store_error("the store is not open")
        return self._db

    def count_start(self, name: str) -> int:
        """One more start of `name` (an AHP front), counted in the shards table's
        row of that name in one statement (two starting at once get two numbers);
        answers the count. Any thread: a connection of its own, closed after.

        Raises:
            AgentHostError: STORE_ERROR when the store cannot be reached or has no
                shards table (no shard opened it yet).
        """
        now_ms = int(time.time() * 1000)
        db = self._connect()
        try:
            with db:
                self._use_schema(db)
                row = db.execute(
                    "INSERT INTO shards (id, epoch, started_at) VALUES (%s, 1, %s)"
                    " ON CONFLICT (id) DO UPDATE SET epoch = shards.epoch + 1,"
                    " started_at = excluded.started_at RETURNING epoch",
                    (name, now_ms),
                ).fetchone()
        except psycopg.Error as exc:
            raise self._refused(f"cannot count a start ({_one_line(exc)})", "check it") from None
        finally:
            db.close()
        assert row is not None
        return int(row[0])

    # -- checks and backups -------------------------------------------------------------
    def check(self) -> StoreReport:
        """Check the store without changing it: reachable, ours, its schema
        version (PostgreSQL keeps its own pages sound).

        Raises:
            AgentHostError: STORE_ERROR saying what is wrong and what to do.
        """
        db = self._connect()
        try:
            version = self._verify(db, create=False) or 0
            self._use_schema(db)
            sessions = db.execute("SELECT COUNT(*) FROM sessions").fetchone()
            turns = db.execute("SELECT COUNT(*) FROM turns").fetchone()
        except psycopg.Error as exc:
            raise self._refused(f"cannot read it ({_one_line(exc)})", "check the store") from None
        finally:
            db.close()
        return StoreReport(
            location=self._location,
            schema_version=version,
            known_version=_latest(),
            sessions=int(sessions[0]) if sessions else 0,
            turns=int(turns[0]) if turns else 0,
        )

    def backup(self, dest: str | os.PathLike[str]) -> StoreReport:
        raise self._refused(
            "agenthost backs up SQLite stores only", "back PostgreSQL up with pg_dump"
        )

    # -- SqlStore's hooks -------------------------------------------------------------
    def _execute(self, statement: str, params: Sequence[Any] = ()) -> "psycopg.Cursor[Any]":
        # One cursor for every statement: each caller fetches before the next. A
        # read sends the batch's queued writes first (reads see the open batch).
        if self._cursor is None:
            raise store_error("the store is not open")
        if not self._flushing and self._sent < len(self._batch):
            self._flush()
        return self._cursor.execute(_pg(statement), params)

    def _executemany(self, statement: str, rows: Iterable[Sequence[Any]]) -> None:
        if self._cursor is None:
            raise store_error("the store is not open")
        self._cursor.executemany(_pg(statement), rows)

    def _refusal(self, message: str) -> Exception:
        return psycopg.errors.UniqueViolation(message)
