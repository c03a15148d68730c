"""The front's side of a sharded host: links to the shards, and refs that stand
in for the actors on them.

Belongs here: `FrontLoop` (the front's one I/O loop thread) and `ShardLink`
(a connection to one shard, reconnected after the shard restarts); which
link a call takes is shards/router.py's.

Invariants:
1. Replies come back as the surface expects them: a stand-in (wire.py,
   invariant 3) becomes a SessionInfo or ChatInfo holding a RemoteRef, or a
   Ticket the link settles when the shard's TicketEnded comes.
2. A call is sent once. Sent before its shard's connection was lost, a call
   that may have changed something fails with SHARD_LOST (its effect is
   unknown: never sent twice); a read is sent again once the shard is back.
   A call made while the shard is away waits for it (within its timeout).
3. A shard lost takes its streams with it: each subscription it fed gets
   Lagged and closes (subscribe again: the snapshot shows what happened), and
   each send whose turn had started is settled from the chat's state once the
   shard is back (a turn that was running there has ended as
   execution_abandoned); one that had not started fails with SHARD_LOST.
4. All link state lives on the front's loop thread; other threads reach it
   through LoopCalls (one wake-up per burst).
5. Whoever watches the front's departures (Host.on_session_left) hears of
   each session that left a shard's memory: from the shard (SessionLeft), or,
   for the sessions a lost shard held as far as this link sent calls for
   them, from the link itself (Departure.FAILED), so a front's tables never
   keep a session that is in no shard's memory.
6. A provider is unavailable on the front (Host.unavailable_providers, and
   root/agentsChanged) while any connected shard says it is unavailable there.
"""

import asyncio
import contextlib
import itertools
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import structlog
import tenacity

