"""A shard's side: `ShardServer` serves one Host to the fronts of a sharded host.

Belongs here: the loop that runs a shard's half of the wire (shards/wire.py)
over TCP on 127.0.0.1 (or the address given): it answers each Call by
running the surface's own operation (actors/calls.py) against the Host it
serves, so a session released from memory is restored on use here exactly
as in one process, and turns what cannot cross into stand-ins: refs into
targets, tickets into RemoteTickets whose outcomes follow, subscriptions
into numbered streams of event batches.

Invariants:
1. A session is resident here only under this shard's lease: every restore
   goes through `calls.adopt`, whose load takes the lease (a live owner
   elsewhere is answered with LEASE_HELD, which the front follows).
2. A subscription's events leave in batches: what its queue holds when the
   pump wakes leaves in one Events frame, and the frames of one loop pass in
   one write. A slow front is bounded by the subscription's own queue: the
   pump waits for the socket, the queue fills, the subscriber gets Lagged.
3. Nothing here blocks the loop: every wait is an awaited runtime future.
4. Every front connected hears each session that leaves this shard's memory
   (SessionLeft), as an in-process host's watchers do (Host.on_session_left),
   and each notice another front relays through this shard (Relay); and
   which of its providers are unavailable (ProvidersChanged: on connect, and
   on each change).
"""

import asyncio
import contextlib
import itertools
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

from agenthost.actors import calls
from agenthost.actors.calls import ChatHandle, HostCore, SessionHandle, run_async
from agenthost.actors.chat import SteerReply
from agenthost.actors.context import Departure
from agenthost.actors.handles import Subscription, Ticket
from agenthost.actors.host import SessionInfo
from agenthost.actors.protocol import AdoptSession
from agenthost.actors.session import ChatInfo
from agenthost.messages.commands import DisposeSession
from agenthost.providers.base import LoopCalls
from agenthost.shards.wire import (
    AttachRemote,
    Call,
    ChatTarget,
    DetachRemote,
    Events,
    FrameWriter,
    HandshakeError,
    HostTarget,
    ProvidersChanged,
    Relay,
    RemoteChat,
    RemoteSession,
    RemoteTicket,
    Reply,
    SessionLeft,
    SessionTarget,
    StoreTarget,
    SupervisorTarget,
    Target,
    Tell,
    TicketEnded,
    WorktreesTarget,
    authenticate,
    read_batches,
)

log = structlog.get_logger(__name__)

START_TIMEOUT_S = 10.0


