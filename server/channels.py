"""What the AHP server sequences: one stream per chat channel, numbered once.

Every chat the server serves has one `ChatChannel`: a single subscription to
the chat actor, whose events become AHP action envelopes stamped with the
next `serverSeq` (one counter for the whole server), kept in a bounded replay
buffer, and fanned out to the connections subscribed to that channel. The
channel keeps the chat state as its own stream shows it, so a snapshot and
its `fromSeq` always agree: the chat's own published state as of the last
event it forwarded (a `keep_state` subscription), so it shares every string
with the host's copy and reduces nothing itself; a subscription that keeps no
state (a sharded host's front) is reduced here. Its unread events are bounded
in bytes (`channel_bytes`), and the replay buffer in envelopes and bytes; a
closed channel's envelopes leave the buffer at once. A client-dispatched action carries its origin
({clientId, clientSeq}) when the host's event for it goes out.
`ChannelTable` holds the open channels: one opens on its first use and closes
once nobody followed it for a grace, so it never keeps its session in memory.

A channel whose stream was cut (Lagged with nothing dropped: a sharded host's
shard died under it) reopens itself when it was given `reopen`: it subscribes
again, and what the new snapshot shows of the turn that was running (it ended
meanwhile: as execution_abandoned on a shard that died) goes out as that
turn's terminal action, so the channel's clients see the turn end once; the
channel then goes on from the new snapshot.
"""

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import structlog

from agenthost.actors.clock import Clock, TimerHandle
from agenthost.actors.handles import Subscription
from agenthost.messages.events import (
    ChatEvent,
    ChatIsArchivedChanged,
    ChatIsReadChanged,
    ChatSnapshot,
    InputAnswerChanged,
    InputCompleted,
    Lagged,
    PendingMessageAdded,
    PendingMessageRemoved,
    QueuedMessagesReordered,
    ToolCallCompleted,
    ToolCallConfirmed,
    ToolCallContentChanged,
    ToolCallResultConfirmed,
    Truncated,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnResumed,
    TurnStarted,
)
from agenthost.messages.protocol import Snapshot
from agenthost.messages.reducers import delta_runs, joined_delta, reduce_chat
from agenthost.messages.sizes import event_bytes
from agenthost.messages.state import ChatState, TurnState, with_legacy_steering_slot
from agenthost.messages.versions import sent_to
from agenthost.messages.wire import to_wire

if TYPE_CHECKING:
    from agenthost.actors.aio import AsyncChat

log = structlog.get_logger(__name__)

ROOT = "ahp-root://"


def identity_root(identity: str) -> str:
    """What an identity's own root envelopes are recorded under (the root is per
    identity): replayed to that identity's root subscription alone."""
    return f"{ROOT} {identity}"


SESSION_PREFIX = "ahp-session:/"
CHAT_PREFIX = "ahp-chat:/"


def session_uri(session_id: str) -> str:
    return f"{SESSION_PREFIX}{session_id}"


def chat_uri(chat_id: str) -> str:
    return f"{CHAT_PREFIX}{chat_id}"


def action_wire(event: Any) -> dict[str, Any]:
    """An event as an AHP action: its channel says which session and chat."""
    data: dict[str, Any] = to_wire(event)
    data.pop("sessionId", None)
    data.pop("chatId", None)
    return data


def origin_keys(event: ChatEvent) -> tuple[Hashable, ...]:
    """What may tie a host event to the client action that caused it, in order."""
    match event:
        case TurnStarted(turn_id=turn_id, queued_message_id=None):
            return (("turn", turn_id),)
        case TurnStarted(turn_id=turn_id, queued_message_id=pending_id):
            # a message set as queued while the chat was idle starts at once
            return (("turn", turn_id), ("pending", pending_id))
        case PendingMessageAdded(pending=pending):
            return (("pending", pending.id),)
        case PendingMessageRemoved(pending_id=pending_id):
            return (("removed", pending_id),)
        case TurnCancelled(turn_id=turn_id):
            return (("cancelled", turn_id),)
        case QueuedMessagesReordered():
            return (("reordered",),)
        case Truncated():
            return (("truncated",),)
        case ToolCallConfirmed(tool_call_id=tool_call_id):
            return (("confirmed", tool_call_id),)
        case ToolCallCompleted(tool_call_id=tool_call_id):
            return (("completed", tool_call_id),)
        case ToolCallResultConfirmed(tool_call_id=tool_call_id):
            return (("result", tool_call_id),)
        case ToolCallContentChanged(tool_call_id=tool_call_id):
            return (("content", tool_call_id),)
        case InputAnswerChanged(request_id=request_id, question_id=question_id):
            return (("answer", request_id, question_id),)
        case InputCompleted(request_id=request_id):
            return (("input", request_id),)
        case TurnResumed(turn_id=turn_id):
            return (("resume", turn_id),)
        case ChatIsReadChanged():
            return (("read",),)
        case ChatIsArchivedChanged():
            return (("archived",),)
    return ()


