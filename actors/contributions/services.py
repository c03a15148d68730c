"""What contributions are given: mementos, and controls that tell a live
session or chat to act. All are thread-safe and never block: reads come from
memory, writes are messages to the store actor.

Mementos are a contribution's durable values, per chat or per session, under
a key of one or more segments. Every resident session's mementos are in
memory (loaded with the session, dropped when it leaves memory); each change
is written through to the store. A chat's mementos go when the chat is
disposed, a session's (and all its chats') when the session is.
"""

import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from agenthost.actors.context import Directory, Services, SessionEntries
from agenthost.actors.contributions.base import ChatKey
from agenthost.actors.protocol import ApplySessionAction, Ref, TurnEndedWithPending, Write
from agenthost.actors.queue_drain import drain_key
from agenthost.actors.runtime import Actor
from agenthost.messages.events import SessionEvent
from agenthost.messages.state import ChatState, SessionState
from agenthost.store.records import (
    DeleteMemento,
    MementoKey,
    SaveChatMeta,
    SaveSessionState,
    SetMemento,
)

_SEP = "\x1f"
_Slot = tuple[str, str, str]  # chat id ("" for the session), contribution, key


class MementoCache:
    """The host's mementos of resident sessions, write-through to the store."""

    def __init__(self, store: Ref) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._sessions: dict[str, dict[_Slot, Any]] = {}

    def load(self, session_id: str, rows: Iterable[SetMemento]) -> None:
        values = {(r.key.chat_id, r.key.contribution, r.key.key): json.loads(r.value) for r in rows}
        with self._lock:
            self._sessions[session_id] = values

    def forget(self, session_id: str) -> None:
        """The session left memory (or was disposed: the store deletes its rows)."""
        with self._lock:
            self._sessions.pop(session_id, None)

    def evict_chat(self, session_id: str, chat_id: str) -> None:
        """The chat was disposed (the store deletes its rows with it)."""
        with self._lock:
            values = self._sessions.get(session_id, {})
            for slot in [slot for slot in values if slot[0] == chat_id]:
                del values[slot]

    def view(self, contribution: str) -> "Mementos":
        return Mementos(self, contribution)

    def _key(self, contribution: str, chat: ChatKey, key: tuple[str, ...]) -> MementoKey:
        if not key or not all(isinstance(part, str) and part for part in key):
            raise ValueError(f"a memento key is one or more non-empty strings, not {key!r}")
        return MementoKey(
            session_id=chat.session_id,
            chat_id=chat.chat_id or "",
            contribution=contribution,
            key=_SEP.join(key),
        )

    def get(self, contribution: str, chat: ChatKey, key: tuple[str, ...]) -> Any:
        k = self._key(contribution, chat, key)
        with self._lock:
            return self._sessions.get(k.session_id, {}).get((k.chat_id, k.contribution, k.key))

    def set(self, contribution: str, chat: ChatKey, key: tuple[str, ...], value: Any) -> None:
        k = self._key(contribution, chat, key)
        encoded = json.dumps(value)
        with self._lock:
            values = self._sessions.setdefault(k.session_id, {})
            values[(k.chat_id, k.contribution, k.key)] = json.loads(encoded)
        Actor.send(self._store, Write(op=SetMemento(key=k, value=encoded)))

    def delete(self, contribution: str, chat: ChatKey, key: tuple[str, ...]) -> None:
        k = self._key(contribution, chat, key)
        with self._lock:
            self._sessions.get(k.session_id, {}).pop((k.chat_id, k.contribution, k.key), None)
        Actor.send(self._store, Write(op=DeleteMemento(key=k)))


class Mementos:
    """One contribution's mementos: `chat` is a ChatKey (chat_id None: the session's)."""

    def __init__(self, cache: MementoCache, contribution: str) -> None:
        self._cache = cache
        self.contribution = contribution

    def get(self, chat: ChatKey, *key: str, default: Any = None) -> Any:
        value = self._cache.get(self.contribution, chat, key)
        return default if value is None else value

    def set(self, chat: ChatKey, *key: str, value: Any) -> None:
        """Store a JSON-able value durably."""
        self._cache.set(self.contribution, chat, key, value)

    def delete_memento(self, chat: ChatKey, *key: str) -> None:
        self._cache.delete(self.contribution, chat, key)


class Sessions:
    """Tell a live session to apply a session action; read a live session's entry
    as it is now; persist a session entry."""

    def __init__(self, directory: Directory, store: Ref, entries: SessionEntries) -> None:
        self._directory = directory
        self._store = store
        self._entries = entries

    def entry(self, session_id: str) -> SessionState | None:
        """The live session's entry as its session last reduced it (None: not in memory)."""
        entry: SessionState | None = self._entries.get(session_id)
        return entry

    def apply(self, session_id: str, action: SessionEvent) -> bool:
        """Returns False when the session is not in memory (nothing to change)."""
        return Actor.send(self._directory.get(session_id), ApplySessionAction(action=action))

    def save(self, session_id: str, state: SessionState) -> None:
        Actor.send(self._store, Write(op=SaveSessionState(session_id=session_id, state=state)))


class Chats:
    """Tell a live chat's queue drain how a turn ended; persist a chat's title and flags."""

    def __init__(self, directory: Directory, store: Ref) -> None:
        self._directory = directory
        self._store = store

    def turn_ended(
        self, chat: ChatKey, state: ChatState, *, succeeded: bool | None, drain: bool
    ) -> bool:
        """(Only while messages are pending.) Returns False when the chat is not live."""
        assert chat.chat_id is not None
        queue_drain = self._directory.get(drain_key(chat.session_id, chat.chat_id))
        return Actor.send(
            queue_drain, TurnEndedWithPending(state=state, succeeded=succeeded, drain=drain)
        )

    def save_title(self, chat: ChatKey, title: str) -> None:
        assert chat.chat_id is not None
        Actor.send(self._store, Write(op=SaveChatMeta(chat_id=chat.chat_id, title=title)))

    def save_flags(self, chat: ChatKey, *, read: bool, archived: bool) -> None:
        """The chat's IsRead and IsArchived status flags."""
        assert chat.chat_id is not None
        op = SaveChatMeta(chat_id=chat.chat_id, read=read, archived=archived)
        Actor.send(self._store, Write(op=op))


def injectable(services: Services) -> dict[str, Callable[[str], Any]]:
    """What a contribution's constructor may ask for, by parameter name; each
    factory takes the contribution's id."""
    sessions = Sessions(services.directory, services.store, services.entries)
    chats = Chats(services.directory, services.store)
    return {
        "mementos": services.mementos.view,
        "clock": lambda _id: services.clock,
        "log": lambda cid: structlog.get_logger("agenthost.contributions").bind(contribution=cid),
        "sessions": lambda _id: sessions,
        "chats": lambda _id: chats,
    }
