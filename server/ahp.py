"""The AHP server: JSON-RPC 2.0 over WebSocket at /ahp (aiohttp).

One `AhpServer` serves one Host. Each WebSocket is a `Connection`: it
authenticates in the upgrade request (a bearer token mapped to an
identity), answers `ping` at any time, negotiates the protocol version in
`initialize`, and then serves the AHP requests and `dispatchAction`. Blocking
surface calls are the asyncio surface's (agenthost.actors.aio); nothing blocks the event loop.

Rules kept here:
- a session is visible only to the identity that created it: anyone else is
  told "not found", never its contents;
- an accepted client action drives its side effect, and the host's event for
  it goes out with the client's origin; an invalid one is echoed with a
  rejectionReason and changes nothing; actions for unknown channels are ignored;
- removing steering the provider already holds is accepted only once the
  provider withdrew it (DESIGN.md rule 1), else echoed with a rejectionReason;
- a subscriber too slow to keep up is cut off, never blocking the host;
- tokens and prompt text are never logged.
"""

import asyncio
import bisect
import contextlib
import itertools
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs
import structlog
from aiohttp import WSMsgType, web

from agenthost.actors.aio import AsyncChat, AsyncHost, AsyncSession
from agenthost.actors.chosen_ids import queued_turn
from agenthost.actors.clock import TimerHandle
from agenthost.actors.surface import Host
from agenthost.messages.commands import OutcomeState
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    TERMINAL_EVENTS,
    ChatEvent,
    RequestClosed,
    RequestOpened,
    SteeringNotWithdrawn,
    TurnStarted,
)
from agenthost.messages.events import SteeringWithdrawn as SteeringWithdrawnEvent
from agenthost.messages.sizes import value_bytes
from agenthost.messages.state import PendingKind, SessionSummary, Turn
from agenthost.messages.wire import to_wire
from agenthost.server.channels import (
    CHAT_PREFIX,
    ROOT,
    SESSION_PREFIX,
    ChatChannel,
    Sequencer,
    chat_uri,
    session_uri,
)
from agenthost.server.web_routes import add_web_routes

log = structlog.get_logger(__name__)

SUPPORTED_VERSIONS = ("1.1.0", "1.0.0", "0.9.0")
OWNER_KEY = "ahp.owner"

# JSON-RPC and AHP error codes
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
SERVER_ERROR = -32000
NOT_FOUND = -32004
UNSUPPORTED_VERSION = -32005
NOT_INITIALIZED = -32002
RATE_LIMITED = -32029


@attrs.frozen(kw_only=True)
class Limits:
    """Bounds on what one connection may cost the server."""

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


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def _from_host_error(error: AgentHostError) -> RpcError:
    code = {
        ErrorCode.NOT_FOUND: NOT_FOUND,
        ErrorCode.INVALID_ARGUMENT: INVALID_PARAMS,
    }.get(error.code, SERVER_ERROR)
    return RpcError(code, error.message, {"errorType": error.code.value})


