"""AHP 1.1's windowed delivery: a subscription that offered `flowControl` gets
its channel's messages as `channel/frame` fragments within the credit it grants.

A client offers receive limits on `subscribe {channel, flowControl: {receive:
{windowBytes, maximumFrameBytes, maximumMessageBytes}}}`; the host accepts
with `{flowControl: {clientReceive, hostReceive}}` and no inline snapshot.
From then on everything the channel would have sent this connection (action
envelopes, rejection echoes, root notifications) goes through its `Window`:
serialized as one logical JSON-RPC notification, cut into frames whose whole
serialized text fits `maximumFrameBytes`, and started only while what the
client has not released (`sent - consumed`) is below `windowBytes`. The
snapshot travels the same way as a `channel/snapshot` notification, followed
by `channel/ready`; after a reconnect the actions after the client's applied
checkpoint do (`resume`).

Counting is upstream's: UTF-16 code units times two, of the logical message
before the outer frame escapes it (window, maximumMessageBytes), and of the
outer frame as sent, escapes included (maximumFrameBytes). `frame_text` is
the one serialization of an outgoing frame (the connection writes with it),
so the size counted is the size sent.

Invariants (loop thread only):
1. Nothing goes out on a window before the subscribe (or reconnect) answer:
   it is held until `start`, which the handler schedules behind its answer.
2. Order is kept and nothing is dropped: messages go out whole, in the order
   offered; `channel/ready` waits in that order behind the bootstrap
   messages. (An envelope the bootstrap snapshot already holds, serverSeq <=
   its fromSeq, is not sent again.)
3. A started message goes out whole even past the window; no message starts
   while `sent - consumed >= windowBytes`; credit releases only whole
   messages (a `consumedBytes` inside one, or beyond what was sent, is a
   protocol error); an older or repeated credit is ignored.
4. Memory is bounded in bytes: what waits for credit is at most
   `WindowLimits.queue_bytes`; past it, or for a message over the client's
   `maximumMessageBytes`, or a protocol error, the host sends `channel/reset`
   and the subscription ends (the spec: a hard limit fails explicitly, never
   by dropping). A client that grants no credit costs the host that bound,
   and nobody else waits for it.
5. The connection takes a window's frames a few at a time (`FEED_DEPTH` in
   its outbox), in turn with its other windows: a large message does not
   hold back another channel's, nor fill the send buffer with its frames.
6. Frames a client sends (a `dispatchAction` cut into fragments) are bounded
   by `hostReceive`; a whole message is handled like the same notification
   sent plainly, then credited back.
"""

import asyncio
import json
from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import attrs
import structlog

from agenthost.messages import rpc, versions
from agenthost.messages.protocol import (
    ChannelCheckpoint,
    ChannelCreditParams,
    ChannelFlowControl,
    ChannelFrameParams,
    ChannelResetParams,
    ChannelSnapshotParams,
    JsonRpcNotification,
    ReceiveWindow,
    Snapshot,
    SubscribeFlowControl,
)
from agenthost.server.errors import bad_param

if TYPE_CHECKING:
    from agenthost.server.connection import Connection

log = structlog.get_logger(__name__)

MAX_SAFE = 2**53 - 1
WORST_CHAR = 24  # UTF-16 bytes of one character at its most escaped (`\ud83d\ude00`)
FRAMED_METHODS = frozenset({"dispatchAction"})  # what a client may send in frames


@attrs.frozen(kw_only=True)
class WindowLimits:
    """The host's side of windowed delivery.

    `queue_bytes`: what one windowed subscription may hold waiting for credit
    before it is reset; `client_window_bytes`: the most window the host grants
    itself on a client's behalf (a larger offer is lowered to it); `host_*`:
    what the host receives in frames (`hostReceive`); `remembered`: windowed
    subscriptions remembered for a reconnect (their limits), oldest forgotten.
    """

    queue_bytes: int = 8 << 20
    client_window_bytes: int = 4 << 20
    host_window_bytes: int = 256 << 10
    host_frame_bytes: int = 64 << 10
    host_message_bytes: int = 1 << 20
    remembered: int = 10_000


def utf16_size(text: str) -> int:
    """The protocol's byte count of a text: UTF-16 code units times two."""
    return len(text.encode("utf-16-le", "surrogatepass"))


def frame_text(frame: dict[str, Any]) -> str:
    """An outgoing frame as the connection writes it (ASCII: every non-ASCII
    character escaped), so its UTF-16 size is twice its length."""
    return json.dumps(frame, allow_nan=False)


def message_text(message: dict[str, Any]) -> str:
    """A logical message as carried inside frames (compact, unescaped unicode)."""
    return json.dumps(message, allow_nan=False, ensure_ascii=False, separators=(",", ":"))