class ShardServer:
    """Serves `core` (a started Host's HostCore) on its own loop thread."""

    def __init__(
        self, core: HostCore, secret: bytes, *, bind: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.core = core
        self._secret = secret
        self._bind = bind
        self._port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._sessions: dict[str, SessionHandle] = {}
        self._chats: dict[tuple[str, str], ChatHandle] = {}
        self._peers: set[_Peer] = set()
        self._unwatch: Callable[[], None] = lambda: None
        self.address: tuple[str, int] | None = None

    # -- lifecycle (the caller's thread) ---------------------------------------------
    def start(self) -> tuple[str, int]:
        """Listen; returns the address bound (the port is any free one for 0)."""
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._listen())
            except BaseException as exc:
                failure.append(exc)
                started.set()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(self._close())
            loop.close()

        self._thread = threading.Thread(target=run, name="agenthost-shard", daemon=True)
        self._thread.start()
        if not started.wait(START_TIMEOUT_S):
            raise TimeoutError(f"the shard did not listen within {START_TIMEOUT_S} s")
        if failure:
            raise failure[0]
        assert self.address is not None
        return self.address

    def stop(self, timeout: float = 10.0) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)

    async def _listen(self) -> None:
        loop = asyncio.get_running_loop()

        def left(session_id: str, why: Departure) -> None:  # on the host actor's thread
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(self._left, session_id, why)

        def health(unavailable: frozenset[str]) -> None:  # on the supervisor's thread
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(self._health, unavailable)

        unleft = self.core.services.departures.watch(left)
        unhealth = self.core.services.health.watch(health)

        def unwatch() -> None:
            unleft()
            unhealth()

        self._unwatch = unwatch
        self._server = await asyncio.start_server(self._serve, self._bind, self._port)
        host, port = self._server.sockets[0].getsockname()[:2]
        self.address = (host, port)
        log.info("shard_listening", host=host, port=port)

    def relay(self, relay: Relay, sender: "_Peer") -> None:
        """A front's notice for its fellows: to every other front connected."""
        for peer in self._peers:
            if peer is not sender:
                peer.send(relay)

    def _health(self, unavailable: frozenset[str]) -> None:
        for peer in self._peers:
            peer.send(ProvidersChanged(unavailable=unavailable))

    def _left(self, session_id: str, why: Departure) -> None:
        """A session left this shard's memory: every front hears it (invariant 4)."""
        for peer in self._peers:
            peer.send(SessionLeft(session_id=session_id, why=why))

    async def _close(self) -> None:
        self._unwatch()
        if self._server is not None:
            self._server.close()
        for peer in list(self._peers):
            peer.close()
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await authenticate(reader, writer, self._secret, server=True)
        except HandshakeError as exc:
            log.warning("shard_peer_refused", reason=str(exc))
            writer.close()
            return
        peer = _Peer(self, FrameWriter(writer))
        self._peers.add(peer)
        unavailable = self.core.services.health.unavailable()
        if unavailable:  # what this front cannot know otherwise (invariant 4)
            peer.send(ProvidersChanged(unavailable=unavailable))
        try:
            await read_batches(reader, peer.handle)
        finally:
            self._peers.discard(peer)
            peer.close()

    # -- what a target is here ------------------------------------------------------------
    async def session(self, session_id: str, timeout: float) -> SessionHandle:
        handle = self._sessions.get(session_id)
        if handle is None:
            handle = await run_async(calls.adopt(self.core, session_id), timeout)
            self._sessions[session_id] = handle
        return handle

    async def chat(self, session_id: str, chat_id: str, timeout: float) -> ChatHandle:
        handle = self._chats.get((session_id, chat_id))
        if handle is None:
            session = await self.session(session_id, timeout)
            handle = await run_async(calls.chat(session, chat_id), timeout)
            self._chats[(session_id, chat_id)] = handle
        return handle

    def known(self, info: SessionInfo) -> RemoteSession:
        self._sessions[info.session_id] = SessionHandle(self.core, info.session_id, info.ref)
        return RemoteSession(session_id=info.session_id)

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        for key in [key for key in self._chats if key[0] == session_id]:
            del self._chats[key]

    async def dispatch(self, target: Target, message: Any, timeout: float, peer: "_Peer") -> Any:
        """Run the call here; a value that cannot cross becomes its stand-in."""
        core = self.core
        match target:
            case SessionTarget(session_id=session_id):
                session = await self.session(session_id, timeout)
                value = await run_async(calls.session_call(session, message), timeout)
                return self._chats_out(session, value)
            case ChatTarget(session_id=session_id, chat_id=chat_id):
                chat = await self.chat(session_id, chat_id, timeout)
                if isinstance(message, AttachRemote):
                    await peer.attach(chat, message, timeout)
                    return None
                value = await run_async(calls.chat_call(chat, message), timeout)
                return peer.tickets_out(value)
            case HostTarget():
                if isinstance(message, AdoptSession):  # loaded again here, under the lease
                    session = await self.session(message.record.session_id, timeout)
                    return RemoteSession(session_id=session.session_id)
                value = await run_async(calls.ask(core.host_ref, message), timeout)
                if isinstance(message, DisposeSession):
                    self.forget(message.session_id)
                return self.known(value) if isinstance(value, SessionInfo) else value
            case StoreTarget():
                return await run_async(calls.ask(core.store_ref, message), timeout)
            case WorktreesTarget():
                assert core.services.worktrees is not None
                return await run_async(calls.ask(core.services.worktrees, message), timeout)
            case SupervisorTarget():
                assert core.services.supervisor is not None
                return await run_async(calls.ask(core.services.supervisor, message), timeout)
        raise TypeError(f"unknown target {target!r}")

    def _chats_out(self, session: SessionHandle, value: Any) -> Any:
        if isinstance(value, ChatInfo):
            return self._chat_out(session, value)
        if isinstance(value, (list, tuple)) and value and isinstance(value[0], ChatInfo):
            return [self._chat_out(session, info) for info in value]
        return value

    def _chat_out(self, session: SessionHandle, info: ChatInfo) -> RemoteChat:
        self._chats[(session.session_id, info.chat_id)] = ChatHandle(
            session, info.chat_id, info.ref
        )
        return RemoteChat(session_id=session.session_id, chat_id=info.chat_id)


