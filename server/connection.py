"""One client's WebSocket: frames in, typed requests and actions to their
handlers, frames out.

A `Connection` reads text frames with `messages.rpc.parse_frame` (no frame
is trusted: too deep, not JSON, NaN, not JSON-RPC 2.0 are answered with the
code `FrameError` names), decodes params with `rpc.decode_params` (a wrong
type for any field is -32602 naming it), and routes a request to its handler
in `server.requests.REQUESTS`, a `dispatchAction` to the ordered dispatch
queue, whose one task hands actions to `server.actions` in the order the
client sent them. What it sends goes through its `Outbox`.

Invariants (loop thread only):
1. Every request is answered exactly once, with its result or an error; a
   frame whose id cannot be read is answered with id null. What a client
   sends right behind an initialize or reconnect waits for its answer.
2. A client too slow for what it is sent is cut off (close 1008), never
   blocking the host or other clients: the outbox is bounded in frames and
   in bytes.
3. `RateLimit` bounds the messages a connection may send; past it a request
   is answered -32029 and a notification dropped.
4. Nothing a client sends can end the connection's tasks: an unexpected
   error in a handler is logged (without the request's content) and answered
   -32603.
5. One task writes to the socket (the writer, in outbox order) and one closes
   it (the reader, after the writer reached the close mark, or at once for a
   client cut off): a close never races the frames before it, and it waits
   for the client's close frame, a bounded time.
6. A windowed subscription's messages go through its `Window`
   (server/windows.py, `sink`); the writer takes window frames in turn, at
   most FEED_DEPTH of them in the outbox, yielding between them.
"""

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import structlog
from aiohttp import WSMsgType, web

from agenthost.messages import rpc, versions
from agenthost.messages.errors import AgentHostError, JsonRpcErrorCode, ValidationError
from agenthost.messages.protocol import (
    DispatchActionParams,
    JsonRpcNotification,
    JsonRpcRequest,
)
from agenthost.server import actions
from agenthost.server.errors import HOST_LATE, RpcError, from_host_error, invalid_params
from agenthost.server.requests import NOTIFICATIONS, REQUESTS
from agenthost.server.windows import Window, frame_text

if TYPE_CHECKING:
    from agenthost.server.ahp import AhpServer, Limits

log = structlog.get_logger(__name__)

HANDSHAKES = frozenset({"initialize", "reconnect"})
FEED_DEPTH = 4  # window frames queued in the outbox at most, taken in turn (server/windows.py)
CLOSE_WAIT_S = 5.0  # how long a closing socket may wait for the client's close frame