class Subscriber(Protocol):
    @property
    def version(self) -> str | None:
        """The protocol version it negotiated: what it is sent (versions.sent_to)."""

    def offer(self, message: dict[str, Any]) -> None: ...


SEQ_BITS = 37
"""A front start's serverSeq range: 2**37 numbers (about 160 days of 10,000
actions a second), under a start count of 16 bits: every serverSeq stays
below 2**53, an integer JSON and JavaScript carry exactly."""


def front_seq_base(start: int) -> int:
    """The serverSeq base of server start number `start` (1, 2, ...): never 0,
    and the 65,535 latest starts' ranges are disjoint. A sharded server's fronts
    count their starts in the store (server/fronts.py); a plain `serve` picks
    one at random (`server.serve.fresh_seq_base`)."""
    return ((start - 1) % ((1 << 16) - 1) + 1) << SEQ_BITS


@attrs.frozen
class Recorded:
    """An envelope in the replay buffer, and what it weighs (messages/sizes.py)."""

    seq: int
    channel: str
    envelope: dict[str, Any]
    size: int


class Sequencer:
    """The server's one serverSeq counter and its replay buffer, bounded in
    envelopes (`replay`) and in bytes (`replay_bytes`). A closed chat channel's
    envelopes are never replayed (its client gets a snapshot), and leave the
    buffer once they are half of it: they would keep its chat's text in memory,
    and dropping each channel's at its close visited the whole buffer each time
    (4% of the server's CPU under a load).

    `base` is the seq before this sequencer's first: a sharded server's fronts
    each take a base of their own (shards/fronts.py), so no front holds
    another's numbers and a `lastSeenServerSeq` below a front's base (seen on
    another front, or before this one started) is answered with snapshots,
    never with this front's envelopes."""

    def __init__(self, replay: int, replay_bytes: int | None = None, base: int = 0) -> None:
        self.base = base
        self.seq = base
        self._buffer: deque[Recorded] = deque()
        self._replay = replay
        self._replay_bytes = replay_bytes
        self.buffered_bytes = 0
        self._evicted = base  # the newest seq dropped for room: no replay reaches back past it
        # open chat channel -> the seq its events are stamped after; a replay
        # of it from before that would miss what the chat did meanwhile
        self._recorded_from: dict[str, int] = {}
        self._counts: dict[str, int] = {}  # channel -> its envelopes in the buffer
        # closed channel -> the seq it closed at: its envelopes up to it are never
        # replayed (a replay of it starts from a snapshot) and leave the buffer
        # once such envelopes are half of it (`_dead`: about how many), each
        # visited once whatever the channels that close
        self._closed_at: dict[str, int] = {}
        self._dead = 0

    @property
    def recording(self) -> int:
        """How many chat channels are recorded (open ones only)."""
        return len(self._recorded_from)

    def opened(self, channel: str) -> None:
        """A chat channel opened: its events are stamped from now."""
        self._recorded_from[channel] = self.seq

    def closed(self, channel: str) -> None:
        """A chat channel closed. The close takes a seq of its own: what the chat
        does until it reopens has none, so a client that saw up to the close
        replays from a snapshot."""
        self._recorded_from.pop(channel, None)
        self.seq += 1
        held = self._counts.get(channel, 0)
        if held:
            self._closed_at[channel] = self.seq
            self._dead += held
            if 2 * self._dead >= len(self._buffer):
                self._drop_closed()

    def _drop_closed(self) -> None:
        """Rid the buffer of closed channels' envelopes (their text with them)."""
        closed = self._closed_at
        self._buffer = deque(r for r in self._buffer if r.seq > closed.get(r.channel, self.base))
        self._counts = {}
        for r in self._buffer:
            self._counts[r.channel] = self._counts.get(r.channel, 0) + 1
        self.buffered_bytes = sum(r.size for r in self._buffer)
        self._closed_at, self._dead = {}, 0

    def unrecorded(self, channel: str, action: dict[str, Any]) -> dict[str, Any]:
        """The envelope of an action for one connection alone (chat/turnsLoaded):
        numbered like any other, so a client that orders by serverSeq keeps it,
        but never replayed to anyone."""
        self.seq += 1
        return {"channel": channel, "action": action, "serverSeq": self.seq}

    def stamp(
        self,
        channel: str,
        action: dict[str, Any],
        origin: dict[str, Any] | None = None,
        size: int = 0,
        recorded_as: str | None = None,
    ) -> dict[str, Any]:
        """The envelope of `action`, numbered and kept for replay (`size`: its
        weight; `recorded_as`: the key a replay asks for, when not `channel`:
        an identity's own root action, `identity_root`)."""
        self.seq += 1
        envelope = {"channel": channel, "action": action, "serverSeq": self.seq}
        if origin is not None:
            envelope["origin"] = origin
        key = channel if recorded_as is None else recorded_as
        self._buffer.append(Recorded(self.seq, key, envelope, size))
        self._counts[key] = self._counts.get(key, 0) + 1
        self.buffered_bytes += size
        limit = self._replay_bytes
        while len(self._buffer) > self._replay or (
            limit is not None and self.buffered_bytes > limit
        ):
            dropped = self._buffer.popleft()
            self.buffered_bytes -= dropped.size
            self._evicted = dropped.seq
            left = self._counts[dropped.channel] - 1
            if left:
                self._counts[dropped.channel] = left
            else:
                del self._counts[dropped.channel]
            if dropped.seq <= self._closed_at.get(dropped.channel, self.base):
                self._dead -= 1
        return envelope

    def since(
        self, last_seen: int, channels: set[str], identity: str | None = None
    ) -> list[dict[str, Any]] | None:
        """The envelopes of `channels` after `last_seen` (with the root, the
        root's envelopes recorded for `identity` alone too), or None when the
        buffer no longer reaches back that far, a channel was not recorded all
        along, or `last_seen` is not a seq of this sequencer (below its base)."""
        if last_seen > self.seq or last_seen < self._evicted or last_seen < self.base:
            return None
        if identity is not None and ROOT in channels:
            channels = channels | {identity_root(identity)}
        for channel in channels:
            if channel.startswith(CHAT_PREFIX):
                start = self._recorded_from.get(channel)
                if start is None or start > last_seen:  # closed now, or opened since
                    return None
        return [r.envelope for r in self._buffer if r.seq > last_seen and r.channel in channels]


