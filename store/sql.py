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

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.state import (
    Attachment,
    ChatOrigin,
    ChatOriginKind,
    MessageOrigin,
    OriginKind,
    PendingKind,
    PendingMessage,
    SessionState,
    SessionSummary,
    Turn,
    TurnState,
    Usage,
    UserMessage,
    Worktree,
)
from agenthost.messages.wire import from_wire, to_wire
from agenthost.store.base import (
    CLIENT_KEEP_MS,
    OWNER_KEY,
    PRUNE_BATCH,
    ClientBinding,
    SessionPage,
)
from agenthost.store.columns import origin_column, origin_of, parts_column, parts_of
from agenthost.store.leases import LeaseBook, Takeover
from agenthost.store.records import (
    ChatRecord,
    DeleteChat,
    DeleteMemento,
    DeletePending,
    DeleteSession,
    ImportSession,
    MementoKey,
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

ABANDONED_ON_RESTART = "The host stopped while this turn was running."


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

_CLAIM = (
    "INSERT INTO client_bindings (client_id, identity, first_seen, last_seen) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (client_id) DO UPDATE SET identity = excluded.identity,"
    " first_seen = CASE WHEN client_bindings.identity = excluded.identity"
    " THEN client_bindings.first_seen ELSE excluded.first_seen END,"
    " last_seen = excluded.last_seen"
    " WHERE client_bindings.identity = excluded.identity OR client_bindings.last_seen < ?"
)
_PRUNE_SOME = (
    "DELETE FROM client_bindings WHERE client_id IN"
    " (SELECT client_id FROM client_bindings WHERE last_seen < ? LIMIT ?)"
)

_SUMMARY = (
    "SELECT s.id, s.title, s.provider, s.created_at,"
    " (SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id), s.is_read, s.is_archived,"
    " s.config, (SELECT MAX(COALESCE(t.ended_at, t.started_at)) FROM turns t"
    " WHERE t.session_id = s.id) FROM sessions s"
)


class SqlStore:
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
                    " config = ?, owner = ? WHERE id = ?",
                    (
                        state.title,
                        state.user_titled,
                        state.read,
                        state.archived,
                        json.dumps(dict(state.config)),
                        dict(state.config).get(OWNER_KEY),
                        session_id,
                    ),
                )
            case SaveProviderRef(chat_id=chat_id, provider_ref=provider_ref):
                self._execute(
                    "UPDATE chats SET provider_ref = ? WHERE id = ?", (provider_ref, chat_id)
                )
            case SaveChatMeta(chat_id=chat_id, title=title, read_only=read_only):
                self._execute(
                    "UPDATE chats SET title = COALESCE(?, title),"
                    " read_only = COALESCE(?, read_only) WHERE id = ?",
                    (title, read_only, chat_id),
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
                SaveChatMeta(chat_id=chat.chat_id, title=chat.title, read_only=chat.read_only)
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

    # -- reads ----------------------------------------------------------------------
    def list_sessions(self) -> list[SessionSummary]:
        """Every stored session, oldest first (its cost grows with the store: a
        server lists per owner, `list_sessions_page`)."""
        return self._summaries("", ())

    def list_sessions_page(
        self, *, owner: str, limit: int, after: str | None = None
    ) -> SessionPage:
        """A page of the sessions `owner` owns, oldest first, after `after` (the
        cursor of the page before; None for the first page).

        One indexed range read of `limit` rows (sessions_by_owner): its cost does
        not grow with other owners' sessions, nor with the pages before it.

        Raises:
            AgentHostError: INVALID_ARGUMENT for a limit below 1 or a cursor this
                store did not make.
        """
        if limit < 1:
            raise AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message="limit must be 1 or more")
        where = " WHERE s.owner = ?"
        params: tuple[Any, ...] = (owner,)
        if after is not None:
            created_at, session_id = _parse_cursor(after)
            where += " AND (s.created_at, s.id) > (?, ?)"
            params += (created_at, session_id)
        found = self._summaries(where, params, limit + 1)
        more = len(found) > limit
        items = tuple(found[:limit])
        cursor = f"{items[-1].created_at}.{items[-1].id}" if more else None
        return SessionPage(items=items, next_cursor=cursor)

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

    def _summaries(
        self, where: str, params: tuple[Any, ...], limit: int | None = None
    ) -> list[SessionSummary]:
        query = f"{_SUMMARY}{where} ORDER BY s.created_at, s.id"
        if limit is not None:
            query, params = f"{query} LIMIT ?", (*params, limit)
        rows = self._execute(query, params).fetchall()
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
                modified_at=r[8] or r[3],
            )
            for r in rows
        ]

    def load_session(self, session_id: str) -> SessionRecord | None:
        row = self._execute(
            "SELECT provider, title, created_at, worktree_path, worktree_repo, worktree_base,"
            " user_titled, is_read, is_archived, config FROM sessions WHERE id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        rows = self._execute(
            "SELECT id, title, draft, origin_kind, origin_chat, origin_tool_call, read_only,"
            " provider_ref FROM chats WHERE session_id = ? ORDER BY position",
            (session_id,),
        ).fetchall()
        chats = tuple(
            attrs.evolve(
                self._load_chat(chat_id, title, draft),
                origin=ChatOrigin(kind=ChatOriginKind(kind), chat_id=chat, tool_call_id=tool_call),
                read_only=bool(read_only),
                provider_ref=ref,
            )
            for chat_id, title, draft, kind, chat, tool_call, read_only, ref in rows
        )
        worktree = None if row[3] is None else Worktree(path=row[3], repo=row[4], base=row[5])
        record = SessionRecord(
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
                for c, n, k, v in self._execute(
                    "SELECT chat_id, contribution, key, value FROM mementos WHERE session_id = ?",
                    (session_id,),
                ).fetchall()
            ),
        )
        if self.leases is not None:
            self.leases.loaded(record)
        return record

    def provider_ref(self, chat_id: str) -> str | None:
        """The reference the chat's provider reported last (SaveProviderRef), if any."""
        row = self._execute("SELECT provider_ref FROM chats WHERE id = ?", (chat_id,)).fetchone()
        return None if row is None else row[0]

    def finish_reasons(self, chat_id: str) -> dict[str, str | None]:
        """Each ended turn of the chat and the finish reason its provider gave
        (None where the stream gave none), by turn id."""
        return dict(
            self._execute(
                "SELECT id, finish_reason FROM turns WHERE chat_id = ? AND state IS NOT NULL",
                (chat_id,),
            ).fetchall()
        )

    def turn_states(self, session_id: str) -> list[tuple[str, str, str | None]]:
        """The session's turns as stored, in order: user text, assistant text and
        state (None for a turn left running; nothing is closed, unlike a load)."""
        return [
            tuple(r)
            for r in self._execute(
                "SELECT user_text, assistant_text, state FROM turns WHERE session_id = ?"
                " ORDER BY seq, rowid",
                (session_id,),
            ).fetchall()
        ]

    def pending_count(self, session_id: str) -> int:
        row = self._execute(
            "SELECT COUNT(*) FROM pending_messages WHERE session_id = ?", (session_id,)
        ).fetchone()
        return int(row[0])

    # -- client ids (the AHP server's clientId -> identity) ------------------------------
    def claim_client(
        self, client_id: str, identity: str, now_ms: int, keep_ms: int = CLIENT_KEEP_MS
    ) -> ClientBinding:
        """Bind `client_id` to `identity` unless another identity holds it; the
        binding that holds afterwards (compare its identity with yours).

        A binding lasts `keep_ms` after its client was last seen (each claim by
        its own identity renews it); an expired one is taken over. Each claim
        also deletes up to PRUNE_BATCH expired bindings, so the table holds the
        clients seen within `keep_ms` and a backlog that claims work off. A
        write: durable once committed.
        """
        cutoff = now_ms - keep_ms
        with self._alone():
            self._execute(_CLAIM, (client_id, identity, now_ms, now_ms, cutoff))
            self._execute(_PRUNE_SOME, (cutoff, PRUNE_BATCH))
            binding = self.find_client(client_id)
        assert binding is not None  # inserted, renewed, or held by another identity
        return binding

    def find_client(self, client_id: str) -> ClientBinding | None:
        row = self._execute(
            "SELECT identity, first_seen, last_seen FROM client_bindings WHERE client_id = ?",
            (client_id,),
        ).fetchone()
        if row is None:
            return None
        return ClientBinding(
            client_id=client_id, identity=row[0], first_seen=row[1], last_seen=row[2]
        )

    def prune_clients(self, before_ms: int) -> int:
        """Delete the bindings of clients last seen before `before_ms`; how many."""
        count = self._execute(
            "SELECT COUNT(*) FROM client_bindings WHERE last_seen < ?", (before_ms,)
        ).fetchone()[0]
        self._execute("DELETE FROM client_bindings WHERE last_seen < ?", (before_ms,))
        return int(count)

    def _load_chat(self, chat_id: str, title: str, draft: str | None) -> ChatRecord:
        if not self.read_only and self.leases is None:
            self._execute(
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
        for turn_id, pending_id, text in self._execute(
            "SELECT turn_id, pending_id, text FROM turn_steering WHERE chat_id = ?"
            " ORDER BY turn_id, position",
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
        for turn_id, name, text in self._execute(
            "SELECT turn_id, name, text FROM turn_attachments WHERE chat_id = ?"
            " ORDER BY turn_id, position",
            (chat_id,),
        ).fetchall():
            attachments.setdefault(turn_id, []).append(Attachment(name=name, text=text))
        turns = tuple(
            _turn_from_row(r, tuple(steering.get(r[0], ())), tuple(attachments.get(r[0], ())))
            for r in self._execute(
                "SELECT id, user_text, assistant_text, state, error_code, error_message,"
                " origin, usage, response_parts FROM turns WHERE chat_id = ? ORDER BY seq, rowid",
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
                    origin=origin_of(r[5]),
                ),
                turn_id=r[4],
            )
            for r in self._execute(
                "SELECT id, kind, text, attachments, turn_id, origin FROM pending_messages"
                " WHERE chat_id = ? ORDER BY position, rowid",
                (chat_id,),
            ).fetchall()
        )
        return ChatRecord(chat_id=chat_id, title=title, draft=draft, turns=turns, pending=pending)


def _turn_from_row(
    row: tuple[Any, ...],
    steering: tuple[PendingMessage, ...],
    attachments: tuple[Attachment, ...] = (),
) -> Turn:
    turn_id, user_text, assistant_text, state, error_code, error_message, origin, usage, parts = row
    if state is None:  # read beside its running host: as a restart would find it
        state, error_code = TurnState.ERROR.value, ErrorCode.EXECUTION_ABANDONED.value
        error_message = ABANDONED_ON_RESTART
    error = (
        None
        if error_code is None
        else AgentHostError(code=ErrorCode(error_code), message=error_message or "")
    )
    return Turn(
        id=turn_id,
        message=UserMessage(text=user_text, attachments=attachments, origin=origin_of(origin)),
        response_parts=parts_of(turn_id, assistant_text, parts),
        steering=steering,
        state=TurnState(state),
        error=error,
        usage=None if usage is None else from_wire(json.loads(usage), Usage),
    )


def _parse_cursor(cursor: str) -> tuple[int, str]:
    created_at, _, session_id = cursor.partition(".")
    if not (created_at.isdigit() and session_id):
        raise AgentHostError(
            code=ErrorCode.INVALID_ARGUMENT, message=f"not a cursor this store made: {cursor!r}"
        )
    return int(created_at), session_id
