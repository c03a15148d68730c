"""What a host's actors share: services injected at construction.

`ActorGroup` is the host's own registry of the actors it started, in start
order, so the host stops exactly its actors, in reverse order. `Departures`
tells whoever watches (the AHP server) that a session left memory, so what
they keep per session can go with it.
`SessionChanges` tells them that a session's entry, chat catalog or chats'
statuses may have changed, so what they show of it can follow.
"""

import enum
import threading
from collections.abc import Mapping
from typing import Any

import attrs
import structlog
from pykka import ActorRef

from agenthost.actors.clock import Clock
from agenthost.actors.limits import HostLimits
from agenthost.actors.watchers import Watchers
from agenthost.providers.base import Provider, ProviderLoop, RetryPolicy

log = structlog.get_logger(__name__)


class ActorGroup:
    """A thread-safe, insertion-ordered set of actor refs with O(1) add and remove."""

    def __init__(self) -> None:
        self._refs: dict[str, ActorRef[Any]] = {}
        self._lock = threading.Lock()

    def add(self, ref: ActorRef[Any]) -> None:
        with self._lock:
            self._refs[ref.actor_urn] = ref

    def discard(self, ref: ActorRef[Any]) -> None:
        with self._lock:
            self._refs.pop(ref.actor_urn, None)

    def snapshot(self) -> list[ActorRef[Any]]:
        with self._lock:
            return list(self._refs.values())

    def __len__(self) -> int:
        return len(self._refs)


class Directory:
    """Live sessions and chats by key (a session id, or "session/chat"), for
    contributions that tell them to act. Thread-safe, O(1)."""

    def __init__(self) -> None:
        self._refs: dict[str, ActorRef[Any]] = {}
        self._lock = threading.Lock()

    def register(self, key: str, ref: ActorRef[Any]) -> None:
        with self._lock:
            self._refs[key] = ref

    def unregister(self, key: str, ref: ActorRef[Any]) -> None:
        with self._lock:
            if self._refs.get(key) is ref:
                del self._refs[key]

    def get(self, key: str) -> ActorRef[Any] | None:
        with self._lock:
            return self._refs.get(key)


class SessionEntries:
    """Each live session's entry (title, read, archived, ...) as its session last
    reduced it: a read-only view for contributions on other actors' threads,
    current without a message's delay. Only the session writes its own entry
    (a single dict assignment, atomic), and removes it when it stops."""

    def __init__(self) -> None:
        self._entries: dict[str, Any] = {}

    def publish(self, session_id: str, entry: Any) -> None:
        self._entries[session_id] = entry

    def drop(self, session_id: str) -> None:
        self._entries.pop(session_id, None)

    def get(self, session_id: str) -> Any:
        return self._entries.get(session_id)


class Departure(enum.Enum):
    """Why a session left memory."""

    RELEASED = "released"  # idle, or past max_resident: its rows stay
    COLLECTED = "collected"  # an unused draft, collected: its rows are gone
    DISPOSED = "disposed"  # disposed by a caller: its rows are gone
    FAILED = "failed"  # it could not be restored: its rows stay untouched


class Departures(Watchers[[str, Departure]]):
    """Who hears that a session left memory (`watch`). The host actor tells them
    (`left`), on its own thread: a watcher must not block (hand the notice to
    your own loop or actor). Thread-safe; a watcher that raises is logged and
    skipped."""

    def __init__(self) -> None:
        super().__init__("departure_watcher_failed")

    def left(self, session_id: str, why: Departure) -> None:
        self.tell(session_id, why)


class SessionChanges(Watchers[[str]]):
    """Who hears that a session may have changed (its entry, its chats, a chat's
    status). The session actor tells them (`changed`), on its own thread: a
    watcher must not block (hand the notice to your own loop). Thread-safe; a
    watcher that raises is logged and skipped. With no watcher a change costs
    one check."""

    def __init__(self) -> None:
        super().__init__("change_watcher_failed")

    def changed(self, session_id: str) -> None:
        if self.watched:
            self.tell(session_id)


class ProviderHealth:
    """Which providers are unavailable, and who hears when that changes.

    A provider is unavailable while a connection of it waits out its cool-down
    (it failed past the supervisor's restart limit: its sends fail at once);
    it is available again once none does. The supervisor tells it, on its own
    thread; watchers get the whole unavailable set and must not block.
    Thread-safe; a watcher that raises is logged and skipped."""

    def __init__(self) -> None:
        self._cooling: dict[str, int] = {}  # provider -> its connections in cool-down
        self._lock = threading.Lock()
        self._watchers: Watchers[[frozenset[str]]] = Watchers("provider_health_watcher_failed")
        self.watch = self._watchers.watch

    def unavailable(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._cooling)

    def cooling(self, provider: str, delta: int) -> None:
        """One more (+1) or one fewer (-1) of the provider's connections cools down."""
        with self._lock:
            before = provider in self._cooling
            count = self._cooling.get(provider, 0) + delta
            if count > 0:
                self._cooling[provider] = count
            else:
                self._cooling.pop(provider, None)
            changed = before != (provider in self._cooling)
            unavailable = frozenset(self._cooling)
        if changed:
            self._watchers.tell(unavailable)


@attrs.frozen(kw_only=True)
class Lifecycle:
    """When idle sessions leave memory (their rows stay) and unused drafts go."""

    idle_release_s: float = 30.0
    draft_gc_s: float = 30.0
    max_resident: int | None = None
    max_resident_bytes: int | None = None  # the chats' history (messages/sizes.py)

    @property
    def bounded(self) -> bool:
        """Whether resident sessions are bounded (sessions then report idle and busy)."""
        return self.max_resident is not None or self.max_resident_bytes is not None


@attrs.define(kw_only=True)
class Services:
    """Injected into every actor of one host. Immutable after the host starts."""

    clock: Clock
    store: ActorRef[Any]
    group: ActorGroup
    providers: Mapping[str, Provider]
    loops: Mapping[str, ProviderLoop]
    resume_retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    worktrees: ActorRef[Any] | None = None
    supervisor: ActorRef[Any] | None = None
    host: ActorRef[Any] | None = None
    subscriber_queue_size: int = 10_000
    directory: Directory = attrs.field(factory=Directory)
    entries: SessionEntries = attrs.field(factory=SessionEntries)
    lifecycle: Lifecycle = attrs.field(factory=Lifecycle)
    departures: Departures = attrs.field(factory=Departures)
    health: ProviderHealth = attrs.field(factory=ProviderHealth)
    changes: SessionChanges = attrs.field(factory=SessionChanges)
    limits: HostLimits = attrs.field(factory=HostLimits)
    contributions: Any = None  # the Dispatcher (actors.contributions), set at start
    mementos: Any = None  # the MementoCache, set at start
