"""The AHP server: JSON-RPC 2.0 over WebSocket at /ahp (aiohttp).

One `AhpServer` serves one Host through its asyncio surface (nothing blocks
the event loop). It holds the parts and wires them together; each part is
its own module:
- server/http.py: the app, its routes and the WebSocket upgrade, the
  security headers; server/hosts.py: the Host and Origin allowlist;
- server/connection.py: one socket (framing, outbox, rate limit, the ordered
  dispatch queue);
- server/requests.py and server/actions.py: the tables of request and client
  action handlers, over the typed frames of messages/protocol.py
  (server/authentication.py, server/completions.py, server/session_config.py:
  authenticate, completions, the session config requests);
- server/registry.py: who owns which session, the handles in use;
  server/quotas.py: what one identity may hold and create;
- server/broadcasts.py: who listens to which channel, session actions and
  the root's summary notifications; server/session_sync.py: what a session
  channel shows, and the actions from one of its states to another;
- server/channels.py: the chat channels and the one serverSeq;
- server/windows.py: AHP 1.1's windowed delivery (frames within credit);
- server/clients.py: client ids and the grace after a client left;
- server/views.py: the host's values as the wire shows them;
- server/fronts.py: a sharded server's several front processes on one port
  (each an AhpServer whose serverSeq starts at a base of its own).

Rules kept by the parts (see each module): a session is visible only to the
identity that created it; an accepted client action drives its side effect
and its event goes out with the client's origin, an invalid one is echoed
with a rejectionReason; a slow subscriber is cut off, never blocking the
host; tokens and prompt text are never logged; what the server keeps per
session goes when the host says the session left memory (`_session_left`),
so its tables hold resident sessions and open connections only
(`tables()`, shown on /metrics).
"""

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

import attrs
import structlog
from aiohttp import web

from agenthost.actors.aio import AsyncHost, AsyncSession
from agenthost.actors.context import Departure
from agenthost.actors.surface import Host
from agenthost.messages.errors import AgentHostError
from agenthost.messages.events import (
    TERMINAL_EVENTS,
    ChatEvent,
    RequestClosed,
    RequestOpened,
    SteeringNotWithdrawn,
    TurnCancelled,
    TurnCompleted,
    TurnStarted,
)
from agenthost.messages.events import SteeringWithdrawn as SteeringWithdrawnEvent
from agenthost.messages.session_events import AgentsChanged
from agenthost.server.active_sessions import ActiveSessions
from agenthost.server.authentication import RESOURCE
from agenthost.server.broadcasts import RELAYED, Listeners, RootNotice, SummaryChecks
from agenthost.server.channels import CHAT_PREFIX, ChannelTable, Sequencer, chat_uri, session_uri
from agenthost.server.clients import Clients
from agenthost.server.connection import CLOSE_WAIT_S, Connection
from agenthost.server.errors import RpcError
from agenthost.server.hosts import HostAllowlist
from agenthost.server.http import build_app
from agenthost.server.memory import HeapTrimmer
from agenthost.server.metrics import Metrics
from agenthost.server.quotas import IdentityQuotas
from agenthost.server.registry import Registry
from agenthost.server.views import agents
from agenthost.server.windows import Remembered, WindowLimits
from agenthost.store.base import OWNER_KEY

__all__ = ["OWNER_KEY", "AhpServer", "Limits", "Metrics"]

log = structlog.get_logger(__name__)


@attrs.frozen(kw_only=True)
class Limits:
    """Bounds on what one connection (or identity) may cost the server."""

    frame_bytes: int = 1 << 20
    json_depth: int = 64
    subscriptions: int = 256
    replay: int = 10_000
    replay_bytes: int = 32 << 20  # the replay buffer's envelopes, server-wide, in bytes
    channel_bytes: int = 256 << 20  # a chat channel's unread events (its pump never lags)
    outbox: int = 10_000  # queued outgoing messages before a slow client is cut off
    outbox_bytes: int = 64 << 20  # ...and queued outgoing bytes (a connection's send buffer)
    rate: float = 200.0  # messages per second, sustained
    burst: int = 400
    page: int = 100
    page_bytes: int = 8 << 20  # a fetched page stops before this many bytes (one turn at least)
    client_tool_grace_s: float = 30.0
    # A chat channel nobody follows is closed after this, so its session can
    # leave memory (a client reconnecting within it finds the channel open).
    channel_idle_s: float = 60.0
    # ...and at most this many wait out that grace at once (the longest idle then
    # closes now): each keeps its session, and its whole history, in memory.
    idle_channels: int = 256
    # An HTTP request's headers must arrive within this (a half-sent request is
    # closed), counted from the connection's start or its previous response.
    header_timeout_s: float = 10.0
    # Per identity: sessions in memory, and sessions created a minute (None: no quota).
    identity_resident_sessions: int | None = 1_000
    identity_session_creations_per_minute: int | None = 600
    # Windowed delivery (AHP 1.1 flow control, server/windows.py).
    windows: WindowLimits = attrs.field(factory=WindowLimits)