class ChatChannel:
    """One chat's stream: subscribed once, sequenced, and fanned out."""

    def __init__(
        self,
        uri: str,
        session_id: str,
        sequencer: Sequencer,
        now_ms: Callable[[], int],
        on_event: Callable[[ChatEvent], None] = lambda event: None,
        reopen: Callable[[], Awaitable[Subscription]] | None = None,
    ) -> None:
        self.uri = uri
        self.session_id = session_id
        self._reopen = reopen
        self.state: ChatState | None = None
        self.from_seq = 0
        self.subscribers: set[Subscriber] = set()
        self._sequencer = sequencer
        self._now_ms = now_ms
        self._on_event = on_event
        self._origins: dict[Hashable, dict[str, Any]] = {}
        self._task: asyncio.Task[None] | None = None
        self._subscription: Subscription | None = None
        self._opened = asyncio.Event()
        self._abandoned = False

    @contextlib.contextmanager
    def expecting(self, key: Hashable, origin: dict[str, Any]) -> Iterator[None]:
        """The next host event under `key` answers the client action run in the
        block, unless the block raises (refused, timed out or cancelled: the
        client is told so, and an event the host may still make goes out as
        the host's own)."""
        self._origins[key] = origin
        try:
            yield
        except BaseException:
            self.forget(key, origin)
            raise

    def forget(self, key: Hashable, origin: dict[str, Any]) -> None:
        """Drop this origin (not one another client set under the key since)."""
        if self._origins.get(key) is origin:
            del self._origins[key]

    async def open(self, subscription: Subscription) -> None:
        """Start from the subscription's snapshot; then follow it. Failed or
        cancelled, the subscription is closed and `opened` answers False."""
        try:
            first = await anext(aiter(subscription))
        except BaseException:
            subscription.close()
            self.abandon()
            raise
        assert isinstance(first, ChatSnapshot)
        self.state = first.state
        self.from_seq = self._sequencer.seq
        self._sequencer.opened(self.uri)
        self._subscription = subscription
        self._task = asyncio.get_running_loop().create_task(self._pump(subscription))
        self._opened.set()

    async def opened(self) -> bool:
        """Wait until another caller's `open` has taken the snapshot; False if
        opening failed (the channel is not served: open a new one)."""
        await self._opened.wait()
        return not self._abandoned

    def abandon(self) -> None:
        """Opening failed: wake whoever waits in `opened`."""
        self._abandoned = True
        self._opened.set()

    def snapshot(self, legacy_steering: bool = False) -> Snapshot:
        """The chat as its stream shows it; with `legacy_steering` (a peer of
        protocol < 1.1) the head of the steering list in the single slot."""
        state = self.state
        if legacy_steering and state is not None:
            state = with_legacy_steering_slot(state)
        assert state is not None, "a channel is snapshotted once open"
        return Snapshot(resource=self.uri, state=state, from_seq=self.from_seq)

    async def _pump(self, subscription: Subscription) -> None:
        while await self._follow(subscription) and self._reopen is not None:
            try:
                subscription = await self._reopen()
                first = await anext(aiter(subscription))
            except Exception:
                log.exception("channel_reopen_failed", channel=self.uri)
                return
            assert isinstance(first, ChatSnapshot)
            self._subscription = subscription
            self._caught_up(first.state)

    async def _follow(self, subscription: Subscription) -> bool:
        """Forward the stream's events; True when it was cut (Lagged with nothing
        dropped: a shard's death), not when this channel fell behind."""
        async for event in subscription:
            # What else is queued goes out in the same step (no await between an
            # event and the state that includes it): a run of deltas is reduced once.
            events = [event]
            while (more := subscription.next_nowait()) is not None:
                events.append(more)
            # The chat's own state once these events apply, where the subscription
            # keeps it (a sharded host's front does not: reduced here then).
            shared = subscription.state if subscription.keeps_state else None
            for run in delta_runs(events):
                if not self._forward(run, reduce=shared is None):
                    return isinstance(run[0], Lagged) and run[0].dropped == 0
            if shared is not None:
                self.state = shared
        return False

    def _caught_up(self, state: ChatState) -> None:
        """(Reopened.) The running turn's end, as the new snapshot shows it, goes
        out as its terminal action; the channel goes on from the snapshot."""
        running = None if self.state is None else self.state.active_turn_id
        ended = next((t for t in state.turns if t.id == running), None)
        if running is not None and ended is not None:
            sid, cid = self.session_id, self.uri[len(CHAT_PREFIX) :]
            end: ChatEvent
            if ended.state is TurnState.COMPLETE:
                end = TurnCompleted(turn_id=running, session_id=sid, chat_id=cid)
            elif ended.state is TurnState.CANCELLED:
                end = TurnCancelled(turn_id=running, session_id=sid, chat_id=cid)
            else:
                assert ended.error is not None
                end = TurnFailed(turn_id=running, error=ended.error, session_id=sid, chat_id=cid)
            self._forward([end])
        self.state = state
        log.warning("channel_reopened", channel=self.uri, ended_turn=running)

    def _forward(self, run: list[ChatEvent], reduce: bool = True) -> bool:
        """Send each event of a run (one action, or deltas to one part), folding
        the run into the state when it is reduced here; False once the
        subscription lagged."""
        if isinstance(run[0], Lagged):  # never with the server's large queue; say so
            if run[0].dropped:
                log.error("channel_lagged", channel=self.uri)
            return False
        if reduce and self.state is not None:
            folded = run[0] if len(run) == 1 else joined_delta(run)  # type: ignore[arg-type]
            self.state = reduce_chat(self.state, folded, self._now_ms())
        for event in run:
            origin = next(
                (o for key in origin_keys(event) if (o := self._origins.pop(key, None))), None
            )
            wire = action_wire(event)
            envelope = self._sequencer.stamp(self.uri, wire, origin, event_bytes(event))
            self.from_seq = self._sequencer.seq
            try:
                self._on_event(event)
            except Exception:  # an observer's bug must not stop the channel
                log.exception("channel_observer_failed", channel=self.uri)
            for subscriber in list(self.subscribers):
                if sent_to(subscriber.version, wire):
                    subscriber.offer({"jsonrpc": "2.0", "method": "action", "params": envelope})
        return True

    async def close(self) -> None:
        if self._subscription is not None:
            self._sequencer.closed(self.uri)
            self._subscription.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class ChannelTable:
    """The open chat channels (event loop thread only).

    A channel opens on its first subscriber (or dispatch) and closes once
    nobody followed it for `idle_s` on the host's clock, so its subscription
    does not keep the session in memory for good; a client that comes back
    within the grace finds it open. At most `idle_max` channels wait out their
    grace at once: past that the one that waited longest closes now (each
    keeps its session, and the session's whole history, in memory). Opening is
    shared: callers that come while one opens wait for it, and a failed
    opening is retried afresh."""

    def __init__(
        self,
        sequencer: Sequencer,
        clock: Clock,
        idle_s: float,
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        on_event: Callable[[str, ChatEvent], None] = lambda session_id, event: None,
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        channel_bytes: int | None = None,
        idle_max: int | None = None,
    ) -> None:
        self._sequencer = sequencer
        self._idle_max = idle_max
        self._channel_bytes = channel_bytes
        self._clock = clock
        self._idle_s = idle_s
        self._spawn = spawn
        self._on_event = on_event
        self._now_ms = now_ms
        self._open: dict[str, ChatChannel] = {}
        self._idle: dict[str, TimerHandle] = {}  # channel -> its close, while nobody follows

    def __len__(self) -> int:
        return len(self._open)

    @property
    def idle_count(self) -> int:
        """Channels nobody follows, waiting out their grace."""
        return len(self._idle)

    def get(self, uri: str) -> ChatChannel | None:
        return self._open.get(uri)

    async def channel(self, chat: "AsyncChat") -> ChatChannel:
        """The chat's channel, opened if it is not (its first event is the snapshot)."""
        uri = chat_uri(chat.id)
        while (channel := self._open.get(uri)) is not None:
            if await channel.opened():
                return channel
            if self._open.get(uri) is channel:  # its opener failed: open afresh
                del self._open[uri]
        session_id = chat.session.id
        channel = ChatChannel(
            uri,
            session_id,
            self._sequencer,
            self._now_ms,
            lambda event: self._on_event(session_id, event),
            reopen=lambda: self._subscribe(chat),  # a sharded host's shard died
        )
        self._open[uri] = channel
        try:
            subscription = await self._subscribe(chat)
        except BaseException:
            channel.abandon()
            raise
        await channel.open(subscription)
        return channel

    def _subscribe(self, chat: "AsyncChat") -> Awaitable[Subscription]:
        """The channel's one subscription: it keeps the chat's own state (shared
        with the host, nothing reduced here) and its unread events are bounded
        in bytes, not in number."""
        return chat.subscribe(maxsize=1_000_000, max_bytes=self._channel_bytes, keep_state=True)

    def followed_or_closing(self, channel: ChatChannel) -> ChatChannel:
        """A channel a dispatch uses, and nobody follows, closes like one its
        last subscriber left."""
        if not channel.subscribers:
            self.unfollowed(channel.uri)
        return channel

    def unfollowed(self, uri: str) -> None:
        """Nobody follows the channel: close it after the grace (on the host's
        clock), unless someone follows it by then; past `idle_max` channels in
        their grace, the longest idle closes now."""
        if uri in self._idle:
            return
        loop = asyncio.get_running_loop()

        def due() -> None:  # on the clock's thread
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(self._close_idle, uri)

        self._idle[uri] = self._clock.call_later(self._idle_s, due)
        if self._idle_max is not None and len(self._idle) > self._idle_max:
            oldest = next(iter(self._idle))  # dicts keep insertion order
            self._idle[oldest].cancel()
            self._close_idle(oldest)

    def _close_idle(self, uri: str) -> None:
        self._idle.pop(uri, None)
        channel = self._open.get(uri)
        if channel is None or channel.subscribers:
            return
        del self._open[uri]
        self._spawn(channel.close())

    async def close(self, uri: str) -> None:
        """The chat was disposed: its channel closes now."""
        idle = self._idle.pop(uri, None)
        if idle is not None:
            idle.cancel()
        channel = self._open.pop(uri, None)
        if channel is not None:
            await channel.close()

    async def close_all(self) -> None:
        for idle in self._idle.values():
            idle.cancel()
        self._idle.clear()
        for uri in list(self._open):
            await self.close(uri)
