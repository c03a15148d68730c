"""SQLite store: WAL mode, numbered migrations, one writer.

`SqliteStore` is synchronous and not thread-safe on purpose: exactly one
StoreActor owns it, applies operations inside an open transaction and calls
`commit()` when its mailbox drains (group commit). Reads on the same
connection see writes not yet committed.

A turn that was running when the process died has no end state in its row;
loading it closes it as an error (`execution_abandoned`), so no turn is ever
restored as running.
"""

import fcntl
import importlib.resources
import json
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

import attrs
import structlog

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.state import (
    Attachment,
    ChatOrigin,
    ChatOriginKind,
    MarkdownPart,
    MessageOrigin,
    OriginKind,
    PendingKind,
    PendingMessage,
    SessionState,
    SessionSummary,
    Turn,
    TurnState,
    UserMessage,
    Worktree,
)
from agenthost.store.records import (
    ChatRecord,
    DeleteChat,
    DeleteMemento,
    DeletePending,
    DeleteSession,
    ImportSession,
    MementoKey,
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

ABANDONED_ON_RESTART = "The host stopped while this turn was running."


def _migrations() -> list[tuple[int, str]]:
    folder = importlib.resources.files("agenthost.store") / "migrations"
    found = []
    for entry in folder.iterdir():
        match = re.match(r"(\d+)_.*\.sql$", entry.name)
        if match:
            found.append((int(match.group(1)), entry.read_text()))
    return sorted(found)


_ONE_STATEMENT = (
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
    SaveProviderRef,
)


class SqliteStore:
    """The embedded default store. `path` is a file; its folder is created.

    Args:
        path: the database file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._db: sqlite3.Connection | None = None
        self._lock_fd: int | None = None

    # -- lifecycle (StoreActor's thread) ------------------------------------------
    def open(self) -> None:
        """Open, lock and migrate.

        Raises:
            AgentHostError: STORE_ERROR when another host holds this store.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock()
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=ON")
        self._db = db
        self._migrate()
        db.execute("BEGIN")

    def _lock(self) -> None:
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise AgentHostError(
                code=ErrorCode.STORE_ERROR,
                message=f"{self.path} is in use by another agenthost process",
            ) from None
        self._lock_fd = fd

    def _migrate(self) -> None:
        db = self._conn
        db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = db.execute("SELECT MAX(version) FROM schema_version").fetchone()
        current = row[0] or 0
        for version, script in _migrations():
            if version <= current:
                continue
            db.executescript(
                f"BEGIN;\n{script}\nINSERT INTO schema_version VALUES ({version});\nCOMMIT;"
            )
            log.info("store_migrated", version=version)

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
            self._db.execute("COMMIT")
            self._db.close()
            self._db = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise AgentHostError(code=ErrorCode.STORE_ERROR, message="the store is not open")
        return self._db

    # -- writes ---------------------------------------------------------------------
    def apply(self, op: StoreOp) -> None:
        """Apply one write, all or nothing: a failure undoes it alone, not its batch.

        A write of one statement needs no savepoint (SQLite undoes a failed
        statement by itself); a write of several gets one.
        """
        if isinstance(op, _ONE_STATEMENT) and not getattr(op, "attachments", ()):
            self._apply(op)
            return
        db = self._conn
        db.execute("SAVEPOINT write")
        try:
            self._apply(op)
        except BaseException:
            db.execute("ROLLBACK TO write")
            db.execute("RELEASE write")
            raise
        db.execute("RELEASE write")

    def _apply(self, op: StoreOp) -> None:
        db = self._conn
        match op:
            case SaveSession():
                tree = op.worktree
                db.execute(
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
                db.executemany(
                    "INSERT OR IGNORE INTO chats (id, session_id, position) VALUES (?, ?, ?)",
                    [(chat_id, op.session_id, i) for i, chat_id in enumerate(op.chat_ids)],
                )
            case SaveChat():
                db.execute(
                    "INSERT OR IGNORE INTO chats (id, session_id, position, origin_kind,"
                    " origin_chat, origin_tool_call) VALUES"
                    " (?, ?, (SELECT COUNT(*) FROM chats WHERE session_id = ?), ?, ?, ?)",
                    (
                        op.chat_id,
                        op.session_id,
                        op.session_id,
                        op.origin.kind.value,
                        op.origin.chat_id,
                        op.origin.tool_call_id,
                    ),
                )
            case SaveProviderRef():
                db.execute(
                    "UPDATE chats SET provider_ref = ? WHERE id = ?",
                    (op.provider_ref, op.chat_id),
                )
            case SaveTurnStarted():
                db.execute(
                    "INSERT INTO turns (id, chat_id, session_id, seq, user_text, started_at)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (op.turn_id, op.chat_id, op.session_id, op.seq, op.user_text, op.started_at),
                )
                if op.attachments:  # an empty executemany still costs a statement's setup
                    db.executemany(
                        "INSERT INTO turn_attachments VALUES (?, ?, ?, ?)",
                        [(op.turn_id, i, a.name, a.text) for i, a in enumerate(op.attachments)],
                    )
            case SaveAssistantText():
                db.execute(
                    "UPDATE turns SET assistant_text = ? WHERE id = ?", (op.text, op.turn_id)
                )
            case SaveTurnEnded():
                error = op.error
                db.execute(
                    "UPDATE turns SET state = ?, assistant_text = ?, error_code = ?,"
                    " error_message = ?, finish_reason = ?, ended_at = ? WHERE id = ?",
                    (
                        op.state.value,
                        op.assistant_text,
                        None if error is None else error.code.value,
                        None if error is None else error.message,
                        op.finish_reason,
                        op.ended_at,
                        op.turn_id,
                    ),
                )
            case SaveSteeringRecorded():
                db.execute(
                    "INSERT OR REPLACE INTO turn_steering VALUES (?, ?, ?, ?)",
                    (op.turn_id, op.position, op.pending_id, op.text),
                )
            case SavePending():
                pending = op.pending
                db.execute(
                    "INSERT OR REPLACE INTO pending_messages"
                    " (id, chat_id, session_id, kind, text, position, attachments)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        pending.id,
                        op.chat_id,
                        op.session_id,
                        pending.kind.value,
                        pending.text,
                        op.position,
                        json.dumps([[a.name, a.text] for a in pending.message.attachments]),
                    ),
                )
            case DeletePending():
                db.execute("DELETE FROM pending_messages WHERE id = ?", (op.pending_id,))
            case TruncateChat():
                marks = ",".join("?" * len(op.keep))
                doomed = f"chat_id = ? AND id NOT IN ({marks})" if op.keep else "chat_id = ?"
                self._delete_turns(doomed, (op.chat_id, *op.keep))
            case ImportSession():
                self._import(op.record)
            case SaveSessionState(session_id=session_id, state=state):
                db.execute(
                    "UPDATE sessions SET title = ?, user_titled = ?, is_read = ?, is_archived = ?,"
                    " config = ? WHERE id = ?",
                    (
                        state.title,
                        state.user_titled,
                        state.read,
                        state.archived,
                        json.dumps(dict(state.config)),
                        session_id,
                    ),
                )
            case SaveChatMeta(chat_id=chat_id, title=title, read_only=read_only):
                db.execute(
                    "UPDATE chats SET title = COALESCE(?, title),"
                    " read_only = COALESCE(?, read_only) WHERE id = ?",
                    (title, read_only, chat_id),
                )
            case SetMemento(key=key, value=value):
                db.execute(
                    "INSERT OR REPLACE INTO mementos VALUES (?, ?, ?, ?, ?)",
                    (key.session_id, key.chat_id, key.contribution, key.key, value),
                )
            case DeleteMemento(key=key):
                db.execute(
                    "DELETE FROM mementos WHERE session_id = ? AND chat_id = ?"
                    " AND contribution = ? AND key = ?",
                    (key.session_id, key.chat_id, key.contribution, key.key),
                )
            case DeleteChat(chat_id=chat_id):
                self._delete_turns("chat_id = ?", (chat_id,))
                for table in ("pending_messages", "mementos"):
                    db.execute(f"DELETE FROM {table} WHERE chat_id = ?", (chat_id,))
                db.execute("DELETE FROM chats WHERE id = ?", (chat_id,))
            case DeleteSession():
                self._delete_turns("session_id = ?", (op.session_id,))
                for table in ("pending_messages", "mementos"):
                    db.execute(f"DELETE FROM {table} WHERE session_id = ?", (op.session_id,))
                db.execute("DELETE FROM chats WHERE session_id = ?", (op.session_id,))
                db.execute("DELETE FROM sessions WHERE id = ?", (op.session_id,))
            case _:
                raise TypeError(f"unknown store operation {type(op).__name__}")

    def _delete_turns(self, where: str, params: tuple[Any, ...]) -> None:
        """Delete the turns `where` selects, with their steering and attachments."""
        db = self._conn
        for table in ("turn_steering", "turn_attachments"):
            db.execute(
                f"DELETE FROM {table} WHERE turn_id IN (SELECT id FROM turns WHERE {where})",
                params,
            )
        db.execute(f"DELETE FROM turns WHERE {where}", params)

    def _import(self, record: SessionRecord) -> None:
        if self._conn.execute(
            "SELECT 1 FROM sessions WHERE id = ?", (record.session_id,)
        ).fetchone():
            raise sqlite3.IntegrityError(f"session {record.session_id} exists already")
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
                SaveChatMeta(chat_id=chat.chat_id, title=chat.title, read_only=chat.read_only)
            )
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
                    )
                )
                self._apply(
                    SaveTurnEnded(
                        turn_id=turn.id,
                        state=turn.state,
                        assistant_text=turn.assistant_text,
                        ended_at=record.created_at,
                        error=turn.error,
                    )
                )
                for position, steering in enumerate(turn.steering):
                    self._apply(
                        SaveSteeringRecorded(
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

    # -- reads ----------------------------------------------------------------------
    def list_sessions(self) -> list[SessionSummary]:
        return self._summaries("", ())

    def find_session(
        self, session_id: str | None = None, chat_id: str | None = None
    ) -> SessionSummary | None:
        """The summary of the session with this id, or of the one the chat
        belongs to; None if there is none."""
        if (session_id is None) == (chat_id is None):
            raise ValueError("find a session by its id or by a chat's, one of the two")
        if chat_id is not None:
            found = self._summaries(
                " WHERE s.id = (SELECT session_id FROM chats WHERE id = ?)", (chat_id,)
            )
        else:
            found = self._summaries(" WHERE s.id = ?", (session_id,))
        return found[0] if found else None

    def _summaries(self, where: str, params: tuple[Any, ...]) -> list[SessionSummary]:
        rows = self._conn.execute(
            "SELECT s.id, s.title, s.provider, s.created_at,"
            " (SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id), s.is_read, s.is_archived,"
            f" s.config FROM sessions s{where} ORDER BY s.created_at, s.id",
            params,
        ).fetchall()
        return [
            SessionSummary(
                id=r[0],
                title=r[1],
                provider=r[2],
                created_at=r[3],
                turn_count=r[4],
                unread=not r[5],
                archived=bool(r[6]),
                config=tuple(sorted(json.loads(r[7]).items())),
            )
            for r in rows
        ]

    def load_session(self, session_id: str) -> SessionRecord | None:
        db = self._conn
        row = db.execute(
            "SELECT provider, title, created_at, worktree_path, worktree_repo, worktree_base,"
            " user_titled, is_read, is_archived, config FROM sessions WHERE id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        chats = tuple(
            attrs.evolve(
                self._load_chat(chat_id, title, draft),
                origin=ChatOrigin(
                    kind=ChatOriginKind(kind), chat_id=origin_chat, tool_call_id=origin_tool_call
                ),
                read_only=bool(read_only),
            )
            for chat_id, title, draft, kind, origin_chat, origin_tool_call, read_only in db.execute(
                "SELECT id, title, draft, origin_kind, origin_chat, origin_tool_call, read_only"
                " FROM chats WHERE session_id = ? ORDER BY position",
                (session_id,),
            ).fetchall()
        )
        worktree = None if row[3] is None else Worktree(path=row[3], repo=row[4], base=row[5])
        return SessionRecord(
            session_id=session_id,
            provider=row[0],
            title=row[1],
            created_at=row[2],
            chats=chats,
            worktree=worktree,
            state=SessionState(
                title=row[1],
                user_titled=bool(row[6]),
                read=bool(row[7]),
                archived=bool(row[8]),
                config=tuple(sorted(json.loads(row[9]).items())),
            ),
            mementos=tuple(
                SetMemento(
                    key=MementoKey(session_id=session_id, chat_id=c, contribution=n, key=k),
                    value=v,
                )
                for c, n, k, v in db.execute(
                    "SELECT chat_id, contribution, key, value FROM mementos WHERE session_id = ?",
                    (session_id,),
                ).fetchall()
            ),
        )

    def finish_reasons(self, chat_id: str) -> dict[str, str | None]:
        """Each ended turn of the chat and the finish reason its provider gave
        (None where the stream gave none), by turn id."""
        return dict(
            self._conn.execute(
                "SELECT id, finish_reason FROM turns WHERE chat_id = ? AND state IS NOT NULL",
                (chat_id,),
            ).fetchall()
        )

    def provider_ref(self, chat_id: str) -> str | None:
        """The reference the chat's provider reported last (SaveProviderRef), if any."""
        row = self._conn.execute(
            "SELECT provider_ref FROM chats WHERE id = ?", (chat_id,)
        ).fetchone()
        return None if row is None else row[0]

    def _load_chat(self, chat_id: str, title: str, draft: str | None) -> ChatRecord:
        db = self._conn
        db.execute(
            "UPDATE turns SET state = ?, error_code = ?, error_message = ? "
            "WHERE chat_id = ? AND state IS NULL",
            (
                TurnState.ERROR.value,
                ErrorCode.EXECUTION_ABANDONED.value,
                ABANDONED_ON_RESTART,
                chat_id,
            ),
        )
        steering: dict[str, list[PendingMessage]] = {}
        for turn_id, pending_id, text in db.execute(
            "SELECT s.turn_id, s.pending_id, s.text FROM turn_steering s"
            " JOIN turns t ON t.id = s.turn_id WHERE t.chat_id = ? ORDER BY s.turn_id, s.position",
            (chat_id,),
        ).fetchall():
            steering.setdefault(turn_id, []).append(
                PendingMessage(
                    id=pending_id,
                    kind=PendingKind.STEERING,
                    message=UserMessage(text=text, origin=MessageOrigin(kind=OriginKind.STEERING)),
                )
            )
        attachments: dict[str, list[Attachment]] = {}
        for turn_id, name, text in db.execute(
            "SELECT a.turn_id, a.name, a.text FROM turn_attachments a"
            " JOIN turns t ON t.id = a.turn_id WHERE t.chat_id = ? ORDER BY a.turn_id, a.position",
            (chat_id,),
        ).fetchall():
            attachments.setdefault(turn_id, []).append(Attachment(name=name, text=text))
        turns = tuple(
            _turn_from_row(r, tuple(steering.get(r[0], ())), tuple(attachments.get(r[0], ())))
            for r in db.execute(
                "SELECT id, user_text, assistant_text, state, error_code, error_message"
                " FROM turns WHERE chat_id = ? ORDER BY seq, rowid",
                (chat_id,),
            ).fetchall()
        )
        pending = tuple(
            PendingMessage(
                id=r[0],
                kind=PendingKind(r[1]),
                message=UserMessage(
                    text=r[2],
                    attachments=tuple(Attachment(name=n, text=t) for n, t in json.loads(r[3])),
                ),
            )
            for r in db.execute(
                "SELECT id, kind, text, attachments FROM pending_messages WHERE chat_id = ?"
                " ORDER BY position, rowid",
                (chat_id,),
            ).fetchall()
        )
        return ChatRecord(chat_id=chat_id, title=title, draft=draft, turns=turns, pending=pending)


def _turn_from_row(
    row: tuple[Any, ...],
    steering: tuple[PendingMessage, ...],
    attachments: tuple[Attachment, ...] = (),
) -> Turn:
    turn_id, user_text, assistant_text, state, error_code, error_message = row
    error = (
        None
        if error_code is None
        else AgentHostError(code=ErrorCode(error_code), message=error_message or "")
    )
    parts = (MarkdownPart(id=f"{turn_id}-md", content=assistant_text),) if assistant_text else ()
    return Turn(
        id=turn_id,
        message=UserMessage(text=user_text, attachments=attachments),
        response_parts=parts,
        steering=steering,
        state=TurnState(state),
        error=error,
    )
