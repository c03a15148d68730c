"""SQLite store: WAL mode, numbered migrations, one writer, checked when it opens.

`SqliteStore` is synchronous and not thread-safe on purpose: exactly one
StoreActor owns it, applies operations inside an open transaction and calls
`commit()` when its mailbox drains (group commit). Reads on the same
connection see writes not yet committed. A lock file beside the database
(`<file>.lock`) keeps a second process out.

Opening checks the file before anything is written to it, and refuses with
one line (AgentHostError STORE_ERROR: the file, what is wrong, what to do):
- a folder, a file it cannot read or write, a folder it cannot write in (the
  lock and the write-ahead log live beside the database);
- an empty file (0 bytes): SQLite would take it for a new database, but no
  store of ours is ever empty (a new one is made whole in `<file>.new` and
  renamed into place), so an empty file is a store that lost its content or
  a file that is not ours;
- a file whose header is not SQLite's, one `PRAGMA quick_check` finds damaged
  (a truncated file, overwritten pages), a SQLite database of another program
  (application_id, or tables but no schema_version), a schema newer than
  this code knows.
A missing file is created as a new store (`created` is then True, and
`store_created` is logged with its path), unless `create=False`.
`read_only=True` opens it only to read, beside a host that may hold it: no
lock, no migration, nothing written (WAL lets it read what the host committed).
quick_check reads the whole file, so opening costs about a second per
gigabyte.
"""

import contextlib
import fcntl
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import structlog

from agenthost.store.base import StoreReport, store_error
from agenthost.store.records import (
    DeleteMemento,
    DeletePending,
    SaveAssistantText,
    SaveChatMeta,
    SavePending,
    SaveProviderRef,
    SaveSessionState,
    SaveSteeringRecorded,
    SaveTurnEnded,
    SaveTurnStarted,
    SetMemento,
    StoreOp,
)
from agenthost.store.sql import DialectSql, SqlStore, migrations
from agenthost.store.sql_reads import ABANDONED_ON_RESTART as ABANDONED_ON_RESTART

log = structlog.get_logger(__name__)

APPLICATION_ID = int.from_bytes(b"AgHo", "big")
"""Migration 0008 writes it into the file's header: the file is an agenthost store."""
HEADER = b"SQLite format 3\x00"
BACKUP_HINT = "agenthost store backup makes one"

_ONE_STATEMENT = (
    SaveProviderRef,
    SaveTurnStarted,  # with no attachments
    SaveAssistantText,
    SaveTurnEnded,
    SaveSteeringRecorded,
    SavePending,
    DeletePending,
    SaveSessionState,
    SaveChatMeta,
    SetMemento,
    DeleteMemento,
)


def _latest() -> int:
    return migrations()[-1][0]


