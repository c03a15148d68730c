"""`ShardedHost` and `AsyncShardedHost`: the public surface, with sessions on shards.

Belongs here: the front object a sharded host is (`Front`: its loop, links,
router and the services its surface reads) and the two surfaces over it.
They are Host and AsyncHost: the same methods, parameters and return types,
written once in actors/calls.py, asking RemoteRefs (shards/front.py) where
an in-process host asks its actors. Session, Chat, TurnHandle, Subscription
are the very classes an in-process host hands out.

Invariants:
1. Nothing of a session lives on the front but handles: its state, turns and
   subscribers are on the one shard that holds its lease.
2. `stop()` stops what this front started (its links, and the shards if it
   started them), never a shard or a Ray cluster someone else runs.
"""

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from agenthost.actors.aio import AsyncHost
from agenthost.actors.calls import HostCore
from agenthost.actors.clock import Clock, SystemClock
from agenthost.actors.context import Departures, ProviderHealth
from agenthost.actors.limits import HostLimits
from agenthost.actors.surface import DEFAULT_TIMEOUT, Host
from agenthost.shards.front import FrontLoop, Locate, RemoteRef, Router, ShardLink
from agenthost.shards.wire import (
    HostTarget,
    StoreTarget,
    SupervisorTarget,
    WorktreesTarget,
)


@attrs.define(eq=False)
class FrontServices:
    """What the surface's operations (and the AHP server) read of a host's
    services, on a front: refs that stand in for the shards' actors, the
    front's clock, and the names of the providers the shards serve."""

    clock: Clock
    providers: Mapping[str, Any]
    host: Any
    store: Any
    worktrees: Any
    supervisor: Any
    subscriber_queue_size: int = 10_000
    # What the front checks before a call leaves for a shard (a message's text,
    # a subscription's bytes); the shards check their own as well.
    limits: HostLimits = attrs.Factory(HostLimits)
    # Sessions that left a shard's memory, as every shard tells its fronts
    # (shards/shard.py, invariant 4): Host.on_session_left on a front.
    departures: Departures = attrs.Factory(Departures)
    # Which providers are unavailable: on any shard, as the shards tell their
    # fronts (shards/front.py, invariant 6).
    health: ProviderHealth = attrs.Factory(ProviderHealth)


class Front:
    """A sharded host's front: its I/O loop, a link per shard, the router."""

    def __init__(
        self,
        shards: Mapping[str, Locate],
        secret: bytes,
        provider_names: tuple[str, ...],
        *,
        clock: Clock | None = None,
        on_stop: Callable[[float], None] | None = None,
        limits: HostLimits | None = None,
    ) -> None:
        self.io = FrontLoop()
        links = [
            ShardLink(shard_id, locate, secret, self.io) for shard_id, locate in shards.items()
        ]
        self.router = Router(links)
        self._own_clock = SystemClock() if clock is None else None
        self.services = FrontServices(
            clock=clock or self._own_clock,  # type: ignore[arg-type]
            providers=dict.fromkeys(provider_names),
            host=RemoteRef(self.router, HostTarget()),
            store=RemoteRef(self.router, StoreTarget()),
            worktrees=RemoteRef(self.router, WorktreesTarget()),
            supervisor=RemoteRef(self.router, SupervisorTarget()),
            limits=limits or HostLimits(),
            departures=self.router.departures,
            health=self.router.health,
        )
        self.core = HostCore(self.services)  # type: ignore[arg-type]
        self._on_stop = on_stop
        self.shards: Any = None  # what started the shards (shards/ray_shards.py: RayShards)

    def connect(self, timeout: float) -> None:
        """Reach every shard once (so a start that cannot fails at once)."""

        async def reach() -> None:
            links = list(self.router.links.values())
            await asyncio.gather(*(link.wait_connected() for link in links))

        self.io.run(reach(), timeout)

    def stop(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        if self.core.stopped:
            return
        self.core.stopped = True

        async def close() -> None:
            for link in self.router.links.values():
                link.close()

        self.io.run(close(), timeout)
        self.io.stop(timeout)
        if self._on_stop is not None:
            self._on_stop(timeout)
        if self._own_clock is not None:
            self._own_clock.stop()


class ShardedHost(Host):
    """Host's surface over shards (see the module docstring). Start one with
    `agenthost.shards.start_sharded` (Ray) or `ShardedHost.connect` (shards that
    already run)."""

    def __init__(self, front: Front) -> None:
        self._front = front
        self._core = front.core

    @classmethod
    def connect(
        cls,
        shards: Mapping[str, Locate],
        secret: bytes,
        provider_names: tuple[str, ...] = ("scripted",),
        *,
        on_stop: Callable[[float], None] | None = None,
        shards_started: Any = None,
        timeout: float = DEFAULT_TIMEOUT,
        limits: HostLimits | None = None,
    ) -> "ShardedHost":
        """A front over running shards: shard id -> where it is now. `on_stop` runs
        when it stops (it stops what started the shards, `shards_started`);
        `limits`: the shards' HostLimits, which the front checks too."""
        front = Front(shards, secret, provider_names, on_stop=on_stop, limits=limits)
        front.shards = shards_started
        try:
            front.connect(timeout)
        except BaseException:
            front.stop(timeout)
            raise
        return cls(front)

    @property
    def front(self) -> Front:
        return self._front

    @property
    def shards(self) -> Any:
        """What started the shards (RayShards on Ray), if this front did."""
        return self._front.shards

    def stop(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Close the links; stop the shards if this front started them."""
        self._front.stop(timeout)

    @property
    def services(self) -> Any:
        return self._front.services

    @property
    def aio(self) -> "AsyncShardedHost":
        return AsyncShardedHost(self._front)


class AsyncShardedHost(AsyncHost):
    """AsyncHost's surface over shards."""

    def __init__(self, front: Front) -> None:
        self._front = front
        self._core = front.core

    def relay(self, notice: Any) -> None:
        """Hand `notice` (plain data) to every other front of these shards, best
        effort (shards/router.py, invariant 3)."""
        self._front.io.call(self._front.router.relay, notice)

    def on_relayed(self, callback: Callable[[Any], None]) -> Callable[[], None]:
        """`callback(notice)` on the running loop (the one this is called on) for
        each notice another front relays. Returns the function that stops it."""
        loop = asyncio.get_running_loop()

        def hop(notice: Any) -> None:  # on the front's loop thread
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(callback, notice)

        return self._front.router.relayed.watch(hop)

    @property
    def front(self) -> Front:
        return self._front

    async def stop(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        await asyncio.to_thread(self._front.stop, timeout)

    @property
    def services(self) -> Any:
        return self._front.services

    @property
    def sync(self) -> ShardedHost:
        return ShardedHost(self._front)