class _Peer:
    """One front's connection (the shard's loop thread only)."""

    def __init__(self, server: ShardServer, writer: FrameWriter) -> None:
        self._server = server
        self._writer = writer
        self._loop = asyncio.get_running_loop()
        self._calls = LoopCalls.of(self._loop)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._subs: dict[int, Subscription] = {}
        self._tickets = itertools.count(1)

    def send(self, frame: Any) -> None:
        self._writer.send(frame)

    def handle(self, frame: Any) -> None:
        match frame:
            case Call():
                self._spawn(self._answer(frame))
            case Tell(message=Relay() as relay):
                self._server.relay(relay, self)
            case Tell(message=DetachRemote(sub=sub)):
                subscription = self._subs.pop(sub, None)
                if subscription is not None:
                    subscription.close()
            case Tell(target=target, message=message):
                self._spawn(self._tell(target, message))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = self._loop.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, call: Call) -> None:
        try:
            value = await self._server.dispatch(call.target, call.message, call.timeout, self)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self._writer.send(Reply(no=call.no, error=exc))
            return
        self._writer.send(Reply(no=call.no, value=value))

    async def _tell(self, target: Target, message: Any) -> None:
        if not isinstance(target, ChatTarget):
            return
        with contextlib.suppress(Exception):  # a tell has nobody to answer
            chat = await self._server.chat(target.session_id, target.chat_id, 10.0)
            chat.ref.tell(message)

    # -- tickets and subscriptions ---------------------------------------------------------
    def tickets_out(self, value: Any) -> Any:
        if isinstance(value, Ticket):
            return self._ticket_out(value)
        if isinstance(value, SteerReply) and value.ticket is not None:
            return SteerReply(pending=value.pending, ticket=self._ticket_out(value.ticket))  # type: ignore[arg-type]
        return value

    def _ticket_out(self, ticket: Ticket) -> RemoteTicket:
        no = next(self._tickets)
        if ticket.outcome.done():
            try:
                outcome = ticket.outcome.get(timeout=0)
            except BaseException as exc:
                return RemoteTicket(
                    no=no, pending_id=ticket.pending_id, turn_id=ticket.turn_id, error=exc
                )
            return RemoteTicket(
                no=no, pending_id=ticket.pending_id, turn_id=ticket.turn_id, outcome=outcome
            )

        def ended(future: Any) -> None:  # on the thread that set it
            with contextlib.suppress(RuntimeError):  # the loop closed
                self._calls.call(self._ticket_ended, no, future)

        ticket.outcome.add_done_callback(ended)
        return RemoteTicket(no=no, pending_id=ticket.pending_id, turn_id=ticket.turn_id)

    def _ticket_ended(self, no: int, future: Any) -> None:
        try:
            self._writer.send(TicketEnded(ticket=no, outcome=future.get(timeout=0)))
        except BaseException as exc:
            self._writer.send(TicketEnded(ticket=no, error=exc))

    async def attach(self, chat: ChatHandle, message: AttachRemote, timeout: float) -> None:
        subscription = await run_async(calls.subscribe(chat, message.maxsize), timeout)
        self._subs[message.sub] = subscription
        self._spawn(self._pump(message.sub, subscription))

    async def _pump(self, sub: int, subscription: Subscription) -> None:
        """Forward the subscription's events, a batch per wake-up (invariant 2)."""
        async for event in subscription:
            events = [event]
            while (more := subscription.next_nowait()) is not None:
                events.append(more)
            self._writer.send(Events(sub=sub, events=tuple(events)))
            await self._writer.drain()
        if self._subs.pop(sub, None) is not None or subscription.closed:
            self._writer.send(Events(sub=sub, events=(), closed=True))

    def close(self) -> None:
        self._writer.close()
        for subscription in self._subs.values():
            subscription.close()
        self._subs.clear()
        for task in self._tasks:
            task.cancel()