class SqliteStore(SqlStore):
    """The embedded default store. `path` is a file; its folder is created.

    Args:
        path: the database file.
        create: make a new store where the file does not exist (else refuse).
        read_only: only read it: no lock, no migration, nothing written (see above).
    """

    errors: tuple[type[Exception], ...] = (sqlite3.Error,)
    dialect = DialectSql(
        insert_chat="INSERT OR IGNORE INTO chats (id, session_id, position) VALUES (?, ?, ?)",
        insert_chat_at_end="INSERT OR IGNORE INTO chats (id, session_id, position, origin_kind,"
        " origin_chat, origin_tool_call) VALUES"
        " (?, ?, (SELECT COUNT(*) FROM chats WHERE session_id = ?), ?, ?, ?)",
        put_steering="INSERT OR REPLACE INTO turn_steering"
        " (chat_id, turn_id, position, pending_id, text) VALUES (?, ?, ?, ?, ?)",
        put_pending="INSERT OR REPLACE INTO pending_messages"
        " (id, chat_id, session_id, kind, text, position, attachments, turn_id, origin)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        put_memento="INSERT OR REPLACE INTO mementos VALUES (?, ?, ?, ?, ?)",
    )

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        read_only: bool = False,
        shard: str | None = None,
    ) -> None:
        """`shard`: a shard identity (store/leases.py); one process holds a SQLite
        store, so its leases never meet another shard's and commits are not fenced."""
        self.path = Path(path)
        self._use_shard(shard)
        self.create = create and not read_only
        self.read_only = read_only
        self.created = False
        self._db: sqlite3.Connection | None = None
        self._lock_fd: int | None = None

    @property
    def location(self) -> str:
        return str(self.path)

    # -- lifecycle (StoreActor's thread) ------------------------------------------
    def open(self) -> None:
        """Check, lock and migrate (see the module docstring).

        Raises:
            AgentHostError: STORE_ERROR when the store is in use by another
                process, or is refused (one line saying what to do).
        """
        if self.read_only:
            self._open_read_only()
            return
        if self.create:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise self._refused(
                    f"cannot create its folder ({exc.strerror})", "give a path you can write to"
                ) from None
        exists = self._looks_usable()
        self._lock()
        try:
            if not exists:
                self._create_new()
            db = self._connect()
            try:
                self._verify(db, "quick_check")
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute("PRAGMA foreign_keys=ON")
                _migrate(db)
            except sqlite3.DatabaseError as exc:
                db.close()
                raise self._damaged(exc) from None
            except BaseException:
                db.close()
                raise
            self._db = db
            db.execute("BEGIN")
            if self.leases is not None:
                self._register_shard(int(time.time() * 1000))
                self.commit()
        except BaseException:
            self._unlock()
            raise

    def _open_read_only(self) -> None:
        if self.path.is_dir():
            raise self._folder()
        if not self.path.is_file():
            raise self._refused("no such file", "give the path of an existing store")
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        try:
            db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise self._damaged(exc) from None
        try:
            version = self._verify(db, "quick_check")
        except sqlite3.DatabaseError as exc:
            db.close()
            raise self._damaged(exc) from None
        except BaseException:
            db.close()
            raise
        if version != _latest():
            db.close()
            raise self._refused(
                f"its schema version {version} is older than this agenthost reads ({_latest()})",
                "open it once with a host (agenthost serve) to migrate it",
            )
        self._db = db

    def _refused(self, problem: str, remedy: str) -> Exception:
        return store_error(f"store {self.path}: {problem}; {remedy}")

    def _folder(self) -> Exception:
        return self._refused(
            "it is a folder, not a store file",
            f"give the store's file (e.g. {self.path / 'agenthost.db'})",
        )

    def _looks_usable(self) -> bool:
        """Whether the file exists; refuses what cannot be a usable store of ours
        before SQLite touches it (SQLite would take a missing or empty file for a
        new database and write to it)."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            if Path(f"{self.path}-wal").exists():
                raise self._refused(
                    "the file is missing but its write-ahead log is there (partly removed)",
                    f"restore it from a backup, or remove {self.path}-wal to start a new store",
                ) from None
            if not self.create:
                raise self._refused("no such file", "give the path of an existing store") from None
            self._check_folder()
            return False
        except OSError as exc:
            raise self._refused(f"cannot reach it ({exc.strerror})", "check the path") from None
        if self.path.is_dir():
            raise self._folder()
        if st.st_size == 0:
            raise self._refused(
                "the file is empty (0 bytes), so it holds no store",
                "restore it from a backup, or delete it to start a new store there",
            )
        self._check_folder()
        if not os.access(self.path, os.R_OK):
            raise self._refused("permission denied reading it", "make it readable")
        if not os.access(self.path, os.W_OK):
            raise self._refused(
                "the file is read-only",
                "make it writable (or copy it with agenthost store backup and use the copy)",
            )
        with open(self.path, "rb") as file:
            header = file.read(len(HEADER))
        if header != HEADER:
            raise self._refused(
                "not a SQLite database (its header is overwritten, or it is another kind of file)",
                f"restore it from a backup ({BACKUP_HINT}), or give the path of the store",
            )
        return True

    def _check_folder(self) -> None:
        folder = self.path.parent
        if not os.access(folder, os.W_OK | os.X_OK):
            raise self._refused(
                f"cannot write in its folder {folder} (agenthost keeps a lock file and the"
                " write-ahead log beside the store)",
                "make the folder writable, or move the store to one that is",
            )

    def _lock(self) -> None:
        try:
            fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise self._refused(
                f"cannot create its lock file {self.path}.lock ({exc.strerror})",
                "make the folder and the lock file writable",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise store_error(f"{self.path} is in use by another agenthost process") from None
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _create_new(self) -> None:
        """Make a whole new store in `<file>.new` and rename it into place, so the
        file is never seen half made (an empty file is then never ours)."""
        partial = self.path.with_name(self.path.name + ".new")
        for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-journal")):
            leftover.unlink(missing_ok=True)
        db = sqlite3.connect(partial, isolation_level=None)
        try:
            _migrate(db)
            db.execute("PRAGMA journal_mode=WAL")
        finally:
            db.close()
        if Path(f"{partial}-wal").exists():  # closing the last connection checkpoints it
            raise self._refused("the new store could not be written whole", "try again")
        os.replace(partial, self.path)
        _sync_folder(self.path.parent)
        self.created = True
        log.info("store_created", store=str(self.path))

    def _connect(self) -> sqlite3.Connection:
        try:
            return sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise self._damaged(exc) from None

    def _verify(self, db: sqlite3.Connection, check: str) -> int:
        """Refuse a damaged, foreign or too new database; its schema version."""
        problems = [row[0] for row in db.execute(f"PRAGMA {check}(3)").fetchall()]
        if problems != ["ok"]:
            first = " ".join(" ".join(problems).split())  # one line
            raise self._refused(
                f"the database is damaged ({check}: {first[:160]})",
                f"restore it from a backup ({BACKUP_HINT}), or move it aside to start a new store",
            )
        (application_id,) = db.execute("PRAGMA application_id").fetchone()
        tables = sorted(
            row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        )
        ours = application_id == APPLICATION_ID or (
            application_id == 0 and ("schema_version" in tables or not tables)
        )
        if not ours:
            shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
            raise self._refused(
                f"a SQLite database of another program (tables: {shown or 'none'})",
                "give agenthost a file of its own",
            )
        if "schema_version" not in tables:
            return 0
        version = db.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] or 0
        latest = _latest()
        if version > latest:
            raise self._refused(
                f"its schema version {version} is newer than this agenthost knows ({latest})",
                "open it with a newer agenthost",
            )
        return int(version)

    def _damaged(self, exc: sqlite3.Error) -> Exception:
        name = getattr(exc, "sqlite_errorname", "")
        if name == "SQLITE_NOTADB":
            return self._refused(
                "not a SQLite database (its header is damaged, or it is another kind of file)",
                f"restore it from a backup ({BACKUP_HINT}), or give the path of the store",
            )
        if name.startswith("SQLITE_CORRUPT"):
            return self._refused(
                f"the database is damaged ({exc})",
                f"restore it from a backup ({BACKUP_HINT}), or move it aside to start a new store",
            )
        if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")):
            return self._refused(
                f"cannot open it for writing ({exc})", "check the file's and folder's permissions"
            )
        if name == "SQLITE_FULL":
            return self._refused("the disk is full", "free some space")
        return self._refused(f"cannot open it ({exc})", "check the file")

    def commit(self) -> None:
        db = self._conn
        db.execute("COMMIT")
        db.execute("BEGIN")

    def rollback(self) -> None:
        """Drop the open batch (after a failed write or commit) and start a new one."""
        db = self._conn
        if db.in_transaction:
            db.execute("ROLLBACK")
        db.execute("BEGIN")

    def close(self) -> None:
        if self._db is not None:
            if self._db.in_transaction:
                self._db.execute("COMMIT")
            self._db.close()
            self._db = None
        self._unlock()

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise store_error("the store is not open")
        return self._db

    # -- checks and backups (any thread; beside a running host) -----------------------
    def check(self) -> StoreReport:
        """Check the store as it is, without locking or changing it: the file, a
        full `PRAGMA integrity_check`, ours, the schema version.

        Raises:
            AgentHostError: STORE_ERROR saying what is wrong and what to do.
        """
        create, self.create = self.create, False
        try:
            self._looks_usable()
        finally:
            self.create = create
        db = self._connect()
        try:
            version = self._verify(db, "integrity_check")
            sessions = turns = 0
            if version:
                sessions = db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
                turns = db.execute("SELECT COUNT(*) FROM turns").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise self._damaged(exc) from None
        finally:
            db.close()
        return StoreReport(
            location=self.location,
            schema_version=version,
            known_version=_latest(),
            sessions=sessions,
            turns=turns,
            size_bytes=self.path.stat().st_size,
        )

    def backup(self, dest: str | os.PathLike[str]) -> StoreReport:
        """Copy the store to `dest` with SQLite's online backup: one consistent
        snapshot, taken beside a host that keeps writing. The copy is checked
        before it takes its name (`<dest>.partial` until then).

        Returns:
            The copy's check.
        Raises:
            AgentHostError: STORE_ERROR when the store is refused, `dest` exists,
                or the copy fails its check.
        """
        target = Path(dest)
        if target.is_dir():
            target = target / self.path.name
        if target.exists():
            raise store_error(f"{target} exists already; give a new name for the backup")
        self.check()
        partial = target.with_name(target.name + ".partial")
        partial.unlink(missing_ok=True)
        source = self._connect()
        try:
            copy = sqlite3.connect(partial)
            try:
                source.backup(copy)  # all pages in one step: one read transaction
            finally:
                copy.close()
        except sqlite3.Error as exc:
            partial.unlink(missing_ok=True)
            raise store_error(f"backup of {self.path} to {target} failed: {exc}") from None
        finally:
            source.close()
        report = SqliteStore(partial, create=False).check()
        os.replace(partial, target)
        _sync_folder(target.parent)
        return StoreReport(
            location=str(target),
            schema_version=report.schema_version,
            known_version=report.known_version,
            sessions=report.sessions,
            turns=report.turns,
            size_bytes=report.size_bytes,
        )

    # -- SqlStore's hooks -------------------------------------------------------------
    def _execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self._conn.execute(sql, params)

    def _executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._conn.executemany(sql, rows)

    def _needs_savepoint(self, op: StoreOp) -> bool:
        # SQLite undoes a failed statement by itself: a write of one needs none.
        return not isinstance(op, _ONE_STATEMENT) or bool(getattr(op, "attachments", ()))

    def _refusal(self, message: str) -> Exception:
        return sqlite3.IntegrityError(message)


def _migrate(db: sqlite3.Connection) -> None:
    db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = db.execute("SELECT MAX(version) FROM schema_version").fetchone()
    current = row[0] or 0
    for version, script in migrations():
        if version <= current:
            continue
        db.executescript(
            f"BEGIN;\n{script}\nINSERT INTO schema_version VALUES ({version});\nCOMMIT;"
        )
        log.info("store_migrated", version=version)


def _sync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