class RateLimit:
    """A token bucket: `rate` messages a second sustained, `burst` at once."""

    def __init__(self, rate: float, burst: int, now: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._now = now
        self._tokens = float(burst)
        self._refilled = now()

    def allow(self) -> bool:
        now = self._now()
        self._tokens = min(self._burst, self._tokens + (now - self._refilled) * self._rate)
        self._refilled = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


@attrs.frozen(kw_only=True)
class Closing:
    """The last thing in an outbox: close the socket with this code."""

    code: int
    reason: str


class Outbox:
    """The frames waiting for the socket, as text (a frame is serialized when it
    is queued), at most `limit` frames and `limit_bytes` bytes; `put` says False
    past either (the client is too slow: cut it off), except for a frame into an
    empty outbox, which is always queued however large. `close` queues the close
    behind what is queued, whatever the limits."""

    def __init__(self, limit: int, limit_bytes: int | None = None) -> None:
        self._limit = limit
        self._limit_bytes = limit_bytes
        self._queue: asyncio.Queue[str | Closing] = asyncio.Queue()
        self.queued_bytes = 0  # of the frames queued and the one being sent

    def put(self, text: str) -> bool:
        size = len(text)
        if self._queue.qsize() >= self._limit or (
            self._limit_bytes is not None
            and self.queued_bytes
            and self.queued_bytes + size > self._limit_bytes
        ):
            return False
        self._queue.put_nowait(text)
        self.queued_bytes += size
        return True

    def sent(self, text: str) -> None:
        """`text`, taken with `get`, left for the socket: its bytes are free."""
        self.queued_bytes -= len(text)

    def close(self, closing: Closing) -> None:
        self._queue.put_nowait(closing)

    async def get(self) -> str | Closing:
        return await self._queue.get()

    def drain(self) -> list[str | Closing]:
        """What is queued, taken at once."""
        frames = []
        while not self._queue.empty():
            frames.append(self._queue.get_nowait())
        self.queued_bytes = 0
        return frames

    def __len__(self) -> int:
        return self._queue.qsize()


@attrs.frozen(kw_only=True)
class QueuedAction:
    """A dispatched action waiting its turn; `sent`: as the client sent it."""

    params: DispatchActionParams
    sent: Any


class Connection:
    """One client's WebSocket, authenticated as `identity`."""

    def __init__(self, server: "AhpServer", ws: web.WebSocketResponse, identity: str) -> None:
        self.server = server
        self.ws = ws
        self.identity = identity
        self.limits: Limits = server.limits
        self.client_id: str | None = None
        self.version: str | None = None
        self.channels: set[str] = set()
        self.windows: dict[str, Window] = {}  # channel -> its windowed delivery (server/windows.py)
        self._framing: deque[Window] = deque()  # windows with frames to write, in turn
        self._out = Outbox(self.limits.outbox, self.limits.outbox_bytes)
        # A client's actions take effect in the order it sent them.
        self._dispatches: asyncio.Queue[QueuedAction] = asyncio.Queue(self.limits.outbox)
        self._rate = RateLimit(self.limits.rate, self.limits.burst)
        self._closing: Closing | None = None
        self._writer_task: asyncio.Task[None] | None = None
        self._reader_task: asyncio.Task[Any] | None = None
        self._reading = False  # the reading task waits in its receive loop
        self._interrupted = False
        self._ended = asyncio.Event()
        self._handshakes = 0  # initialize and reconnect requests in flight
        self._handshaken = asyncio.Event()
        self._handshaken.set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._log = log.bind(identity=identity)

    @property
    def initialized(self) -> bool:
        return self.version is not None

    @property
    def legacy_steering(self) -> bool:
        """A peer of protocol < 1.1 knows one steering slot, not the list."""
        return self.version is not None and not versions.steering_list(self.version)

    # -- output ------------------------------------------------------------------------
    def offer(self, message: dict[str, Any]) -> None:
        """Queue a frame; a client too slow to take it (past `Limits.outbox`
        frames or `outbox_bytes` bytes queued) is cut off."""
        if self._closing is not None:
            return
        try:
            text = frame_text(message)  # the size server/windows.py counts is the size sent
        except ValueError:  # NaN or Infinity would not be JSON: never sent as such
            self._log.error("frame_not_json", method=message.get("method"), id=message.get("id"))
            return
        if not self._out.put(text):
            self._log.warning(
                "slow_client_cut_off", queued=len(self._out), queued_bytes=self._out.queued_bytes
            )
            self._cut_off()

    def schedule(self, window: Window) -> None:
        """The window has frames to write: it takes its turn."""
        if window not in self._framing:
            self._framing.append(window)
        self._feed()

    def _feed(self) -> None:
        """Top the outbox up with window frames, one window's at a time in turn,
        while it holds fewer than FEED_DEPTH frames."""
        while self._framing and self._closing is None and len(self._out) < FEED_DEPTH:
            window = self._framing.popleft()
            frame = window.next_frame()
            if frame is None:
                continue
            self.offer(frame)
            if window.has_frames:
                self._framing.append(window)

    def _cut_off(self) -> None:
        """Close at once, dropping what is queued: the writer may be stuck in a
        send this client does not read."""
        self._closing = Closing(code=1008, reason="too slow")
        self._out.drain()
        if self._writer_task is not None:
            self._writer_task.cancel()
        self._interrupt_reader()

    def close(self, code: int, reason: str) -> None:
        """Close the socket once what is queued was sent; nothing offered after
        this is sent."""
        if self._closing is None:
            self._closing = Closing(code=code, reason=reason)
            self._out.close(self._closing)

    async def _writer(self) -> None:
        """The one task that writes to the socket. At the close mark it hands the
        close to the reading task: aiohttp's close() from any other task, while
        a receive waits, tears the transport down without waiting for the
        client's close frame, and Node's WebSocket then loses what was sent
        last (it saw close 1006 and never the -32005 answer)."""
        try:
            while True:
                item = await self._out.get()
                if isinstance(item, Closing):
                    self._interrupt_reader()
                    return
                await self.ws.send_str(item)
                self._out.sent(item)
                if self._framing:
                    self._feed()
                    # A send the socket took at once did not yield: let the loop run
                    # (another channel's window, a request) between window frames.
                    await asyncio.sleep(0)
        except ConnectionResetError:  # the socket closed under us: nothing more to send
            self._log.debug("connection_reset_while_sending")

    def _interrupt_reader(self) -> None:
        """Wake the reading task out of its receive, so that it closes the socket."""
        if self._reader_task is not None and self._reading:
            self._interrupted = True
            self._reader_task.cancel()

    async def finished(self, timeout: float) -> None:
        """Wait (up to `timeout`) until the connection has ended."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ended.wait(), timeout)

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- input -------------------------------------------------------------------------
    async def _dispatcher(self) -> None:
        while True:
            queued = await self._dispatches.get()
            if await self._initialized():  # sent right behind an initialize: it waits for it
                await actions.dispatch(self, queued.params, queued.sent)

    def enqueue(self, params: DispatchActionParams, sent: Any) -> None:
        """Queue a dispatched action behind the ones before it (`sent`: the
        action as sent, for an echo)."""
        try:
            self._dispatches.put_nowait(QueuedAction(params=params, sent=sent))
        except asyncio.QueueFull:
            actions.reject(self, params.channel, sent, None, "too many actions queued")

    async def bind_client(self, client_id: str) -> None:
        """This connection speaks for `client_id` (bound to its identity).

        Raises:
            RpcError: PERMISSION_DENIED when another identity holds the id.
        """
        if not await self.server.clients.claim(client_id, self.identity):
            raise RpcError(
                JsonRpcErrorCode.PERMISSION_DENIED,
                f"clientId {client_id!r} is bound to another identity",
            )
        if client_id != self.client_id:
            if self.client_id is not None:
                self.server.clients.detach(self.client_id)
            self.server.clients.attach(client_id)
            self.client_id = client_id

    async def run(self) -> None:
        """Read frames until the socket closes, then stop this connection's tasks.
        Runs on the request handler's task, the only one that closes the socket."""
        self._reader_task = asyncio.current_task()
        writer = self._writer_task = asyncio.get_running_loop().create_task(self._writer())
        self._spawn(self._dispatcher())
        try:
            await self._read()
            if self._closing is not None and not self.ws.closed:
                with contextlib.suppress(TimeoutError):  # a client that never answers
                    await asyncio.wait_for(
                        self.ws.close(
                            code=self._closing.code, message=self._closing.reason.encode()
                        ),
                        CLOSE_WAIT_S,
                    )
        finally:
            writer.cancel()
            for task in list(self._tasks):
                task.cancel()
            self._ended.set()

    async def _read(self) -> None:
        self._reading = True
        try:
            async for frame in self.ws:
                if frame.type is WSMsgType.TEXT:
                    self._receive(frame.data)
                elif frame.type is WSMsgType.BINARY and self._rate.allow():
                    refused = RpcError(JsonRpcErrorCode.INVALID_REQUEST, "frames are JSON text")
                    self.offer(refused.frame(None))
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not self._interrupted or task is None or task.uncancel() > 0:
                raise  # not (only) our own interruption: the server is stopping
        finally:
            self._reading = False

    def sink(self, uri: str) -> "Window | Connection":
        """What a channel's messages to this connection go through: its window
        when the subscription is windowed, else the connection itself."""
        return self.windows.get(uri, self)

    def join(self, uri: str) -> None:
        """Subscribe this connection to a channel."""
        self.channels.add(uri)
        self.server.listeners.join(self.identity, uri, self.sink(uri))

    def leave(self, uri: str) -> None:
        """Unsubscribe this connection from a channel (its window closes)."""
        sink = self.sink(uri)
        window = self.windows.pop(uri, None)
        if window is not None:
            window.close()
        self.channels.discard(uri)
        self.server.listeners.leave(self.identity, uri, sink)
        channel = self.server.channels.get(uri)
        if channel is not None and sink in channel.subscribers:
            channel.subscribers.discard(sink)
            if not channel.subscribers:
                self.server.channels.unfollowed(uri)

    def detach(self) -> None:
        if self.client_id is not None:  # a reconnect resumes them with these limits
            for uri, window in self.windows.items():
                self.server.remembered_windows.keep(self.client_id, uri, window.flow)
        for uri in list(self.channels):
            self.leave(uri)
        if self.client_id is not None:
            self.server.clients.detach(self.client_id)

    def _receive(self, text: str) -> None:
        if self._closing is not None:
            return  # closing: what the client sends now is not read
        allowed = self._rate.allow()  # every frame counts, readable or not
        try:
            message = rpc.parse_frame(text, self.limits.json_depth)
        except rpc.FrameError as error:
            if allowed:
                self.offer(RpcError(error.code, error.message).frame(error.request_id))
            return
        if not isinstance(message, JsonRpcRequest | JsonRpcNotification):
            return  # a response: the server sends no requests, so nothing waits for it
        request_id = message.id if isinstance(message, JsonRpcRequest) else None
        if not allowed:
            if request_id is not None:
                limited = RpcError(JsonRpcErrorCode.RATE_LIMITED, "rate limit exceeded")
                self.offer(limited.frame(request_id))
            return
        params = None if message.params is None else message.params.value
        if request_id is None:
            self._notification(message.method, params)
        elif message.method in HANDSHAKES:
            self._handshakes += 1
            self._handshaken.clear()
            self._spawn(self._handshake(request_id, message.method, params))
        else:
            self._spawn(self._request(request_id, message.method, params))

    async def _handshake(self, request_id: int | str, method: str, params: Any) -> None:
        """initialize or reconnect; what the client sent behind it waits for it."""
        try:
            await self._request(request_id, method, params)
        finally:
            self._handshakes -= 1
            if not self._handshakes:
                self._handshaken.set()

    async def _initialized(self) -> bool:
        """Whether the client initialized, once any initialize or reconnect it sent
        before has been answered (a client may send requests right behind it)."""
        if not self.initialized and self._handshakes:
            await self._handshaken.wait()
        return self.initialized

    async def _request(self, request_id: int | str, method: str, params: Any) -> None:
        try:
            result = await self._answer(method, params)
        except RpcError as error:
            self.offer(error.frame(request_id))
            if error.code == JsonRpcErrorCode.UNSUPPORTED_PROTOCOL_VERSION:  # answer, then close
                self.close(1002, "unsupported protocol version")
            return
        except TimeoutError:  # the host is busy: an answer and a warning, not a traceback
            self._log.warning("request_timed_out", method=method)
            self.offer(RpcError(JsonRpcErrorCode.SERVER_ERROR, HOST_LATE).frame(request_id))
            return
        except Exception:
            self._log.exception("request_failed", method=method)
            internal = RpcError(JsonRpcErrorCode.INTERNAL_ERROR, "internal error")
            self.offer(internal.frame(request_id))
            return
        self.offer(rpc.success(request_id, result))

    async def _answer(self, method: str, params: Any) -> Any:
        """The typed result of a request, or the RpcError to answer with."""
        entry = REQUESTS.get(method)
        if entry is None:
            raise RpcError(JsonRpcErrorCode.METHOD_NOT_FOUND, f"method not found: {method}")
        if not entry.before_initialize and not await self._initialized():
            raise RpcError(JsonRpcErrorCode.NOT_INITIALIZED, "initialize first")
        try:
            typed = rpc.decode_params(method, entry.adapt(params))
            return await entry.handler(self, typed)
        except ValidationError as error:
            raise invalid_params(error) from None
        except AgentHostError as error:
            raise from_host_error(error) from None

    def notified(self, method: str, params: Any) -> None:
        """A notification the client sent inside frames (server/windows.py)."""
        self._notification(method, params)

    def _notification(self, method: str, params: Any) -> None:
        entry = NOTIFICATIONS.get(method)
        if entry is None or not (self.initialized or self._handshakes):
            return  # JSON-RPC: an unknown notification is not answered
        try:
            typed = rpc.decode_params(method, entry.adapt(params))
        except ValidationError as error:
            # Malformed: a dispatched action is echoed naming the field; anything
            # else is answered as a frame whose id cannot be read.
            if method != "dispatchAction" or not actions.echo_malformed(self, params, error):
                self.offer(invalid_params(error).frame(None))
            return
        entry.handler(self, typed, params)