from agenthost.actors.chat import SteerReply
from agenthost.actors.chat_core import Attach, Detach
from agenthost.actors.context import Departure
from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.handles import Subscription, Ticket
from agenthost.actors.host import SessionInfo
from agenthost.actors.protocol import (
    AdoptSession,
    CountSessions,
    FindClient,
    FindSession,
    GetChat,
    GetCounters,
    ListChats,
    ListSessionPage,
    ListSessionRows,
    LoadSession,
)
from agenthost.actors.publisher import outcome_of
from agenthost.messages.commands import (
    GetChatState,
    GetDiagnostics,
    GetSessionState,
    GetSessionStatus,
    GetSessionSummary,
    GetSessionView,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import Lagged
from agenthost.providers.base import LoopCalls
from agenthost.shards.router import (
    Pending,
    RemoteRef,
    Router,
    chat_info,
    exc_info_of,
    routed_session,
)
from agenthost.shards.wire import (
    AttachRemote,
    Call,
    ChatTarget,
    DetachRemote,
    Events,
    FrameWriter,
    ProvidersChanged,
    Relay,
    RemoteChat,
    RemoteSession,
    RemoteTicket,
    Reply,
    SessionLeft,
    SessionTarget,
    Target,
    Tell,
    TicketEnded,
    authenticate,
    read_batches,
)
from agenthost.store.leases import owner_of

log = structlog.get_logger(__name__)

SHARD_CALL_TIMEOUT_S = 300.0
"""How long a shard works on one call (the caller's own timeout is what it waits)."""
RECONNECT_S = 120.0
"""How long a link tries to reach its shard again before the shard counts as gone."""

READS = (
    GetChatState,
    GetSessionState,
    GetSessionStatus,
    GetSessionSummary,
    GetSessionView,
    GetDiagnostics,
    GetChat,
    ListChats,
    GetCounters,
    LoadSession,
    ListSessionRows,
    FindSession,
    ListSessionPage,
    CountSessions,
    FindClient,
    AdoptSession,
)
"""Calls that change nothing a caller can see: sent again after a shard came back."""


@attrs.frozen
class Address:
    """Where a shard listens, and which start of it that is (its epoch)."""

    host: str
    port: int
    epoch: int = 0


Locate = Callable[[], Awaitable[Address]]
"""Where a shard is now (for Ray: ask its actor, which waits out a restart)."""


class FrontLoop:
    """The front's I/O loop, on a thread of its own."""

    def __init__(self) -> None:
        ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.calls: LoopCalls | None = None

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.calls = LoopCalls.of(self.loop)
            ready.set()
            self.loop.run_forever()

        self._thread = threading.Thread(target=run, name="agenthost-front", daemon=True)
        self._thread.start()
        ready.wait()

    def call(self, fn: Callable[..., object], *args: Any) -> None:
        assert self.calls is not None
        self.calls.call(fn, *args)

    def run(self, work: Awaitable[Any], timeout: float) -> Any:
        """Run a coroutine on the loop from another thread and wait for it."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout)  # type: ignore[arg-type]

    def stop(self, timeout: float = 10.0) -> None:
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)


@attrs.define(eq=False)
class _Watched:
    """A send's ticket on the front, and the chat it belongs to."""

    ticket: Ticket
    chat: ChatTarget


class ShardLink:
    """The front's connection to one shard (its state: the front loop's thread only)."""

    def __init__(self, shard_id: str, locate: Locate, secret: bytes, io: FrontLoop) -> None:
        self.shard_id = shard_id
        self._locate = locate
        self._secret = secret
        self._io = io
        self._writer: FrameWriter | None = None
        self._numbers = itertools.count(1)
        self._sent: dict[int, Pending] = {}
        self._waiting: list[Pending] = []
        self._subs: dict[int, Subscription] = {}
        self._sub_numbers: dict[int, int] = {}  # id(subscription) -> its number
        self._sub_chats: dict[int, ChatTarget] = {}
        self._tickets: dict[int, _Watched] = {}
        # sessions this link sent calls for and the shard has not said left its
        # memory: they leave with the shard if it is lost (invariant 5)
        self._sessions: set[str] = set()
        self._unavailable: frozenset[str] = frozenset()  # the shard's, as it said
        self._connecting: asyncio.Task[None] | None = None
        self._ready: list[asyncio.Future[None]] = []
        self.gone = False
        self.epoch = 0
        self.router: Router  # set by the Router it joins
        self.log = log.bind(shard_id=shard_id)

    @property
    def connected(self) -> bool:
        """(The loop's thread.) Connected to its shard now."""
        return self._writer is not None and not self.gone

    # -- from any thread -----------------------------------------------------------------
    def send(self, pending: Pending) -> None:
        self._io.call(self._send, pending)

    def tell(self, target: Target, message: Any) -> None:
        self._io.call(self._tell, target, message)

    # -- the loop's thread -----------------------------------------------------------------
    def _send(self, pending: Pending) -> None:
        if self.gone:
            pending.future.set_exception(exc_info=exc_info_of(_shard_lost(self.shard_id)))
            return
        if self._writer is None:
            self._waiting.append(pending)
            self._connect()
            return
        no = next(self._numbers)
        message = pending.message
        session_id = routed_session(pending.target, message)
        if session_id is not None:
            self._sessions.add(session_id)
        if isinstance(message, Attach):
            sub = no
            self._subs[sub] = message.subscription
            self._sub_numbers[id(message.subscription)] = sub
            assert isinstance(pending.target, ChatTarget)
            self._sub_chats[sub] = pending.target
            message = AttachRemote(sub=sub, maxsize=message.subscription.maxsize)
        self._sent[no] = pending
        self._writer.send(
            Call(no=no, target=pending.target, message=message, timeout=SHARD_CALL_TIMEOUT_S)
        )

    def _tell(self, target: Target, message: Any) -> None:
        if isinstance(message, Detach):
            sub = self._sub_numbers.pop(id(message.subscription), None)
            if sub is None or self._subs.pop(sub, None) is None:
                return
            self._sub_chats.pop(sub, None)
            message = DetachRemote(sub=sub)
        if self._writer is not None:
            self._writer.send(Tell(target=target, message=message))

    def _connect(self) -> None:
        if self._connecting is None or self._connecting.done():
            self._connecting = self._io.loop.create_task(self._run())

    async def wait_connected(self) -> None:
        """Connect if not connected, and wait until it is.

        Raises:
            AgentHostError: SHARD_LOST when the shard cannot be reached.
        """
        while self._writer is None:
            if self.gone:
                raise _shard_lost(self.shard_id)
            self._connect()
            assert self._connecting is not None
            ready = self._io.loop.create_future()
            self._ready.append(ready)
            await asyncio.wait({ready, self._connecting}, return_when=asyncio.FIRST_COMPLETED)

    async def _run(self) -> None:
        """Connect (again), serve the connection until it ends, repeat while calls wait."""
        try:
            reader, writer = await self._reach()
        except Exception as exc:
            self.log.error("shard_unreachable", error=str(exc))
            self._lost_for_good()
            return
        self._writer = FrameWriter(writer)
        self.log.info("shard_connected", epoch=self.epoch)
        ready, self._ready = self._ready, []
        for future in ready:
            if not future.done():
                future.set_result(None)
        waiting, self._waiting = self._waiting, []
        for pending in waiting:
            self._send(pending)
        try:
            await read_batches(reader, self._frame)
        except Exception:
            self.log.warning("shard_connection_failed", exc_info=True)
        self._writer.close()
        self._writer = None
        if self.gone:  # closed here: nothing to recover
            return
        try:
            self._lost()
        except Exception:  # a bug here must not leave callers waiting silently
            self.log.error("shard_loss_failed", exc_info=True)
            raise

    async def _reach(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_delay(RECONNECT_S),
            wait=tenacity.wait_exponential(multiplier=0.05, max=1.0),
            retry=tenacity.retry_if_exception_type((OSError, asyncio.TimeoutError)),
            before_sleep=lambda state: self.log.info(
                "shard_reconnecting", attempt=state.attempt_number
            ),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                address = await self._locate()
                reader, writer = await asyncio.open_connection(address.host, address.port)
                try:
                    await authenticate(reader, writer, self._secret, server=False)
                except BaseException:
                    writer.close()
                    raise
                self.epoch = address.epoch
                return reader, writer
        raise AssertionError("unreachable")  # pragma: no cover

    def _frame(self, frame: Any) -> None:
        match frame:
            case Reply():
                pending = self._sent.pop(frame.no, None)
                if pending is not None:
                    self._settle(pending, frame)
            case Events(sub=sub, events=events, closed=closed):
                subscription = self._subs.get(sub)
                if subscription is None:
                    return
                if (events and not subscription.push_many(events)) or closed:
                    self._subs.pop(sub, None)
                    self._sub_numbers.pop(id(subscription), None)
                    self._sub_chats.pop(sub, None)
                    subscription.close()
            case SessionLeft(session_id=session_id, why=why):
                self._sessions.discard(session_id)
                self.router.departures.left(session_id, why)
            case Relay(notice=notice):
                self.router.relayed.arrived(notice)
            case ProvidersChanged(unavailable=unavailable):
                self._providers(unavailable)
            case TicketEnded(ticket=no, outcome=outcome, error=error):
                watched = self._tickets.pop(no, None)
                if watched is None:
                    return
                if error is not None:
                    watched.ticket.fail(error)
                elif outcome is not None:
                    watched.ticket.resolve(outcome)

    def _providers(self, unavailable: frozenset[str]) -> None:
        """The shard's unavailable providers now: the front's health counts a
        provider unavailable while any shard says so (invariant 6)."""
        health = self.router.health
        for provider in unavailable - self._unavailable:
            health.cooling(provider, +1)
        for provider in self._unavailable - unavailable:
            health.cooling(provider, -1)
        self._unavailable = unavailable

    def _settle(self, pending: Pending, reply: Reply) -> None:
        error = reply.error
        if error is not None:
            held = isinstance(error, AgentHostError) and error.code is ErrorCode.LEASE_HELD
            owner = owner_of(error) if held else None  # type: ignore[arg-type]
            if owner is not None and not pending.redirected:
                pending.redirected = True
                if pending.router.follow(pending, owner):
                    return
            pending.future.set_exception(exc_info=exc_info_of(error))
            return
        try:
            value = self._inward(reply.value, pending.target)
        except Exception as exc:  # a reply this front cannot read: the caller hears it
            pending.future.set_exception(exc_info=exc_info_of(exc))
            return
        pending.future.set(value)

    def _inward(self, value: Any, target: Target) -> Any:
        """A reply's stand-ins as the surface expects them (wire.py, invariant 3)."""
        router = self.router
        match value:
            case RemoteSession(session_id=session_id):
                return SessionInfo(session_id, RemoteRef(router, SessionTarget(session_id)))  # type: ignore[arg-type]
            case RemoteChat():
                return chat_info(router, value)
            case [RemoteChat(), *_]:
                return [chat_info(router, info) for info in value]
            case RemoteTicket():
                assert isinstance(target, ChatTarget)
                return self._ticket(value, target)
            case SteerReply(ticket=RemoteTicket() as remote):
                assert isinstance(target, ChatTarget)
                return SteerReply(pending=value.pending, ticket=self._ticket(remote, target))
        return value

    def _ticket(self, remote: RemoteTicket, chat: ChatTarget) -> Ticket:
        ticket = Ticket(remote.pending_id)
        if remote.turn_id is not None:
            ticket.started(remote.turn_id)
        if remote.error is not None:
            ticket.fail(remote.error)
        elif remote.outcome is not None:
            ticket.resolve(remote.outcome)
        else:
            self._tickets[remote.no] = _Watched(ticket, chat)
        return ticket

    # -- a shard lost ----------------------------------------------------------------------
    def _lost(self) -> None:
        """The connection ended (invariants 2 and 3); reconnect if anything waits."""
        self.log.warning(
            "shard_lost", calls=len(self._sent), subscriptions=len(self._subs), epoch=self.epoch
        )
        sent, self._sent = self._sent, {}
        for pending in sent.values():
            if isinstance(pending.message, READS):
                self._waiting.append(pending)
            else:
                pending.future.set_exception(exc_info=exc_info_of(_shard_lost(self.shard_id)))
        for sub, subscription in self._subs.items():
            chat = self._sub_chats.pop(sub)
            lagged = Lagged(session_id=chat.session_id, chat_id=chat.chat_id, dropped=0)
            subscription.push(lagged)
            subscription.close()
        self._subs.clear()
        self._sub_numbers.clear()
        self._sub_chats.clear()
        tickets, self._tickets = self._tickets, {}
        for watched in tickets.values():
            if watched.ticket.turn_id is None:
                watched.ticket.fail(_shard_lost(self.shard_id))
            else:
                self._io.loop.create_task(self._settle_from_state(watched))
        self.router.lost(self)
        self._providers(frozenset())  # a shard that comes back says its own again
        sessions, self._sessions = self._sessions, set()
        for session_id in sessions:  # they left the dead shard's memory with it
            self.router.departures.left(session_id, Departure.FAILED)
        if self._waiting:
            self._connect()

    async def _settle_from_state(self, watched: _Watched) -> None:
        """A send whose shard was lost: its turn as the chat shows it now."""
        future = RuntimeFuture()
        self._send(Pending(watched.chat, GetChatState(), future, self.router))
        done: asyncio.Future[Any] = self._io.loop.create_future()
        future.add_done_callback(lambda f: self._io.call(_copy_to, done, f))
        try:
            state = await asyncio.wait_for(done, RECONNECT_S)
        except BaseException as exc:
            watched.ticket.fail(
                exc if isinstance(exc, AgentHostError) else _shard_lost(self.shard_id)
            )
            return
        if not any(turn.id == watched.ticket.turn_id for turn in state.turns):
            watched.ticket.fail(_shard_lost(self.shard_id))  # still running: not ours to wait
            return
        watched.ticket.resolve(outcome_of(watched.ticket, state))

    def _lost_for_good(self) -> None:
        self.gone = True
        waiting, self._waiting = self._waiting, []
        for pending in waiting:
            pending.future.set_exception(exc_info=exc_info_of(_shard_lost(self.shard_id)))
        self.router.gone(self)

    def close(self) -> None:
        """(The loop's thread.) Stop: what still waits hears HOST_STOPPED."""
        self.gone = True
        if self._connecting is not None:
            self._connecting.cancel()
        if self._writer is not None:
            self._writer.close()
        stopped = AgentHostError(code=ErrorCode.HOST_STOPPED, message="the host has stopped")
        for pending in [*self._sent.values(), *self._waiting]:
            with contextlib.suppress(Exception):
                pending.future.set_exception(exc_info=exc_info_of(stopped))
        self._sent.clear()
        self._waiting.clear()
        for subscription in self._subs.values():
            subscription.close()
        for watched in self._tickets.values():
            watched.ticket.fail(stopped)


def _copy_to(done: "asyncio.Future[Any]", future: RuntimeFuture) -> None:
    if done.done():
        return
    try:
        done.set_result(future.get(timeout=0))
    except BaseException as exc:
        done.set_exception(exc)


def _shard_lost(shard_id: str) -> AgentHostError:
    return AgentHostError(
        code=ErrorCode.SHARD_LOST,
        message=f"shard {shard_id} stopped during the call; what it did is in the store",
    )
