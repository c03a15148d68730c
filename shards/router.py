"""Routing a sharded host's calls: which shard holds a session, and the refs
the surface asks.

Belongs here: `rendezvous` (a session's shard among the live ones), `Router`
(that choice, a session a shard said lives elsewhere, shards lost and gone)
and `RemoteRef`, which actors/calls.py asks as if it were an actor ref:
`ask` returns a RuntimeFuture set when the shard's reply comes, `tell` sends.
State lives on the front's loop thread (shards/front.py, invariant 4).

Invariants:
1. A session goes to one shard: the one its lease names when a shard said
   so (LEASE_HELD is followed once and remembered while that shard's link
   lives), else the rendezvous hash of its id over the live shards, so
   every front routes it alike and a shard's loss moves only its sessions.
2. A call that is not about one session (listings, client bindings) goes to
   any live shard: they share one store. Counters are every shard's, added.
3. A notice relayed to the other fronts (`relay`) goes through one connected
   shard, which sends it to every other front connected to it (every front
   connects to every shard); it is best effort, never retried.
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import TYPE_CHECKING, Any

import attrs
import structlog

from agenthost.actors.context import Departures, ProviderHealth
from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.protocol import AdoptSession, GetCounters, ImportRecord, LoadSession
from agenthost.actors.session import ChatInfo
from agenthost.actors.watchers import Watchers
from agenthost.actors.worktree import CreateWorktree, RemoveWorktree
from agenthost.messages.commands import CreateSession, DisposeSession
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.shards.wire import (
    ChatTarget,
    HostTarget,
    Relay,
    RemoteChat,
    SessionTarget,
    SupervisorTarget,
    Target,
)

if TYPE_CHECKING:
    from agenthost.shards.front import ShardLink

log = structlog.get_logger(__name__)


@attrs.define(eq=False)
class Pending:
    """A call sent (or waiting to be sent) and the future its reply sets."""

    target: Target
    message: Any
    future: RuntimeFuture
    router: Router
    redirected: bool = False


def exc_info_of(error: BaseException) -> tuple[type[BaseException], BaseException, None]:
    return (type(error), error, None)


def chat_info(router: Router, info: RemoteChat) -> ChatInfo:
    return ChatInfo(info.chat_id, RemoteRef(router, ChatTarget(info.session_id, info.chat_id)))  # type: ignore[arg-type]


def rendezvous(session_id: str, shard_ids: list[str]) -> str:
    """The shard with the highest hash of (shard, session): every front agrees,
    and a shard's loss moves only its own sessions."""
    return max(
        shard_ids,
        key=lambda shard: hashlib.blake2b(f"{shard}/{session_id}".encode(), digest_size=8).digest(),
    )


def routed_session(target: Target, message: Any) -> str | None:
    """The session a call belongs to (None: any shard can answer it)."""
    match target:
        case SessionTarget(session_id=session_id) | ChatTarget(session_id=session_id):
            return session_id
    match message:
        case CreateSession() | DisposeSession() | LoadSession():
            return message.session_id
        case AdoptSession() | ImportRecord():
            return message.record.session_id
        case CreateWorktree() | RemoveWorktree():
            return message.session_id
    return None


