"""How every SQL store reads its rows back (SqlStore's reads, store/sql.py).

A mixin of SqlStore: what it lists, finds and loads, and the client bindings;
it reads through the store's own `_execute`, on the StoreActor's thread once
open. The rows and their invariants are store/sql.py's docstring's.
"""

import contextlib
import json
from collections.abc import Sequence
from typing import Any

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
from agenthost.messages.wire import from_wire
from agenthost.store.base import (
    CLIENT_KEEP_MS,
    PRUNE_BATCH,
    ClientBinding,
    SessionPage,
)
from agenthost.store.columns import customizations_of, origin_of, parts_of
from agenthost.store.records import ChatRecord, MementoKey, SessionRecord, SetMemento

ABANDONED_ON_RESTART = "The host stopped while this turn was running."

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


class SqlReads:
    """SqlStore's reads (see the module docstring)."""

    read_only = False
    leases: Any = None

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        raise NotImplementedError

    def _alone(self) -> contextlib.AbstractContextManager[None]:
        raise NotImplementedError

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

    def count_sessions(self, owner: str) -> int:
        """How many stored sessions `owner` owns (the AHP root's activeSessions).

        One row read (session_counts, which triggers keep as sessions are
        written, deleted or change owner: migration 0014): its cost grows with
        neither the owner's sessions nor anyone else's.
        """
        row = self._execute(
            "SELECT sessions FROM session_counts WHERE owner = ?", (owner,)
        ).fetchone()
        return 0 if row is None else int(row[0])

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
            " user_titled, is_read, is_archived, config, customizations FROM sessions WHERE id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        rows = self._execute(
            "SELECT id, title, draft, origin_kind, origin_chat, origin_tool_call, read_only,"
            " provider_ref, is_read, is_archived FROM chats WHERE session_id = ? ORDER BY position",
            (session_id,),
        ).fetchall()
        chats = tuple(
            attrs.evolve(
                self._load_chat(r[0], r[1], r[2]),
                origin=ChatOrigin(kind=ChatOriginKind(r[3]), chat_id=r[4], tool_call_id=r[5]),
                read_only=bool(r[6]),
                provider_ref=r[7],
                read=bool(r[8]),
                archived=bool(r[9]),
            )
            for r in rows
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
                customizations=customizations_of(row[10]),
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