def _frame(uri: str, data: str, final: bool) -> dict[str, Any]:
    params: dict[str, Any] = {"channel": uri, "data": data}
    if final:
        params["final"] = True
    return {"jsonrpc": "2.0", "method": "channel/frame", "params": params}


def frame_overhead(uri: str) -> int:
    """UTF-16 bytes of a final frame of `uri` with empty data."""
    return 2 * len(frame_text(_frame(uri, "", True)))


def _escaped(text: str) -> int:
    """UTF-16 bytes `text` takes inside a frame's data string (quotes excluded)."""
    return 2 * (len(json.dumps(text)) - 2)


def fragments(uri: str, text: str, maximum_frame_bytes: int) -> list[dict[str, Any]]:
    """`text` cut into frames each at most `maximum_frame_bytes` as sent, each
    as full as the limit allows. A Python str indexes code points, so a cut
    never splits a surrogate pair.
    """
    last = maximum_frame_bytes - frame_overhead(uri)  # a final frame's room for data
    more = last + 2 * len(', "final": true')  # a frame that is not the last omits `final`
    assert last >= WORST_CHAR, "checked when the window was accepted"
    frames = []
    start, end = 0, len(text)
    # the rest fits a final frame: it takes two bytes a character at least
    while end - start > last // 2 or _escaped(text[start:end]) > last:
        # the longest prefix that fits a frame with more behind it (and leaves some)
        low, high = 1, min(end - start - 1, more // 2)  # a character takes two bytes at least
        while low < high:
            middle = (low + high + 1) // 2
            if _escaped(text[start : start + middle]) <= more:
                low = middle
            else:
                high = middle - 1
        frames.append(_frame(uri, text[start : start + low], False))
        start += low
    frames.append(_frame(uri, text[start:end], True))
    return frames


@attrs.frozen(kw_only=True, eq=False)
class _Data:
    """A logical message waiting for credit; `seq`: an envelope's serverSeq."""

    text: str
    size: int
    seq: int | None = None

    def held_by(self, after_seq: int | None) -> bool:
        """An envelope a bootstrap up to `after_seq` already holds."""
        return self.seq is not None and after_seq is not None and self.seq <= after_seq


@attrs.frozen(kw_only=True)
class _Control:
    """A delivery control (channel/ready) in order behind the data before it."""

    frame: dict[str, Any]


class WindowReset(Exception):
    """Delivery on a window cannot go on: reset it (the reason is logged)."""


class Window:
    """One windowed subscription of one connection (loop thread only).

    The channel's fan-out calls `offer` as it would the connection's; `leave`
    is the listener's unsubscribe. `start` releases it after the answer.
    """

    def __init__(
        self,
        conn: "Connection",
        uri: str,
        flow: ChannelFlowControl,
        limits: WindowLimits,
    ) -> None:
        assert flow.client_receive is not None and flow.host_receive is not None
        self.conn = conn
        self.uri = uri
        self.flow = flow
        self._client = _limits(flow.client_receive)
        self._host = _limits(flow.host_receive)
        self._queue_limit = limits.queue_bytes
        self._queue: deque[_Data | _Control] = deque()
        self._frames: deque[dict[str, Any]] = deque()  # started: the connection takes them
        self._queued = 0  # bytes of the data in the queue
        self._sent = 0  # cumulative bytes of the messages sent
        self._consumed = 0  # cumulative bytes the client released
        self._boundaries: deque[int] = deque()  # ends of the sent messages not yet released
        self._held = True
        self._closed = False
        self._inbound: list[str] = []  # fragments of the client's message being assembled
        self._inbound_size = 0
        self._inbound_received = 0  # cumulative bytes of the client's whole messages
        self._inbound_consumed = 0
        self._log = log.bind(channel=uri, identity=conn.identity)

    @property
    def outstanding(self) -> int:
        return self._sent - self._consumed

    @property
    def queued_bytes(self) -> int:
        return self._queued

    # -- what the channel sends -------------------------------------------------------
    def offer(self, message: dict[str, Any]) -> None:
        if self._closed:
            return
        try:
            self._queue.append(self._data(message))
            if self._queued > self._queue_limit:
                raise WindowReset(
                    f"{self._queued} bytes wait for credit (at most {self._queue_limit})"
                )
            self._pump()
        except WindowReset as why:
            self.reset(str(why))

    def _data(self, message: dict[str, Any]) -> _Data:
        text = message_text(message)
        size = utf16_size(text)
        if size > self._client.maximum_message_bytes:
            raise WindowReset(
                f"a message of {size} bytes, over maximumMessageBytes "
                f"{self._client.maximum_message_bytes}"
            )
        self._queued += size
        seq = message["params"].get("serverSeq") if message.get("method") == "action" else None
        return _Data(text=text, size=size, seq=seq)

    def leave(self, uri: str) -> None:
        self.conn.leave(uri)

    def start(self, bootstrap: Iterable[dict[str, Any]] = (), after_seq: int | None = None) -> None:
        """(Behind the answer.) Send `bootstrap` (the snapshot, or the replay),
        `channel/ready`, then what came meanwhile (without envelopes at or
        below `after_seq`, which the bootstrap holds)."""
        if self._closed:
            return
        try:
            came: deque[_Data | _Control] = deque()
            for item in self._queue:
                if isinstance(item, _Data) and item.held_by(after_seq):
                    self._queued -= item.size
                else:
                    came.append(item)
            first = [self._data(message) for message in bootstrap]
            ready = _Control(frame=rpc.notification("channel/ready", {"channel": self.uri}))
            self._queue = deque([*first, ready, *came])
            self._held = False
            self._pump()
        except WindowReset as why:
            self.reset(str(why))

    def _pump(self) -> None:
        """Start what the window allows; the connection takes the frames a few
        at a time, in turn with its other windows (`next_frame`)."""
        started = False
        while self._queue and not self._held and not self._closed:
            head = self._queue[0]
            if isinstance(head, _Control):
                self._queue.popleft()
                self._frames.append(head.frame)
                started = True
                continue
            if self.outstanding >= self._client.window_bytes:
                break
            self._queue.popleft()
            self._queued -= head.size
            self._frames.extend(fragments(self.uri, head.text, self._client.maximum_frame_bytes))
            self._sent += head.size
            self._boundaries.append(self._sent)
            started = True
        if started:
            self.conn.schedule(self)

    def next_frame(self) -> dict[str, Any] | None:
        """(The connection's scheduler.) The next frame to write, in order."""
        return self._frames.popleft() if self._frames else None

    @property
    def has_frames(self) -> bool:
        return bool(self._frames)

    # -- what the client sends --------------------------------------------------------
    def credit(self, consumed: int) -> None:
        """The client released everything up to `consumed` (cumulative)."""
        if self._closed or consumed <= self._consumed:
            return  # older or repeated: harmless
        if consumed > self._sent:
            self.reset(f"credit {consumed} beyond the {self._sent} bytes sent")
            return
        while self._boundaries and self._boundaries[0] < consumed:
            self._boundaries.popleft()
        if not self._boundaries or self._boundaries[0] != consumed:
            self.reset(f"credit {consumed} is inside a message")
            return
        self._boundaries.popleft()
        self._consumed = consumed
        self._pump()

    def receive(self, params: ChannelFrameParams) -> None:
        """A fragment of a message the client sends on this channel."""
        if self._closed:
            return
        try:
            self._take(params)
        except WindowReset as why:
            self.reset(str(why))

    def _take(self, params: ChannelFrameParams) -> None:
        if not params.data:
            raise WindowReset("an empty frame")
        frame_size = 2 * len(frame_text(rpc.notification("channel/frame", params)))
        if frame_size > self._host.maximum_frame_bytes:
            raise WindowReset(
                f"a frame of {frame_size} bytes, over {self._host.maximum_frame_bytes}"
            )
        if not self._inbound:
            unreleased = self._inbound_received - self._inbound_consumed
            if unreleased >= self._host.window_bytes:
                raise WindowReset("a message started with the host's window spent")
        self._inbound.append(params.data)
        self._inbound_size += utf16_size(params.data)
        if self._inbound_size > self._host.maximum_message_bytes:
            raise WindowReset(
                f"a message over maximumMessageBytes {self._host.maximum_message_bytes}"
            )
        if not params.final:
            return
        text, size = "".join(self._inbound), self._inbound_size
        self._inbound, self._inbound_size = [], 0
        self._inbound_received += size
        self._deliver(text)
        self._inbound_consumed += size
        credit = ChannelCreditParams(channel=self.uri, consumed_bytes=self._inbound_consumed)
        self.conn.offer(rpc.notification("channel/credit", credit))

    def _deliver(self, text: str) -> None:
        try:
            message = rpc.parse_frame(text, self.conn.limits.json_depth)
        except rpc.FrameError as error:
            raise WindowReset(f"a framed message that does not parse ({error.code})") from None
        if not isinstance(message, JsonRpcNotification) or message.method not in FRAMED_METHODS:
            raise WindowReset("only dispatchAction notifications travel in frames")
        params = None if message.params is None else message.params.value
        if not isinstance(params, dict) or params.get("channel") != self.uri:
            raise WindowReset("a framed message for another channel")
        self.conn.notified(message.method, params)

    # -- the end ------------------------------------------------------------------------
    def reset(self, reason: str) -> None:
        """Delivery cannot go on: tell the client, end the subscription."""
        if self._closed:
            return
        self._log.warning(
            "window_reset", reason=reason, queued_bytes=self._queued, outstanding=self.outstanding
        )
        self._frames.clear()  # an incomplete message is abandoned, never continued
        self.conn.offer(rpc.notification("channel/reset", ChannelResetParams(channel=self.uri)))
        self.conn.server.metrics.window_resets += 1
        self.conn.leave(self.uri)

    def close(self) -> None:
        """The subscription ended: what waits is dropped (the client re-subscribes
        or reconnects from what it applied)."""
        self._closed = True
        self._frames.clear()
        self._queue.clear()
        self._queued = 0
        self._inbound = []


@attrs.frozen
class _Receive:
    window_bytes: int
    maximum_frame_bytes: int
    maximum_message_bytes: int


def _limits(receive: ReceiveWindow) -> _Receive:
    assert receive.window_bytes and receive.maximum_frame_bytes and receive.maximum_message_bytes
    return _Receive(
        receive.window_bytes, receive.maximum_frame_bytes, receive.maximum_message_bytes
    )


def accepted(
    uri: str, offer: SubscribeFlowControl, limits: WindowLimits, frame_limit: int
) -> ChannelFlowControl:
    """The limits the host accepts for an offer: the client's, lowered where
    the host caps them, and the host's own (`frame_limit`: the most a socket
    frame may hold, in UTF-8 bytes).

    Raises:
        RpcError: INVALID_PARAMS naming the limit that is missing, out of
            range, or too small for a frame of this channel to carry data.
    """
    receive = offer.receive
    field = "flowControl.receive"
    if receive is None:
        raise bad_param(field, "required")
    for name in ("window_bytes", "maximum_frame_bytes", "maximum_message_bytes"):
        value = getattr(receive, name)
        wire = {"window_bytes": "windowBytes", "maximum_frame_bytes": "maximumFrameBytes"}.get(
            name, "maximumMessageBytes"
        )
        if value is None or not 1 <= value <= MAX_SAFE:
            raise bad_param(f"{field}.{wire}", f"a positive safe integer, not {value!r}")
    assert receive.maximum_frame_bytes is not None and receive.window_bytes is not None
    least = frame_overhead(uri) + WORST_CHAR
    if receive.maximum_frame_bytes < least:
        raise bad_param(
            f"{field}.maximumFrameBytes", f"at least {least} for a frame of {uri} to carry data"
        )
    client = attrs.evolve(
        receive, window_bytes=min(receive.window_bytes, limits.client_window_bytes)
    )
    host = ReceiveWindow(
        window_bytes=limits.host_window_bytes,
        # a UTF-8 byte takes at most 2/3 of the UTF-16 bytes of its character
        maximum_frame_bytes=min(limits.host_frame_bytes, frame_limit * 2 // 3),
        maximum_message_bytes=limits.host_message_bytes,
    )
    return ChannelFlowControl(client_receive=client, host_receive=host)


def offered(conn: "Connection", offer: SubscribeFlowControl | None) -> bool:
    """Whether a subscribe's flow-control offer is taken up: the negotiated
    version has windowed delivery (1.1 on); an older peer's offer is ignored."""
    return (
        offer is not None
        and conn.version is not None
        and versions.knows_notification(conn.version, "channel/frame")
    )


def snapshot_message(snapshot: Snapshot) -> dict[str, Any]:
    params = ChannelSnapshotParams(channel=snapshot.resource, snapshot=snapshot)
    return rpc.notification("channel/snapshot", params)


def start_after_answer(window: Window, bootstrap: list[dict[str, Any]], after: int | None) -> None:
    """Start the window once the answer the handler returns is queued: the
    handler's task queues it in the same step it returns in, before any
    callback scheduled now runs (server/connection.py, `_request`)."""
    asyncio.get_running_loop().call_soon(window.start, bootstrap, after)


class Remembered:
    """The limits of windowed subscriptions whose connection went, per client
    and channel, so a reconnect resumes them with the same limits; bounded
    (`WindowLimits.remembered`, the oldest forgotten)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._flows: OrderedDict[tuple[str, str], ChannelFlowControl] = OrderedDict()

    def keep(self, client_id: str, uri: str, flow: ChannelFlowControl) -> None:
        self._flows[(client_id, uri)] = flow
        self._flows.move_to_end((client_id, uri))
        while len(self._flows) > self._limit:
            self._flows.popitem(last=False)

    def take(self, client_id: str, uri: str) -> ChannelFlowControl | None:
        return self._flows.pop((client_id, uri), None)

    def __len__(self) -> int:
        return len(self._flows)


def requested(items: Iterable[ChannelCheckpoint]) -> frozenset[str]:
    """The channels a reconnect's `windows` names."""
    return frozenset(item.channel for item in items)