class Router:
    """Which link a call takes (invariant 1). Its state: the front loop's thread."""

    def __init__(self, links: list[ShardLink]) -> None:
        self.links = {link.shard_id: link for link in links}
        self._live = sorted(self.links)
        self._pins: dict[str, str] = {}  # session id -> the shard its lease names
        # who hears that a session left a shard's memory (the front's services')
        self.departures = Departures()
        self.relayed = Relayed()  # who hears what other fronts relay
        self.health = ProviderHealth()  # the shards' unavailable providers, counted
        for link in links:
            link.router = self

    def route(self, session_id: str | None) -> ShardLink:
        if not self._live:
            raise AgentHostError(code=ErrorCode.HOST_STOPPED, message="no shard is running")
        if session_id is None:
            return self.links[self._live[0]]
        pinned = self._pins.get(session_id)
        if pinned is not None and pinned in self._live:
            return self.links[pinned]
        return self.links[rendezvous(session_id, self._live)]

    def send(self, target: Target, message: Any, future: RuntimeFuture) -> None:
        """(The loop's thread.)"""
        pending = Pending(target, message, future, self)
        try:
            link = self.route(routed_session(target, message))
        except AgentHostError as error:
            future.set_exception(exc_info=exc_info_of(error))
            return
        link._send(pending)

    def follow(self, pending: Pending, owner: str) -> bool:
        """A shard said another holds the session: send it there, and remember."""
        link = self.links.get(owner)
        session_id = routed_session(pending.target, pending.message)
        if link is None or link.gone or session_id is None:
            return False
        self._pins[session_id] = owner
        link._send(pending)
        return True

    def relay(self, notice: Any) -> None:
        """(The loop's thread.) Hand `notice` to the other fronts through one
        connected shard; best effort: with none connected, or a shard lost with
        it in flight, it is dropped (invariant 3)."""
        for shard in self._live:
            link = self.links[shard]
            if link.connected:
                link._tell(HostTarget(), Relay(notice=notice))
                return

    def lost(self, link: ShardLink) -> None:
        for session_id in [s for s, owner in self._pins.items() if owner == link.shard_id]:
            del self._pins[session_id]

    def gone(self, link: ShardLink) -> None:
        """A shard that cannot be reached any more: its sessions rehash to the rest
        (the shard they reach takes their leases over when the store says the
        owner is stale)."""
        self._live = [shard for shard in self._live if shard != link.shard_id]
        self.lost(link)


class Relayed(Watchers[[Any]]):
    """Who hears the notices other fronts relay (`arrived`: callbacks on the
    front's loop thread, watched from the server's: hand them on, never block)."""

    def __init__(self) -> None:
        super().__init__("relay_watcher_failed")

    def arrived(self, notice: Any) -> None:
        self.tell(notice)


class RemoteRef:
    """Stands in for an actor on a shard: what actors/calls.py asks."""

    def __init__(self, router: Router, target: Target) -> None:
        self._router = router
        self.target = target
        self._io = next(iter(router.links.values()))._io

    def ask(self, message: Any, block: bool = False, timeout: float | None = None) -> RuntimeFuture:
        future = RuntimeFuture()
        if isinstance(message, GetCounters) and isinstance(
            self.target, (HostTarget, SupervisorTarget)
        ):
            self._io.call(self._counters, message, future)
        else:
            self._io.call(self._router.send, self.target, message, future)
        if block:
            return future.get(timeout=timeout)  # type: ignore[no-any-return,unused-ignore]
        return future

    def tell(self, message: Any) -> None:
        self._io.call(self._tell, message)

    def _tell(self, message: Any) -> None:
        session_id = routed_session(self.target, message)
        with contextlib.suppress(AgentHostError):
            self._router.route(session_id)._tell(self.target, message)

    def _counters(self, message: GetCounters, future: RuntimeFuture) -> None:
        """Every live shard's counters, added up."""
        links = [link for link in self._router.links.values() if not link.gone]
        parts = [RuntimeFuture() for _ in links]
        left = [len(parts)]
        total: dict[str, int] = {}

        def one(part: RuntimeFuture) -> None:
            try:
                for key, value in part.get(timeout=0).items():
                    total[key] = total.get(key, 0) + value
            except BaseException as exc:
                if not future.done():
                    future.set_exception(exc_info=exc_info_of(exc))
                return
            left[0] -= 1
            if left[0] == 0 and not future.done():
                future.set(total)

        for link, part in zip(links, parts, strict=True):
            part.add_done_callback(lambda f: self._io.call(one, f))
            link._send(Pending(self.target, message, part, self._router))
        if not links:
            future.set(total)

    def __repr__(self) -> str:
        return f"RemoteRef({self.target})"