def _depth(value: Any, limit: int) -> bool:
    """Whether `value` nests no deeper than `limit` (iteratively: no recursion limit)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return True


T = TypeVar("T")


def _field(params: Mapping[str, Any], name: str, kind: type[T], required: bool = True) -> T:
    value = params.get(name)
    if value is None and not required:
        return value  # type: ignore[return-value]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise RpcError(INVALID_PARAMS, f"invalid params: {name!r} must be a {kind.__name__}")
    return value


def negotiate(offered: list[Any]) -> str | None:
    """The first offered version within a caret range of one we support."""
    for version in offered:
        if not isinstance(version, str):
            continue
        parts = version.split(".")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            continue
        major, minor, _ = (int(p) for p in parts)
        for supported in SUPPORTED_VERSIONS:
            s_major, s_minor, _ = (int(p) for p in supported.split("."))
            same_range = major == s_major and (major > 0 or minor == s_minor)
            if same_range and (major, minor) >= (s_major, s_minor):
                return version if version in SUPPORTED_VERSIONS else supported
    return None


LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)  # seconds


@attrs.define
class Metrics:
    """What /metrics reports (Prometheus text)."""

    turns: dict[str, int] = attrs.field(factory=dict)
    rejected_actions: int = 0
    steering_withdrawn: int = 0
    steering_not_withdrawn: int = 0
    connections: int = 0
    # The turn latency histogram: counts per bucket (not every latency: the
    # server runs for months), their sum and count.
    latency_buckets: list[int] = attrs.field(factory=lambda: [0] * len(LATENCY_BUCKETS))
    latency_sum: float = 0.0
    latency_count: int = 0

    def turn_took(self, seconds: float) -> None:
        self.latency_sum += seconds
        self.latency_count += 1
        index = bisect.bisect_left(LATENCY_BUCKETS, seconds)
        if index < len(LATENCY_BUCKETS):
            self.latency_buckets[index] += 1

    def render(self, counters: Mapping[str, int], chat_channels: int) -> str:
        lines = [
            "# TYPE agenthost_live_sessions gauge",
            f"agenthost_live_sessions {counters.get('resident', 0)}",
            "# TYPE agenthost_connections gauge",
            f"agenthost_connections {self.connections}",
            "# TYPE agenthost_chat_channels gauge",
            f"agenthost_chat_channels {chat_channels}",
            "# TYPE agenthost_turns_total counter",
        ]
        lines += [
            f'agenthost_turns_total{{outcome="{k}"}} {v}' for k, v in sorted(self.turns.items())
        ]
        lines += [
            "# TYPE agenthost_rejected_actions_total counter",
            f"agenthost_rejected_actions_total {self.rejected_actions}",
            "# TYPE agenthost_steering_withdrawn_total counter",
            f"agenthost_steering_withdrawn_total {self.steering_withdrawn}",
            "# TYPE agenthost_steering_not_withdrawn_total counter",
            f"agenthost_steering_not_withdrawn_total {self.steering_not_withdrawn}",
            "# TYPE agenthost_provider_restarts_total counter",
            f"agenthost_provider_restarts_total {counters.get('restarts', 0)}",
            "# TYPE agenthost_gc_disposals_total counter",
            f"agenthost_gc_disposals_total {counters.get('draft_gc_disposed', 0)}",
            "# TYPE agenthost_turn_latency_seconds histogram",
        ]
        cumulative = itertools.accumulate(self.latency_buckets)
        for bound, count in zip(LATENCY_BUCKETS, cumulative, strict=True):
            lines.append(f'agenthost_turn_latency_seconds_bucket{{le="{bound}"}} {count}')
        lines += [
            f'agenthost_turn_latency_seconds_bucket{{le="+Inf"}} {self.latency_count}',
            f"agenthost_turn_latency_seconds_sum {self.latency_sum:.6f}",
            f"agenthost_turn_latency_seconds_count {self.latency_count}",
        ]
        return "\n".join(lines) + "\n"


class AhpServer:
    """Serves one Host over AHP. `tokens` maps a bearer token to an identity."""

    def __init__(
        self,
        host: Host,
        tokens: Mapping[str, str],
        *,
        limits: Limits | None = None,
        origins: tuple[str, ...] = (),
        static_dir: str | None = None,
    ) -> None:
        self.host: AsyncHost = host if isinstance(host, AsyncHost) else host.aio
        self.tokens = dict(tokens)
        self.limits = limits or Limits()
        self.origins = origins
        self.static_dir = static_dir
        self.sequencer = Sequencer(self.limits.replay, self.limits.replay_bytes)
        self.metrics = Metrics()
        self.connections: set[Connection] = set()
        # channel -> the connections subscribed to it (the root's: per identity)
        self._listeners: dict[str, set[Connection]] = {}
        self._channels: dict[str, ChatChannel] = {}
        self._idle_channels: dict[str, TimerHandle] = {}  # chat channel -> its close
        self._chat_sessions: dict[str, str] = {}  # chat id -> session id
        self._owners: dict[str, str] = {}  # session id -> identity
        # sessions disposed so far, and the ids of the latest (a lookup that a
        # dispose of its session overtook reads again)
        self._disposals = 0
        self._disposed: deque[str] = deque(maxlen=1024)
        self._client_ids: dict[str, str] = {}  # client id -> identity
        self._grace: dict[str, asyncio.TimerHandle] = {}  # client id -> pending removal
        self._client_sessions: dict[str, set[str]] = {}  # client id -> sessions it acted in
        self._summaries: dict[str, dict[str, Any]] = {}  # session id -> last summary sent
        self._handles: dict[str, AsyncSession] = {}  # session id -> its handle
        self._checking: dict[str, _SummaryCheck] = {}  # session id -> its check in flight
        self._background: set[asyncio.Task[None]] = set()
        self.accepting = True
        self.running_turns = 0
        self._idle = asyncio.Event()
        self._idle.set()

    # -- the aiohttp app ---------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.limits.frame_bytes)
        app.router.add_get("/ahp", self._websocket)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/metrics", self._metrics)
        if self.static_dir is not None:
            app.router.add_get("/", self._index)
            app.router.add_static("/static/", self.static_dir)
            add_web_routes(app, self.static_dir, self.tokens)
        app.on_shutdown.append(self._shutdown)
        return app

    async def _index(self, request: web.Request) -> web.StreamResponse:
        assert self.static_dir is not None
        return web.FileResponse(f"{self.static_dir}/index.html")

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "accepting": self.accepting})

    async def _metrics(self, request: web.Request) -> web.Response:
        counters = await self.host.counters()
        text = self.metrics.render(counters, chat_channels=len(self._channels))
        tasks = len(asyncio.all_tasks())  # the server loop's: what a long run watches grow
        text += f"# TYPE agenthost_asyncio_tasks gauge\nagenthost_asyncio_tasks {tasks}\n"
        return web.Response(text=text, content_type="text/plain")

    def _identity(self, request: web.Request) -> str | None:
        header = request.headers.get("Authorization", "")
        token = header[7:] if header.startswith("Bearer ") else request.query.get("token", "")
        return self.tokens.get(token) if token else None

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        if not self.accepting:
            raise web.HTTPServiceUnavailable(text="the server is stopping")
        origin = request.headers.get("Origin")
        if origin is not None and origin not in self._allowed_origins(request):
            raise web.HTTPForbidden(text="origin not allowed")
        identity = self._identity(request)
        if identity is None:
            raise web.HTTPUnauthorized(
                text="a bearer token is required", headers={"WWW-Authenticate": "Bearer"}
            )
        ws = web.WebSocketResponse(max_msg_size=self.limits.frame_bytes, heartbeat=30.0)
        await ws.prepare(request)
        connection = Connection(self, ws, identity)
        self.connections.add(connection)
        self.metrics.connections = len(self.connections)
        try:
            await connection.run()
        finally:
            self.connections.discard(connection)
            self.metrics.connections = len(self.connections)
            connection.detach()
        return ws

    def _allowed_origins(self, request: web.Request) -> tuple[str, ...]:
        own = f"{request.scheme}://{request.host}"
        return (own, *self.origins)

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

        task = asyncio.get_running_loop().create_task(watch())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drained(self, deadline_s: float) -> bool:
        """Wait (up to the deadline) until no turn a client started is running."""
        try:
            await asyncio.wait_for(self._idle.wait(), deadline_s)
        except TimeoutError:
            log.warning("drain_deadline_passed", running_turns=self.running_turns)
            return False
        return True

    async def close_connections(self) -> None:
        for connection in list(self.connections):
            await connection.ws.close(code=1001, message=b"the server is stopping")

    async def _shutdown(self, app: web.Application) -> None:
        await self.close_connections()
        for task in list(self._background):
            task.cancel()
        for idle in self._idle_channels.values():
            idle.cancel()
        for channel in list(self._channels.values()):
            await channel.close()

    # -- helpers the connections share ---------------------------------------------------
    async def session(self, session_id: str, identity: str) -> AsyncSession:
        """The session, if `identity` owns it; otherwise "not found". The owner
        comes from the store, so nobody else's lookup loads the session. Handles
        are kept (one released from memory is restored on its next call), so
        a dispatch never reloads its session from the store."""
        if session_id not in self._owners:
            await self._find(session_id=session_id)
        if self._owners.get(session_id) != identity:
            raise RpcError(NOT_FOUND, f"session {session_id} not found")
        return await self._open(session_id)

    async def _find(
        self, session_id: str | None = None, chat_id: str | None = None
    ) -> SessionSummary | None:
        """The stored session (`session_id=` or `chat_id=`), its owner noted. If
        that session was disposed meanwhile (its id may be free or another's by
        now), it reads again. A session with no owner yet is not noted: the
        host may give it one later."""
        while True:
            disposals = self._disposals
            found = await self.host.find_session(session_id, chat_id=chat_id)
            if found is None or not self._disposed_since(disposals, found.id):
                break
        owner = None if found is None else dict(found.config).get(OWNER_KEY)
        if found is not None and owner:  # what a creator wrote meanwhile wins over this read
            self._owners.setdefault(found.id, owner)
        return found

    def _disposed_since(self, count: int, session_id: str) -> bool:
        """Whether `session_id` may be among the sessions disposed after the first `count`."""
        recent = self._disposals - count
        if recent > len(self._disposed):
            return True  # more than the record holds: assume so
        return recent > 0 and session_id in itertools.islice(reversed(self._disposed), recent)

    async def _open(self, session_id: str) -> AsyncSession:
        handle = self._handles.get(session_id)
        if handle is None:
            try:
                handle = await self.host.open_session(session_id)
            except AgentHostError as error:
                raise RpcError(NOT_FOUND, f"session {session_id} not found") from error
            self._handles[session_id] = handle
        return handle

    async def forget_session(self, session_id: str) -> None:
        """The session was disposed: nothing of it stays here, not even its
        subscribers (anyone may create a session with its id again)."""
        self._disposals += 1
        self._disposed.append(session_id)
        self._owners.pop(session_id, None)
        self._handles.pop(session_id, None)
        self._summaries.pop(session_id, None)
        self._checking.pop(session_id, None)  # a check in flight sends nothing now
        chats = [c for c, s in self._chat_sessions.items() if s == session_id]
        for uri in (session_uri(session_id), *map(chat_uri, chats)):
            await self.close_channel(uri)

    async def close_channel(self, uri: str) -> None:
        """A disposed session's or chat's channel: every subscriber leaves it."""
        for connection in tuple(self._listeners.get(uri, ())):
            connection.leave(uri)
        idle = self._idle_channels.pop(uri, None)
        if idle is not None:
            idle.cancel()
        if uri.startswith(CHAT_PREFIX):
            self._chat_sessions.pop(uri[len(CHAT_PREFIX) :], None)
        channel = self._channels.pop(uri, None)
        if channel is not None:
            await channel.close()

    async def chat(self, chat_id: str, identity: str) -> tuple[AsyncSession, AsyncChat]:
        """The chat and its session, if `identity` owns it; otherwise "not found".
        A chat the server has not seen yet is looked up in the store: only its
        own session is loaded."""
        session_id = self._chat_sessions.get(chat_id)
        if session_id is None:
            found = await self._find(chat_id=chat_id)
            if found is None:
                raise RpcError(NOT_FOUND, f"chat {chat_id} not found")
            session_id = found.id
        try:
            session = await self.session(session_id, identity)
        except RpcError as error:
            raise RpcError(NOT_FOUND, f"chat {chat_id} not found") from error
        self._chat_sessions[chat_id] = session_id
        return session, await session.chat(chat_id)

    async def channel(self, chat: AsyncChat) -> ChatChannel:
        uri = chat_uri(chat.id)
        while (channel := self._channels.get(uri)) is not None:
            if await channel.opened():
                return channel
            if self._channels.get(uri) is channel:  # its opener failed: open afresh
                del self._channels[uri]
        session_id = chat.session.id
        channel = ChatChannel(
            uri,
            session_id,
            self.sequencer,
            lambda: int(time.time() * 1000),
            lambda event: self._observe(session_id, event),
        )
        self._channels[uri] = channel
        try:
            subscription = await chat.subscribe(
                maxsize=1_000_000, max_bytes=self.limits.channel_bytes, keep_state=True
            )
        except BaseException:
            channel.abandon()
            raise
        await channel.open(subscription)
        return channel

    def followed_or_closing(self, channel: ChatChannel) -> ChatChannel:
        """A channel a dispatch uses, and nobody follows, closes like one its
        last subscriber left."""
        if not channel.subscribers:
            self.channel_unfollowed(channel.uri)
        return channel

    def channel_unfollowed(self, uri: str) -> None:
        """Nobody follows the chat channel: close it after a grace (on the
        host's clock), unless someone follows it by then."""
        if uri in self._idle_channels:
            return
        loop = asyncio.get_running_loop()

        def close() -> None:
            self._idle_channels.pop(uri, None)
            channel = self._channels.get(uri)
            if channel is None or channel.subscribers:
                return
            del self._channels[uri]
            task = loop.create_task(channel.close())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

        def due() -> None:  # on the clock's thread
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(close)

        clock = self.host.services.clock
        self._idle_channels[uri] = clock.call_later(self.limits.channel_idle_s, due)

    def _observe(self, session_id: str, event: ChatEvent) -> None:
        """Count what /metrics reports; tell owners when a session's summary changed."""
        if isinstance(event, (TurnStarted, RequestOpened, RequestClosed, *TERMINAL_EVENTS)):
            self.summary_may_have_changed(session_id)
        if isinstance(event, TERMINAL_EVENTS):
            outcome = {"TurnCompleted": "complete", "TurnCancelled": "cancelled"}
            key = outcome.get(type(event).__name__, "error")
            self.metrics.turns[key] = self.metrics.turns.get(key, 0) + 1
        elif isinstance(event, SteeringWithdrawnEvent):
            self.metrics.steering_withdrawn += 1
        elif isinstance(event, SteeringNotWithdrawn):
            self.metrics.steering_not_withdrawn += 1

    def summary_may_have_changed(self, session_id: str) -> None:
        """Send root/sessionSummaryChanged to the owner's connections if it did.

        One check per session at a time; a change meanwhile runs one more
        check after it, so the last summary sent is never an older one. With
        none of the owner's connections on the root there is nothing to check:
        the summary last sent is forgotten, so the next check sends what it finds."""
        owner = self._owners.get(session_id)
        if owner is None:
            return
        running = self._checking.get(session_id)
        if running is not None:
            running.again = True
            return
        if not self._listeners.get(listening_key(owner, ROOT)):
            self._summaries.pop(session_id, None)
            return
        current = self._checking[session_id] = _SummaryCheck()

        async def check() -> None:
            try:
                while True:
                    session = await self._open(session_id)
                    summary = _listed(await session.summary())
                    if self._checking.get(session_id) is not current:
                        return  # disposed meanwhile: the id may be another owner's now
                    if self._summaries.get(session_id) != summary:
                        self._summaries[session_id] = summary
                        params = {"channel": ROOT, "summary": summary}
                        self.broadcast_root(owner, "root/sessionSummaryChanged", params)
                    if not current.again:
                        return
                    current.again = False
            finally:
                if self._checking.get(session_id) is current:
                    del self._checking[session_id]

        task = asyncio.get_running_loop().create_task(check())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def claim_client(self, client_id: str, identity: str) -> bool:
        """Bind a client id to an identity; another identity may not take it."""
        bound = self._client_ids.setdefault(client_id, identity)
        timer = self._grace.pop(client_id, None)
        if timer is not None and bound == identity:
            timer.cancel()
        return bound == identity

    def client_left(self, client_id: str) -> None:
        """After a grace period, the client's parked tool calls fail (rule 6)."""
        if any(c.client_id == client_id for c in self.connections):
            return
        loop = asyncio.get_running_loop()

        def remove() -> None:
            self._grace.pop(client_id, None)
            for session_id in self._client_sessions.pop(client_id, set()):
                task = loop.create_task(self._remove_client(session_id, client_id))
                self._background.add(task)
                task.add_done_callback(self._background.discard)

        self._grace[client_id] = loop.call_later(self.limits.client_tool_grace_s, remove)

    async def _remove_client(self, session_id: str, client_id: str) -> None:
        try:
            session = await self._open(session_id)
            await session.remove_client(client_id)
        except (AgentHostError, RpcError):
            log.info("client_removal_skipped", session_id=session_id)

    def touched(self, client_id: str | None, session_id: str) -> None:
        if client_id is not None:
            self._client_sessions.setdefault(client_id, set()).add(session_id)

    def broadcast_root(self, identity: str, method: str, params: dict[str, Any]) -> None:
        """A root notification, to the identity's connections subscribed to the root."""
        for connection in tuple(self._listeners.get(listening_key(identity, ROOT), ())):
            connection.offer({"jsonrpc": "2.0", "method": method, "params": params})

    def session_action(self, identity: str, session_id: str, action: Any, origin: Any) -> None:
        """A session channel's accepted action, sequenced and sent to its subscribers."""
        uri = session_uri(session_id)
        envelope = self.sequencer.stamp(uri, to_wire(action), origin)
        for connection in tuple(self._listeners.get(uri, ())):
            connection.offer({"jsonrpc": "2.0", "method": "action", "params": envelope})


@attrs.define
class _SummaryCheck:
    """A session's summary check in flight; `again`: it may have changed since."""

    again: bool = False


def listening_key(identity: str, uri: str) -> str:
    """Whose subscriptions a channel's broadcasts reach: the root's are per identity."""
    return f"{ROOT} {identity}" if uri == ROOT else uri


class Connection:
    """One client's WebSocket."""

    def __init__(self, server: AhpServer, ws: web.WebSocketResponse, identity: str) -> None:
        self.server = server
        self.ws = ws
        self.identity = identity
        self.limits = server.limits
        self.client_id: str | None = None
        self.version: str | None = None
        self.channels: set[str] = set()
        # Frames to send, as text: bounded in count and in bytes (`_out_bytes`).
        self._out: asyncio.Queue[str | None] = asyncio.Queue(self.limits.outbox)
        self._out_bytes = 0
        # A client's actions take effect in the order it sent them.
        self._dispatches: asyncio.Queue[dict[str, Any]] = asyncio.Queue(self.limits.outbox)
        self._tokens = float(self.limits.burst)
        self._refilled = time.monotonic()
        self._cut = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._log = log.bind(identity=identity)

    @property
    def initialized(self) -> bool:
        return self.version is not None

    @property
    def legacy_steering(self) -> bool:
        """A peer of protocol < 1.1 knows one steering slot, not the list."""
        return self.version is not None and tuple(map(int, self.version.split("."))) < (1, 1, 0)

    # -- output ------------------------------------------------------------------------
    def offer(self, message: dict[str, Any]) -> None:
        """Queue a message; a client too slow to take it is cut off (past
        `Limits.outbox` messages or `outbox_bytes` bytes queued; a message alone
        is always queued, however large)."""
        if self._cut:
            return
        text = json.dumps(message)
        try:
            if self._out_bytes and self._out_bytes + len(text) > self.limits.outbox_bytes:
                raise asyncio.QueueFull
            self._out.put_nowait(text)
            self._out_bytes += len(text)
        except asyncio.QueueFull:
            self._cut = True
            self._log.warning(
                "slow_client_cut_off", queued=self._out.qsize(), queued_bytes=self._out_bytes
            )
            closing = asyncio.get_running_loop().create_task(
                self.ws.close(code=1008, message=b"too slow")
            )
            self._tasks.add(closing)

    async def _flush(self, last: dict[str, Any]) -> None:
        """Send what is queued, then `last`, before the socket closes."""
        while not self._out.empty():
            queued = self._out.get_nowait()
            if queued is not None:
                await self.ws.send_str(queued)
        await self.ws.send_str(json.dumps(last))

    async def _writer(self) -> None:
        while (text := await self._out.get()) is not None:
            await self.ws.send_str(text)
            self._out_bytes -= len(text)

    # -- input -------------------------------------------------------------------------
    async def _dispatcher(self) -> None:
        while True:
            await self._dispatch(await self._dispatches.get())

    async def run(self) -> None:
        writer = asyncio.get_running_loop().create_task(self._writer())
        self._tasks.add(asyncio.get_running_loop().create_task(self._dispatcher()))
        try:
            async for frame in self.ws:
                if frame.type is WSMsgType.TEXT:
                    await self._receive(frame.data)
                elif frame.type is WSMsgType.BINARY:
                    self.offer(_error(None, RpcError(INVALID_REQUEST, "frames are JSON text")))
        finally:
            writer.cancel()
            for task in self._tasks:
                task.cancel()

    def join(self, uri: str) -> None:
        """Subscribe this connection to a channel."""
        self.channels.add(uri)
        self.server._listeners.setdefault(listening_key(self.identity, uri), set()).add(self)

    def leave(self, uri: str) -> None:
        """Unsubscribe this connection from a channel."""
        self.channels.discard(uri)
        key = listening_key(self.identity, uri)
        listeners = self.server._listeners.get(key)
        if listeners is not None:
            listeners.discard(self)
            if not listeners:
                del self.server._listeners[key]
        channel = self.server._channels.get(uri)
        if channel is not None and self in channel.subscribers:
            channel.subscribers.discard(self)
            if not channel.subscribers:
                self.server.channel_unfollowed(uri)

    def detach(self) -> None:
        for uri in list(self.channels):
            self.leave(uri)
        if self.client_id is not None:
            self.server.client_left(self.client_id)

    def _allow(self) -> bool:
        now = time.monotonic()
        self._tokens = min(
            float(self.limits.burst), self._tokens + (now - self._refilled) * self.limits.rate
        )
        self._refilled = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    async def _receive(self, text: str) -> None:
        try:
            message = json.loads(text)
        except ValueError:
            self.offer(_error(None, RpcError(PARSE_ERROR, "parse error: not JSON")))
            return
        if not _depth(message, self.limits.json_depth):
            self.offer(_error(None, RpcError(INVALID_REQUEST, "JSON nested too deep")))
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self.offer(_error(None, RpcError(INVALID_REQUEST, "not a JSON-RPC 2.0 message")))
            return
        request_id = message.get("id")
        method = message.get("method")
        if not isinstance(method, str):
            if request_id is not None:
                self.offer(_error(request_id, RpcError(INVALID_REQUEST, "no method")))
            return
        if not self._allow():
            if request_id is not None:
                self.offer(_error(request_id, RpcError(RATE_LIMITED, "rate limit exceeded")))
            return
        params = message.get("params", {})
        if not isinstance(params, dict):
            self.offer(
                _error(request_id, RpcError(INVALID_PARAMS, "invalid params: not an object"))
            )
            return
        if request_id is None:
            await self._notification(method, params)
            return
        task = asyncio.get_running_loop().create_task(self._request(request_id, method, params))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _request(self, request_id: Any, method: str, params: dict[str, Any]) -> None:
        handler = REQUESTS.get(method)
        try:
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, f"method not found: {method}")
            if method not in ("ping", "initialize", "reconnect") and not self.initialized:
                raise RpcError(NOT_INITIALIZED, "initialize first")
            result = await handler(self, params)
        except RpcError as error:
            if error.code == UNSUPPORTED_VERSION:  # answer, then close
                await self._flush(_error(request_id, error))
                await self.ws.close(code=1002, message=b"unsupported protocol version")
                return
            self.offer(_error(request_id, error))
            return
        except AgentHostError as error:
            self.offer(_error(request_id, _from_host_error(error)))
            return
        except TimeoutError:  # the host is busy: an answer, not a traceback a request
            self._log.warning("request_timed_out", method=method)
            busy = RpcError(SERVER_ERROR, "the host did not answer in time")
            self.offer(_error(request_id, busy))
            return
        except Exception:
            self._log.exception("request_failed", method=method)
            self.offer(_error(request_id, RpcError(SERVER_ERROR, "internal error")))
            return
        self.offer({"jsonrpc": "2.0", "id": request_id, "result": result})

    async def _notification(self, method: str, params: dict[str, Any]) -> None:
        if not self.initialized:
            return
        if method == "unsubscribe":
            uri = params.get("channel")
            if isinstance(uri, str) and uri in self.channels:
                self.leave(uri)
        elif method == "dispatchAction":
            try:
                self._dispatches.put_nowait(params)
            except asyncio.QueueFull:
                action = params.get("action")
                self._reject(str(params.get("channel")), action, None, "too many actions queued")

    # -- requests ----------------------------------------------------------------------
    async def _ping(self, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        offered = params.get("protocolVersions") or [params.get("protocolVersion")]
        if not isinstance(offered, list):
            raise RpcError(INVALID_PARAMS, "invalid params: 'protocolVersions' must be a list")
        version = negotiate(offered)
        if version is None:
            raise RpcError(
                UNSUPPORTED_VERSION,
                "unsupported protocol version",
                {"supportedVersions": list(SUPPORTED_VERSIONS)},
            )
        client_id = _field(params, "clientId", str)
        if not self.server.claim_client(client_id, self.identity):
            raise RpcError(INVALID_PARAMS, "invalid params: 'clientId' belongs to another identity")
        self.client_id = client_id
        self.version = version
        snapshots = []
        for uri in params.get("initialSubscriptions") or []:
            if isinstance(uri, str):
                snapshots.append(await self._subscribe_to(uri))
        return {
            "protocolVersion": version,
            "serverSeq": self.server.sequencer.seq,
            "snapshots": snapshots,
            "serverInfo": {"name": "agenthost"},
        }

    async def _subscribe(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"snapshot": await self._subscribe_to(_field(params, "channel", str))}

    async def _subscribe_to(self, uri: str) -> dict[str, Any]:
        if uri not in self.channels and len(self.channels) >= self.limits.subscriptions:
            raise RpcError(INVALID_PARAMS, "too many subscriptions on this connection")
        if uri == ROOT:
            self.join(uri)
            providers = sorted(self.server.host.services.providers)
            agents = [{"provider": p, "displayName": p, "models": []} for p in providers]
            return {
                "resource": ROOT,
                "state": {"agents": agents},
                "fromSeq": self.server.sequencer.seq,
            }
        if uri.startswith(SESSION_PREFIX):
            session = await self.server.session(uri[len(SESSION_PREFIX) :], self.identity)
            self.join(uri)
            state = await self._session_state(session)
            return {"resource": uri, "state": state, "fromSeq": self.server.sequencer.seq}
        if uri.startswith(CHAT_PREFIX):
            _, chat = await self.server.chat(uri[len(CHAT_PREFIX) :], self.identity)
            channel = await self.server.channel(chat)
            self.join(uri)
            channel.subscribers.add(self)
            return channel.snapshot(legacy_steering=self.legacy_steering)
        raise RpcError(NOT_FOUND, f"unknown channel {uri}")

    async def _session_state(self, session: AsyncSession) -> dict[str, Any]:
        summary = await session.summary()
        chats = await session.chats()
        for chat in chats:
            self.server._chat_sessions[chat.id] = session.id
        config = {k: v for k, v in summary.config if not k.startswith("ahp.")}
        status = _status(summary)
        return {
            "provider": summary.provider,
            "title": summary.title,
            "status": status,
            "lifecycle": "ready",
            "chats": [{"resource": chat_uri(c.id)} for c in chats],
            "defaultChat": chat_uri(chats[0].id) if chats else None,
            "inputNeeded": summary.input_needed,
            "config": config,
        }

    async def _create_session(self, params: dict[str, Any]) -> dict[str, Any]:
        uri = _field(params, "channel", str)
        if not uri.startswith(SESSION_PREFIX) or len(uri) == len(SESSION_PREFIX):
            raise RpcError(INVALID_PARAMS, "invalid params: 'channel' must be ahp-session:/<id>")
        session_id = uri[len(SESSION_PREFIX) :]
        provider = _field(params, "provider", str, required=False) or _default_provider(self)
        if session_id in self.server._owners:
            raise RpcError(INVALID_PARAMS, f"invalid params: session {session_id} exists")
        # The creator follows the session's lifecycle: creating -> ready, or creationFailed.
        self.join(uri)
        try:
            session = await self.server.host.create_session(provider, session_id=session_id)
        except AgentHostError as error:
            failed = {"type": "session/creationFailed", "error": to_wire(error)}
            self.server.session_action(self.identity, session_id, failed, None)
            self.leave(uri)
            raise
        await session.set_config({OWNER_KEY: self.identity})
        self.server._owners[session_id] = self.identity
        self.server._handles[session_id] = session
        self.server.session_action(self.identity, session_id, {"type": "session/ready"}, None)
        state = await self._session_state(session)
        self.server.broadcast_root(
            self.identity, "root/sessionAdded", {"channel": ROOT, "summary": _summary(uri, state)}
        )
        return {"resource": uri, "state": state}

    async def _dispose_session(self, params: dict[str, Any]) -> dict[str, Any]:
        uri = _field(params, "channel", str)
        session = await self.server.session(uri.removeprefix(SESSION_PREFIX), self.identity)
        await session.dispose()
        await self.server.forget_session(session.id)
        self.server.broadcast_root(
            self.identity, "root/sessionRemoved", {"channel": ROOT, "resource": uri}
        )
        return {}

    async def _create_chat(self, params: dict[str, Any]) -> dict[str, Any]:
        uri = _field(params, "channel", str)
        session = await self.server.session(uri.removeprefix(SESSION_PREFIX), self.identity)
        chat = await session.create_chat()
        self.server._chat_sessions[chat.id] = session.id
        return {"resource": chat_uri(chat.id)}

    async def _dispose_chat(self, params: dict[str, Any]) -> dict[str, Any]:
        uri = _field(params, "channel", str)
        session, chat = await self.server.chat(uri.removeprefix(CHAT_PREFIX), self.identity)
        await session.dispose_chat(chat.id)
        await self.server.close_channel(uri)
        return {}

    async def _list_sessions(self, params: dict[str, Any]) -> dict[str, Any]:
        cursor = _cursor(params)
        limit = _limit(params, self.limits.page)
        mine = [
            s
            for s in await self.server.host.list_sessions()
            if dict(s.config).get(OWNER_KEY) == self.identity
        ]
        page = mine[cursor : cursor + limit]
        items = [_listed(s) for s in page]
        result: dict[str, Any] = {"items": items}
        if cursor + limit < len(mine):
            result["nextCursor"] = str(cursor + limit)
        return result

    async def _fetch_turns(self, params: dict[str, Any]) -> dict[str, Any]:
        uri = _field(params, "channel", str)
        _, chat = await self.server.chat(uri.removeprefix(CHAT_PREFIX), self.identity)
        turns = (await chat.state()).turns
        cursor = _cursor(params)
        page = bytes_page(turns[cursor : cursor + _limit(params, self.limits.page)], self.limits)
        result: dict[str, Any] = {"turns": [to_wire(t) for t in page]}
        if cursor + len(page) < len(turns):
            result["nextCursor"] = str(cursor + len(page))
        return result

    async def _reconnect(self, params: dict[str, Any]) -> dict[str, Any]:
        client_id = _field(params, "clientId", str)
        last_seen = _field(params, "lastSeenServerSeq", int)
        wanted = [c for c in params.get("subscriptions") or [] if isinstance(c, str)]
        if not self.server.claim_client(client_id, self.identity):
            raise RpcError(INVALID_PARAMS, "invalid params: 'clientId' belongs to another identity")
        self.client_id = client_id
        self.version = self.version or SUPPORTED_VERSIONS[0]
        snapshots: list[dict[str, Any]] = []
        missing: list[str] = []
        for uri in wanted:
            try:
                snapshots.append(await self._subscribe_to(uri))
            except RpcError:
                missing.append(uri)
        replay = self.server.sequencer.since(last_seen, set(self.channels))
        if replay is None:
            return {"type": "snapshot", "snapshots": snapshots, "missing": missing}
        return {"type": "replay", "actions": replay, "missing": missing}

    # -- dispatchAction ------------------------------------------------------------------
    async def _dispatch(self, params: dict[str, Any]) -> None:
        uri = params.get("channel")
        action = params.get("action")
        client_seq = params.get("clientSeq")
        if not isinstance(uri, str) or not isinstance(action, dict):
            return
        origin = {"clientId": self.client_id, "clientSeq": client_seq}
        try:
            if uri.startswith(CHAT_PREFIX):
                session, chat = await self.server.chat(uri[len(CHAT_PREFIX) :], self.identity)
                self.server.touched(self.client_id, session.id)
                await self._chat_action(chat, action, origin)
            elif uri.startswith(SESSION_PREFIX):
                session = await self.server.session(uri[len(SESSION_PREFIX) :], self.identity)
                await self._session_action(session, action, origin)
        except RpcError as error:
            if error.code == NOT_FOUND and "not found" in error.message:
                return  # an unknown channel: ignored, as the protocol says
            self._reject(uri, action, origin, error.message)
        except AgentHostError as error:
            self._reject(uri, action, origin, error.message)
        except TimeoutError:
            self._reject(uri, action, origin, "the host did not answer in time (it may still act)")
        except Exception:  # the dispatcher must outlive any one action
            self._log.exception("dispatch_failed", action_type=action.get("type"))
            self._reject(uri, action, origin, "internal error")

    def _reject(self, uri: str, action: Any, origin: Any, reason: str) -> None:
        self.server.metrics.rejected_actions += 1
        envelope = {"channel": uri, "action": action, "origin": origin, "rejectionReason": reason}
        self.offer({"jsonrpc": "2.0", "method": "action", "params": envelope})

    async def _chat_action(self, chat: AsyncChat, action: dict[str, Any], origin: Any) -> None:
        channel = self.server.followed_or_closing(await self.server.channel(chat))
        kind = action.get("type")
        if kind == "chat/turnStarted":
            text = _text(action)
            turn_id = _field(action, "turnId", str)
            started = time.monotonic()
            with channel.expecting(("turn", turn_id), origin):
                handle = await chat.send(text, client_id=self.client_id, turn_id=turn_id)
            if handle.done():  # settled without a turn: refused, or a local command
                channel.forget(("turn", turn_id), origin)
                outcome = handle.result(timeout=0)
                if outcome.state is OutcomeState.REJECTED and outcome.error is not None:
                    raise outcome.error
                return
            self.server.watch_turn(handle, started)
        elif kind == "chat/turnCancelled":  # a queued turn is removed; else refused saying why
            turn_id = _field(action, "turnId", str)
            queued = queued_turn(await chat.state(), turn_id)
            with channel.expecting(
                ("cancelled", turn_id) if queued is None else ("removed", queued.id), origin
            ):
                await chat.cancel(turn_id, client_id=self.client_id)
        elif kind == "chat/pendingMessageSet":
            pending_id = _field(action, "id", str)
            text = _text(action)
            with channel.expecting(("pending", pending_id), origin):
                if action.get("kind") == PendingKind.STEERING.value:
                    await chat.steer(text, client_id=self.client_id, pending_id=pending_id)
                elif pending_id in {m.id for m in (await chat.state()).queued_messages}:
                    await chat.edit_pending(pending_id, text)
                else:
                    await chat.send(text, client_id=self.client_id, pending_id=pending_id)
        elif kind == "chat/pendingMessageRemoved":
            pending_id = _field(action, "id", str, required=False) or _field(
                action, "pendingId", str
            )
            with channel.expecting(("removed", pending_id), origin):
                removed = await chat.remove_pending(pending_id, client_id=self.client_id)
                if not removed:
                    raise RpcError(INVALID_PARAMS, "the model already had this steering message")
        elif kind == "chat/queuedMessagesReordered":
            order = _field(action, "order", list)
            with channel.expecting(("reordered",), origin):
                await chat.reorder_queue([str(i) for i in order])
        elif kind == "chat/truncated":
            with channel.expecting(("truncated",), origin):
                await chat.truncate(action.get("turnId"))
        elif kind == "chat/toolCallConfirmed":
            approved = _field(action, "approved", bool)
            await chat.answer(_field(action, "toolCallId", str), approved=approved)
        elif kind == "chat/toolCallComplete":
            result = action.get("result")
            text = result if isinstance(result, str) else json.dumps(result)
            call_id = _field(action, "toolCallId", str)
            await chat.answer(call_id, result=text, client_id=self.client_id)
        elif kind == "chat/inputCompleted":
            answer = action.get("answer")
            await chat.answer(_field(action, "requestId", str), answer=str(answer or ""))
        elif kind == "chat/draftChanged":
            draft = action.get("draft")
            await chat.set_draft(draft if isinstance(draft, str) else None)
        else:
            raise RpcError(INVALID_PARAMS, f"{kind!r} cannot be dispatched by a client")

    async def _session_action(
        self, session: AsyncSession, action: dict[str, Any], origin: Any
    ) -> None:
        kind = action.get("type")
        if kind == "session/titleChanged":
            await session.rename(_field(action, "title", str))
        elif kind == "session/isReadChanged":
            if _field(action, "isRead", bool):
                await session.mark_read()
            else:
                raise RpcError(INVALID_PARAMS, "only the host marks a session unread")
        elif kind == "session/isArchivedChanged":
            archived = _field(action, "isArchived", bool)
            await (session.archive() if archived else session.unarchive())
        elif kind == "session/configChanged":
            config = _field(action, "config", dict)
            if any(not isinstance(v, str) or k.startswith("ahp.") for k, v in config.items()):
                raise RpcError(
                    INVALID_PARAMS, "config values are strings; 'ahp.' keys are reserved"
                )
            await session.set_config(config)
        else:
            raise RpcError(INVALID_PARAMS, f"{kind!r} cannot be dispatched by a client")
        self.server.session_action(self.identity, session.id, action, origin)
        self.server.summary_may_have_changed(session.id)


def _error(request_id: Any, error: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.body()}


def _text(action: Mapping[str, Any]) -> str:
    message = action.get("message")
    text = message.get("text") if isinstance(message, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise RpcError(INVALID_PARAMS, "invalid params: 'message.text' must be a non-empty string")
    return text


def _cursor(params: Mapping[str, Any]) -> int:
    cursor = params.get("cursor") or "0"
    if not isinstance(cursor, str) or not cursor.isdigit():
        raise RpcError(INVALID_PARAMS, "invalid params: 'cursor'")
    return int(cursor)


def _limit(params: Mapping[str, Any], default: int) -> int:
    limit = params.get("limit", default)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 1000:
        raise RpcError(INVALID_PARAMS, "invalid params: 'limit' must be 1 to 1000")
    return limit


def _status(summary: SessionSummary) -> int:
    """AHP's session status bits: the chats' status, IsRead 32, IsArchived 64."""
    return int(summary.status) | (0 if summary.unread else 32) | (64 if summary.archived else 0)


def _listed(summary: SessionSummary) -> dict[str, Any]:
    """A session as listSessions and root notifications show it."""
    return {
        "resource": session_uri(summary.id),
        "provider": summary.provider,
        "title": summary.title,
        "status": _status(summary),
        "turnCount": summary.turn_count,
        "inputNeeded": summary.input_needed,
    }


def _summary(uri: str, state: Mapping[str, Any]) -> dict[str, Any]:
    return {"resource": uri, **{k: state[k] for k in ("provider", "title", "status")}}


def bytes_page(turns: Sequence[Turn], limits: Limits) -> Sequence[Turn]:
    """The first of `turns` that fit in `limits.page_bytes` (the first one always)."""
    size = 0
    for count, turn in enumerate(turns):
        size += value_bytes(turn)
        if count and size > limits.page_bytes:
            return turns[:count]
    return turns


def _default_provider(connection: Connection) -> str:
    return sorted(connection.server.host.services.providers)[0]


RequestHandler = Callable[[Connection, dict[str, Any]], Awaitable[dict[str, Any]]]
REQUESTS: dict[str, RequestHandler] = {
    "ping": Connection._ping,
    "initialize": Connection._initialize,
    "subscribe": Connection._subscribe,
    "createSession": Connection._create_session,
    "disposeSession": Connection._dispose_session,
    "createChat": Connection._create_chat,
    "disposeChat": Connection._dispose_chat,
    "listSessions": Connection._list_sessions,
    "fetchTurns": Connection._fetch_turns,
    "reconnect": Connection._reconnect,
}
