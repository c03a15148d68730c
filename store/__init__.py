"""Durable state.

Belongs here: the stores (SQLite, the embedded default) and the records and
operations they speak. Invariants:
1. One writer: a store object is owned by exactly one StoreActor thread.
2. Rows, not an action log: sessions, chats, turns, pending messages.
3. Schema changes are numbered migrations in store/migrations/.
4. No turn is ever loaded as running.
"""

from agenthost.store.records import SessionRecord, StoreOp
from agenthost.store.sqlite import SqliteStore

__all__ = ["SessionRecord", "SqliteStore", "StoreOp"]