_OUTCOMES = {TurnCompleted: "complete", TurnCancelled: "cancelled"}


class AhpServer:
    """Serves one Host over AHP. `tokens` maps a bearer token to an identity."""

    def __init__(
        self,
        host: Host | AsyncHost,
        tokens: Mapping[str, str],
        *,
        limits: Limits | None = None,
        origins: tuple[str, ...] = (),
        static_dir: str | None = None,
        hosts: HostAllowlist | None = None,
        seq_base: int = 0,
    ) -> None:
        self.host: AsyncHost = host if isinstance(host, AsyncHost) else host.aio
        self.tokens = dict(tokens)
        self.limits = limits or Limits()
        self.origins = origins
        self.static_dir = static_dir
        self.hosts = hosts or HostAllowlist.of()
        # seq_base: where this server's serverSeq starts (a sharded front's own range)
        self.sequencer = Sequencer(self.limits.replay, self.limits.replay_bytes, seq_base)
        self.metrics = Metrics()
        self.connections: set[Connection] = set()
        self.remembered_windows = Remembered(self.limits.windows.remembered)
        clock = self.host.services.clock
        self.quotas = IdentityQuotas(
            self.limits.identity_resident_sessions,
            self.limits.identity_session_creations_per_minute,
            clock.now,
        )
        self.registry = Registry(self.host, self.quotas.admit_resident)
        # A sharded host of several fronts relays root notices to the others
        # (AsyncShardedHost.relay; an in-process host has none).
        relay = getattr(self.host, "relay", None)
        self.listeners = Listeners(self.sequencer, relay)
        self.summaries = SummaryChecks(self.registry, self.listeners, self.spawn)
        self.active_sessions = ActiveSessions(self.host.count_sessions, self.listeners, self.spawn)
        self.channels = ChannelTable(
            self.sequencer,
            self.host.services.clock,
            self.limits.channel_idle_s,
            self.spawn,
            self._observe,
            channel_bytes=self.limits.channel_bytes,
            idle_max=self.limits.idle_channels,
        )
        self.clients = Clients(
            self.host, self.limits.client_tool_grace_s, self._remove_client, self.spawn
        )
        self._background: set[asyncio.Task[None]] = set()
        self._unwatch: Callable[[], None] = lambda: None
        self.heap = HeapTrimmer()  # what sessions leaving memory freed goes back to the system
        self.accepting = True
        self.running_turns = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def app(self) -> web.Application:
        return build_app(self)

    def listening_on(self, port: int) -> None:
        """The port the server is bound to (a browser's Origin must name it)."""
        self.hosts = self.hosts.listening_on(port)

    async def start(self) -> None:
        """(on the app's startup) Hear of every session that leaves memory, of
        every change to one that is resident, of providers that become
        unavailable or come back, and (a sharded host's front) of what the
        other fronts relay."""
        left = self.host.on_session_left(self._session_left)
        changed = self.host.on_session_changed(self.summaries.may_have_changed)
        health = self.host.on_providers_changed(self._providers_changed)
        relayed = getattr(self.host, "on_relayed", None)
        unrelay = relayed(self._relayed) if relayed is not None else (lambda: None)

        def unwatch() -> None:
            left()
            changed()
            health()
            unrelay()

        self._unwatch = unwatch

    def _relayed(self, notice: object) -> None:
        """Another front's notice (a sharded host's): a root notification."""
        if isinstance(notice, RootNotice):
            self.listeners.relayed(notice)
            if notice.frame.get("method") in RELAYED:  # created or disposed there
                self.active_sessions.changed(notice.identity)

    def available_providers(self) -> list[str]:
        """The root's agents: the host's providers but those unavailable now."""
        unavailable = self.host.unavailable_providers()
        return sorted(p for p in self.host.services.providers if p not in unavailable)

    def _providers_changed(self, unavailable: frozenset[str]) -> None:
        """A provider became unavailable (past the supervisor's restart limit)
        or came back: every root subscriber gets root/agentsChanged."""
        self.listeners.root_action(
            AgentsChanged(agents=agents(self.available_providers(), (RESOURCE,)))
        )

    def _session_left(self, session_id: str, why: Departure) -> None:
        """The session left memory: nothing kept for it stays (a disposed one's
        channels close too; a released one has none: a channel keeps it in)."""
        gone = why in (Departure.DISPOSED, Departure.COLLECTED)
        owner = self.registry.owner(session_id)
        if gone and owner is not None:
            self.active_sessions.changed(owner)
        chats = self.registry.disposed(session_id) if gone else self.registry.departed(session_id)
        self.summaries.departed(session_id)
        self.clients.departed(session_id)
        self.heap.left()
        if gone:
            for uri in (session_uri(session_id), *map(chat_uri, chats)):
                self.spawn(self.close_channel(uri))

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` in the background; cancelled when the server shuts down."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- connections -------------------------------------------------------------------
    def connected(self, connection: Connection) -> None:
        self.connections.add(connection)
        self.metrics.connections = len(self.connections)

    def disconnected(self, connection: Connection) -> None:
        self.connections.discard(connection)
        self.metrics.connections = len(self.connections)
        connection.detach()

    # -- sessions ----------------------------------------------------------------------
    async def sessions_owned(self, session: AsyncSession, identity: str) -> None:
        """A session this identity created is its own (kept in the store)."""
        await session.set_config({OWNER_KEY: identity})
        self.registry.created(session.id, identity, session)

    async def forget_session(self, session_id: str) -> None:
        """The session was disposed: nothing of it stays here, not even its
        subscribers (anyone may create a session with its id again)."""
        chats = self.registry.disposed(session_id)
        self.summaries.departed(session_id)
        self.clients.departed(session_id)
        for uri in (session_uri(session_id), *map(chat_uri, chats)):
            await self.close_channel(uri)

    async def close_channel(self, uri: str) -> None:
        """A disposed session's or chat's channel: every subscriber leaves it."""
        for listener in self.listeners.of("", uri):
            listener.leave(uri)
        if uri.startswith(CHAT_PREFIX):
            self.registry.chat_gone(uri[len(CHAT_PREFIX) :])
        await self.channels.close(uri)

    async def _remove_client(self, session_id: str, client_id: str) -> None:
        try:
            session = await self.registry.open(session_id)
            await session.remove_client(client_id)
        except (AgentHostError, RpcError, TimeoutError):
            log.info("client_removal_skipped", session_id=session_id)

    # -- what the chat channels see -----------------------------------------------------
    def _observe(self, session_id: str, event: ChatEvent) -> None:
        """Count what /metrics reports; tell owners when a session's summary changed."""
        if isinstance(event, (TurnStarted, RequestOpened, RequestClosed, *TERMINAL_EVENTS)):
            self.summaries.may_have_changed(session_id)
        if isinstance(event, TERMINAL_EVENTS):
            self.metrics.turn_ended(_OUTCOMES.get(type(event), "error"))
        elif isinstance(event, SteeringWithdrawnEvent):
            self.metrics.steering_withdrawn += 1
        elif isinstance(event, SteeringNotWithdrawn):
            self.metrics.steering_not_withdrawn += 1

    def tables(self) -> dict[str, int]:
        """How many entries each of the server's tables holds (/metrics shows
        them): the per-session ones hold resident sessions only, the
        per-connection ones open connections only."""
        registry = attrs.asdict(self.registry.sizes())
        clients = attrs.asdict(self.clients.sizes())
        sent, checking = self.summaries.sizes()
        return {
            **{f"registry_{k}": v for k, v in registry.items()},
            **{f"clients_{k}": v for k, v in clients.items()},
            "summaries_sent": sent,
            "summary_checks": checking,
            "listened_channels": len(self.listeners),
            "chat_channels": len(self.channels),
            "idle_chat_channels": self.channels.idle_count,
            "recorded_channels": self.sequencer.recording,
            "connections": len(self.connections),
            "remembered_windows": len(self.remembered_windows),
            "background_tasks": len(self._background),
        }

    # -- turns and draining --------------------------------------------------------------
    def watch_turn(self, handle: Awaitable[Any], started: float) -> None:
        """Count a client's running turn (for draining) and its latency (for /metrics)."""
        self.running_turns += 1
        self._idle.clear()

        async def watch() -> None:
            try:
                await handle
                self.metrics.turn_took(time.monotonic() - started)
            finally:
                self.running_turns -= 1
                if self.running_turns == 0:
                    self._idle.set()

        self.spawn(watch())

    async def drained(self, deadline_s: float) -> bool:
        """Wait (up to the deadline) until no turn a client started is running."""
        try:
            await asyncio.wait_for(self._idle.wait(), deadline_s)
        except TimeoutError:
            log.warning("drain_deadline_passed", running_turns=self.running_turns)
            return False
        return True

    async def close_connections(self) -> None:
        """Close every connection (what each has queued is sent first) and wait
        for them, a bounded time."""
        connections = list(self.connections)
        for connection in connections:
            connection.close(1001, "the server is stopping")
        await asyncio.gather(*(c.finished(CLOSE_WAIT_S) for c in connections))

    async def shutdown(self) -> None:
        self._unwatch()
        self.heap.close()
        await self.close_connections()
        self.clients.close()
        for task in list(self._background):
            task.cancel()
        await self.channels.close_all()
