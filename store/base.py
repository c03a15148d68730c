"""What every store offers: the contract the StoreActor and the CLI rely on.

`Store` is the contract (SqliteStore and PostgresStore keep it alike; one
test suite checks both). A store object is built closed; `open()` checks,
locks where the database needs it and migrates. `store_from_spec` turns what
a user types after `--store` into a store object.
"""

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import attrs

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.state import SessionSummary
from agenthost.store.records import SessionRecord, StoreOp

if TYPE_CHECKING:
    from agenthost.store.leases import Takeover

OWNER_KEY = "ahp.owner"
"""The session config key that names a session's owner (the AHP server sets it);
the store keeps a copy in an indexed column for the per-owner listing."""

CLIENT_KEEP_MS = 7 * 24 * 3600 * 1000
"""How long a client id stays bound to its identity after the client was last seen."""

PRUNE_BATCH = 100
"""How many expired client bindings one claim removes in passing."""


@attrs.frozen(kw_only=True)
class SessionPage:
    """One page of a per-owner listing, oldest first; `next_cursor` is None on the last."""

    items: tuple[SessionSummary, ...]
    next_cursor: str | None = None


@attrs.frozen(kw_only=True)
class ClientBinding:
    """A client id bound to the identity that first claimed it (times in ms since the epoch)."""

    client_id: str
    identity: str
    first_seen: int
    last_seen: int


@attrs.frozen(kw_only=True)
class CommitReport:
    """What a commit undid: the writes the database refused or the lease fence
    stopped (by their position in the batch, from 0, each with its error), and
    the sessions whose writes were fenced (this shard no longer holds them).
    Everything else in the batch is durable."""

    failed: Mapping[int, AgentHostError] = attrs.field(factory=dict)
    fenced: frozenset[str] = frozenset()


NOTHING_UNDONE = CommitReport()


@attrs.frozen(kw_only=True)
class StoreReport:
    """What `check()` found in a sound store."""

    location: str
    schema_version: int
    known_version: int
    sessions: int
    turns: int
    size_bytes: int | None = None


class Store(Protocol):
    """A durable store, owned by one StoreActor thread once open.

    Writes are applied inside an open transaction and made durable by
    `commit()` (group commit); reads see writes not yet committed. A write the
    database refuses is undone alone: `apply` raises at once, or (a store that
    sends a batch's writes together) the commit's report names it. `errors`
    are the exceptions a write or commit may raise that the StoreActor turns
    into failed acks (anything else is a bug and propagates).

    A store opened with a shard identity (`shard=`) registers the shard (a new
    epoch) when it opens, takes a session's lease with `acquire_lease`, and
    fences at commit the writes of sessions it no longer holds
    (store/leases.py).
    """

    errors: tuple[type[Exception], ...]
    created: bool
    """Whether `open()` created a new, empty store."""

    @property
    def location(self) -> str:
        """Where the store is, for people (a path, or a URL without its password)."""
        ...

    def open(self) -> None: ...
    def commit(self) -> CommitReport | None: ...
    def rollback(self) -> None: ...
    def close(self) -> None: ...
    def check(self) -> StoreReport: ...
    def backup(self, dest: str | os.PathLike[str]) -> StoreReport: ...
    def apply(self, op: StoreOp) -> None: ...
    def list_sessions(self) -> list[SessionSummary]: ...
    def list_sessions_page(
        self, *, owner: str, limit: int, after: str | None = None
    ) -> SessionPage: ...
    def count_sessions(self, owner: str) -> int: ...
    def find_session(
        self, session_id: str | None = None, chat_id: str | None = None
    ) -> SessionSummary | None: ...
    def load_session(self, session_id: str) -> SessionRecord | None: ...
    def finish_reasons(self, chat_id: str) -> dict[str, str | None]: ...
    def provider_ref(self, chat_id: str) -> str | None: ...
    def turn_states(self, session_id: str) -> list[tuple[str, str, str | None]]: ...
    def pending_count(self, session_id: str) -> int: ...
    def claim_client(
        self, client_id: str, identity: str, now_ms: int, keep_ms: int = CLIENT_KEEP_MS
    ) -> ClientBinding: ...
    def find_client(self, client_id: str) -> ClientBinding | None: ...
    def prune_clients(self, before_ms: int) -> int: ...
    def acquire_lease(self, session_id: str, *, force: bool = False) -> "Takeover | None": ...


def store_error(message: str) -> AgentHostError:
    return AgentHostError(code=ErrorCode.STORE_ERROR, message=message)


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
SPEC_HELP = "a SQLite file (a path or sqlite:///path) or postgresql://user@host/database"


def store_from_spec(spec: str | Path, *, create: bool = True) -> Store:
    """The store a `--store` value names (not opened).

    A path or `sqlite:///path` is a SQLite file (`sqlite:///rel.db` is relative,
    `sqlite:////abs.db` absolute, as SQLAlchemy spells them); `postgresql://...`
    (or `postgres://`) is a PostgreSQL database, with `?schema=NAME` to choose
    the schema (default `agenthost`). With `create=False`, opening a store that
    does not exist fails instead of creating it.

    Raises:
        AgentHostError: STORE_ERROR for a value that names no store (it says why),
            or a PostgreSQL URL where psycopg is not installed.
    """
    if isinstance(spec, Path):
        return _sqlite(spec, create)
    text = spec.strip()
    if not text:
        raise store_error(f"the store is empty: give {SPEC_HELP}")
    scheme = _SCHEME.match(text)
    if scheme is None or len(scheme.group(1)) == 1:  # C:\... is a path
        return _sqlite(Path(text).expanduser(), create)
    name = scheme.group(1).lower()
    if name in ("postgresql", "postgres"):
        try:
            from agenthost.store.postgres import PostgresStore
        except ImportError:
            raise store_error(
                f"{text.split('@')[-1]}: PostgreSQL needs psycopg: pip install 'agenthost[scale]'"
            ) from None
        return PostgresStore(text, create=create)
    if name == "sqlite":
        if not text.startswith("sqlite:///") or text in ("sqlite:///", "sqlite:////"):
            raise store_error(
                f"{text}: a SQLite URL is sqlite:///relative/path or sqlite:////absolute/path"
            )
        rest = text.removeprefix("sqlite:///")
        if rest.startswith(":memory:") or "?" in rest:
            raise store_error(f"{text}: give a file path (no :memory:, no URL options)")
        return _sqlite(Path(rest).expanduser(), create)
    raise store_error(f"{text}: unknown kind of store {name!r}: give {SPEC_HELP}")


def _sqlite(path: Path, create: bool) -> Store:
    from agenthost.store.sqlite import SqliteStore

    return SqliteStore(path, create=create)
