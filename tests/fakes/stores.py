"""Stores with test controls, and the stores the contract tests run against."""

import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from agenthost.actors.protocol import Committed
from agenthost.actors.runtime import Actor, handles
from agenthost.messages.state import TurnState
from agenthost.store import Store, store_from_spec
from agenthost.store.records import SaveSession, SaveTurnEnded, SaveTurnStarted, StoreOp
from agenthost.store.sql import migrations
from agenthost.store.sqlite import SqliteStore

POSTGRES_URL = os.environ.get("AGENTHOST_TEST_POSTGRES", "postgresql://postgres@127.0.0.1/test")
"""The PostgreSQL server the contract tests use; each test gets a schema of its own there."""


@attrs.define
class StoreFactory:
    """Makes store objects over one test's database (SQLite file or PostgreSQL schema).

    `spec` is what --store takes; `query` and `execute` reach the database as
    another process would (committed rows only), with `?` placeholders.
    """

    kind: str
    spec: str

    def __call__(self, *, create: bool = True) -> Store:
        return store_from_spec(self.spec, create=create)

    def query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._run(statement, params, fetch=True)

    def execute(self, statement: str, params: Sequence[Any] = ()) -> None:
        self._run(statement, params, fetch=False)

    def write_schema(self, up_to: int) -> None:
        """An empty store as migrations 1 to `up_to` left it (an older agenthost's)."""
        folder = "migrations" if self.kind == "sqlite" else "migrations/postgresql"
        if self.kind == "postgres":
            self.execute(f"CREATE SCHEMA {self().schema}")  # type: ignore[attr-defined]
        scripts = [script for version, script in migrations(folder) if version <= up_to]
        self.execute("\n".join([*scripts, "CREATE TABLE schema_version (version INTEGER);"]))
        self.execute("INSERT INTO schema_version VALUES (?)", (up_to,))

    def _run(self, statement: str, params: Sequence[Any], fetch: bool) -> list[tuple[Any, ...]]:
        """A statement with parameters, or a script of several without."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.spec) as db:
                if fetch or params:
                    return [tuple(row) for row in db.execute(statement, params).fetchall()]
                db.executescript(statement)
                return []
        import psycopg

        store = store_from_spec(self.spec)
        with psycopg.connect(store.conninfo, autocommit=True) as db:  # type: ignore[attr-defined]
            db.execute(f"SET search_path TO {store.schema}".encode())  # type: ignore[attr-defined]
            if fetch or params:
                cursor = db.execute(statement.replace("?", "%s").encode(), params)
                return [tuple(row) for row in cursor.fetchall()] if fetch else []
            db.execute(statement.encode())
            return []


_unreachable: list[str] = []


def postgres_schema_url() -> Iterator[str]:
    """A URL for a fresh schema on the test server, dropped afterwards; skips the
    test, saying why, where psycopg or the server is missing."""
    try:
        import psycopg
    except ImportError:
        pytest.skip("psycopg is not installed: pip install 'agenthost[scale]' (or [test])")
    if _unreachable:
        pytest.skip(_unreachable[0])
    try:
        admin = psycopg.connect(POSTGRES_URL, connect_timeout=3, autocommit=True)
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())[:160]
        _unreachable.append(
            f"no PostgreSQL server at {POSTGRES_URL} ({reason}); set AGENTHOST_TEST_POSTGRES"
        )
        pytest.skip(_unreachable[0])
    schema = f"t_{uuid.uuid4().hex[:20]}"
    joiner = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{joiner}schema={schema}&application_name={schema}"
    finally:
        with admin:
            # A test that failed may have left a host connected: end it, or the drop waits.
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s AND pid <> pg_backend_pid()",
                (schema,),
            )
            admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())


def store_factories(kind: str, db_path: Path) -> Iterator[StoreFactory]:
    if kind == "sqlite":
        yield StoreFactory(kind, str(db_path))
    else:
        for url in postgres_schema_url():
            yield StoreFactory(kind, url)


def write_turns(
    store: Store, session_id: str, turns: int, text_size: int = 200, created_at: int = 1
) -> None:
    """A session whose chat (`<session_id>-c`) has `turns` complete turns; not committed."""
    chat_id = f"{session_id}-c"
    store.apply(
        SaveSession(
            session_id=session_id,
            provider="scripted",
            title="",
            created_at=created_at,
            chat_ids=(chat_id,),
        )
    )
    for n in range(turns):
        turn_id = f"{session_id}-t{n}"
        store.apply(
            SaveTurnStarted(
                session_id=session_id,
                chat_id=chat_id,
                turn_id=turn_id,
                seq=n,
                user_text=f"question {n} " + "q" * text_size,
                started_at=created_at,
            )
        )
        store.apply(
            SaveTurnEnded(
                chat_id=chat_id,
                turn_id=turn_id,
                state=TurnState.COMPLETE,
                assistant_text=f"answer {n} " + "a" * text_size,
                ended_at=created_at,
            )
        )


class Acks(Actor):
    """Keeps the store acks (Committed) it is sent, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.acks: list[Committed] = []

    @handles(Committed)
    def _ack(self, message: Committed) -> None:
        self.acks.append(message)


class GatedCommitStore:
    """Wraps a store; holds the commit of a batch that ends a turn until `release()`.

    `blocked` is set while such a commit waits, so a test can look at what
    subscribers have seen before the turn's end is durable.
    """

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.blocked = threading.Event()
        self._release = threading.Event()
        self._holds_turn_end = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def apply(self, op: StoreOp) -> None:
        self._inner.apply(op)
        if isinstance(op, SaveTurnEnded):
            self._holds_turn_end = True

    def commit(self) -> None:
        if self._holds_turn_end:
            self._holds_turn_end = False
            self.blocked.set()
            if not self._release.wait(10):
                raise TimeoutError("gated commit never released")
        self._inner.commit()

    def release(self) -> None:
        self._release.set()


class RecordingStore(SqliteStore):
    """Records each op it applies and each commit (as None), in order."""

    def __init__(self, path: object) -> None:
        super().__init__(path)  # type: ignore[arg-type]
        self.log: list[StoreOp | None] = []

    def apply(self, op: StoreOp) -> None:
        super().apply(op)
        self.log.append(op)

    def commit(self) -> None:
        super().commit()
        self.log.append(None)
