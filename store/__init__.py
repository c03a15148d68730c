"""Durable state.

Belongs here: the stores (SQLite, the embedded default; PostgreSQL) and the
records and operations they speak. Invariants:
1. One writer: a store object is owned by exactly one StoreActor thread.
2. Rows, not an action log: sessions, chats, turns, pending messages.
3. Schema changes are numbered migrations: store/migrations/ for SQLite and
   store/migrations/postgresql/ for PostgreSQL, the same numbers in both.
4. No turn is ever loaded as running.
5. A store is checked when it opens; a damaged, foreign or too new one is
   refused with one line naming it, what is wrong and what to do.
6. Every store keeps the contract in store/base.py (`Store`); one test suite
   runs against each.
7. A store opened with a shard identity (`shard=`) holds a session's writes
   to its lease (store/leases.py): a session is resident on one shard at a
   time, and a stale shard's writes never commit.
"""

from agenthost.store.base import (
    ClientBinding,
    SessionPage,
    Store,
    StoreReport,
    store_from_spec,
)
from agenthost.store.records import SessionRecord, StoreOp
from agenthost.store.sqlite import SqliteStore

__all__ = [
    "ClientBinding",
    "SessionPage",
    "SessionRecord",
    "SqliteStore",
    "Store",
    "StoreOp",
    "StoreReport",
    "store_from_spec",
]
