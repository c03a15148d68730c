"""HostActor: the process's session registry.

It creates sessions (resident at once, answered once the session's row is
committed) and adopts sessions the surface loaded from the store (answered
once their provider sessions resumed). A session whose provider failed to
resume is stopped and forgotten in memory; its stored rows stay untouched.
Whenever a session leaves memory (released, collected, disposed, failed to
restore) it tells `services.departures`.
A session that leaves memory releases its lease (a shard's store; other
stores ignore it); one whose writes the store fenced (another shard holds it
now) is dropped from memory at once, writing nothing.
"""

from typing import Any

import attrs
import structlog

from agenthost.actors import collector
from agenthost.actors.context import Departure, Services
from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.hosted import HostedActor
from agenthost.actors.protocol import (
    AdoptSession,
    GetCounters,
    ImportRecord,
    LeasesLost,
    Ref,
    ReleaseIfIdle,
    SessionActivity,
    SessionDisposed,
    SessionReady,
    SessionReleased,
    SessionSaved,
    Write,
)
from agenthost.actors.runtime import handles
from agenthost.actors.session import SessionActor
from agenthost.messages.commands import CreateSession, DisposeSession
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.ids import new_id
from agenthost.messages.state import ChatState, ChatStatus, PendingKind, chat_resource
from agenthost.store.records import (
    ChatRecord,
    DeleteSession,
    ImportSession,
    ReleaseLease,
    SaveSession,
    SessionRecord,
)

log = structlog.get_logger(__name__)


@attrs.frozen
class SessionInfo:
    session_id: str
    ref: Ref


def _chat_states(record: SessionRecord) -> tuple[ChatState, ...]:
    return tuple(
        ChatState(
            resource=chat_resource(chat.chat_id),
            title=chat.title,
            turns=chat.turns,
            steering_messages=tuple(m for m in chat.pending if m.kind is PendingKind.STEERING),
            queued_messages=tuple(m for m in chat.pending if m.kind is PendingKind.QUEUED),
            draft=chat.draft,
            origin=chat.origin,
            status=_flags(chat),
        )
        for chat in record.chats
    )


def _flags(chat: ChatRecord) -> ChatStatus:
    """A stored chat's status: idle (a restored turn is never running), with
    the IsRead and IsArchived flags it had."""
    status = int(ChatStatus.IDLE)
    status |= int(ChatStatus.IS_READ) if chat.read else 0
    status |= int(ChatStatus.IS_ARCHIVED) if chat.archived else 0
    return ChatStatus(status)


def _from_record(record: SessionRecord) -> dict[str, Any]:
    """A stored session's SessionActor arguments."""
    return {
        "session_id": record.session_id,
        "provider": record.provider,
        "chats": _chat_states(record),
        "chat_ids": tuple(chat.chat_id for chat in record.chats),
        "worktree": record.worktree,
        "state": attrs.evolve(record.state, title=record.title),
        "read_only": tuple(chat.chat_id for chat in record.chats if chat.read_only),
        "created_at": record.created_at,
    }


class HostActor(HostedActor):
    def __init__(self, services: Services) -> None:
        super().__init__(services)
        self.counters: dict[str, int] = {
            "released": 0,
            "draft_gc_disposed": 0,
            "disposed": 0,
            "leases_lost": 0,
        }
        self._sessions: dict[str, Ref] = {}  # resident, least recently used first
        self._idle: set[str] = set()  # resident and neither watched nor running a turn
        self._last_activity: dict[str, SessionActivity] = {}
        self._resident_bytes = 0  # the sum of their last reported history_bytes
        self._disposals: dict[str, list[RuntimeFuture]] = {}
        self._waiters: dict[str, list[RuntimeFuture]] = {}
        self._restoring: set[str] = set()

    def _wait_for(self, session_id: str) -> RuntimeFuture:
        future = RuntimeFuture()
        self._waiters.setdefault(session_id, []).append(future)
        return future

    def _answer(self, session_id: str, error: AgentHostError | None) -> None:
        ref = self._sessions.get(session_id)
        for future in self._waiters.pop(session_id, []):
            if error is None and ref is not None:
                future.set(SessionInfo(session_id=session_id, ref=ref))
            else:
                failure = error or AgentHostError(
                    code=ErrorCode.NOT_FOUND, message=f"session {session_id} is gone"
                )
                future.set_exception(exc_info=(type(failure), failure, None))

    @handles(CreateSession)
    def _create(self, message: CreateSession) -> RuntimeFuture:
        if message.provider not in self.services.providers:
            raise AgentHostError(
                code=ErrorCode.INVALID_ARGUMENT,
                message=(
                    f"unknown provider {message.provider!r}; "
                    f"configured: {', '.join(sorted(self.services.providers)) or 'none'}"
                ),
            )
        session_id = message.session_id or new_id()
        if session_id in self._sessions:
            raise AgentHostError(
                code=ErrorCode.INVALID_ARGUMENT, message=f"session {session_id} exists already"
            )
        chat_id = new_id()
        now = self.services.clock.wall_ms()
        self.services.mementos.load(session_id, ())
        self._sessions[session_id] = SessionActor.start(
            self.services,
            session_id=session_id,
            provider=message.provider,
            chats=(ChatState(resource=chat_resource(chat_id), modified_at=now),),
            chat_ids=(chat_id,),
            restored=False,
            worktree=message.worktree,
            created_at=now,
        )
        self.send(
            self.services.store,
            Write(
                op=SaveSession(
                    session_id=session_id,
                    provider=message.provider,
                    title="",
                    created_at=now,
                    chat_ids=(chat_id,),
                    worktree=message.worktree,
                ),
                ack_to=self.actor_ref,
                ack=SessionSaved(session_id=session_id),
            ),
        )
        log.info("session_created", session_id=session_id, provider=message.provider)
        return self._wait_for(session_id)

    @handles(SessionSaved)
    def _saved(self, message: SessionSaved) -> None:
        if message.error is not None:  # not durable: it must not live on in memory
            ref = self._sessions.pop(message.session_id, None)
            if ref is not None:
                ref.stop(block=False)
                self._left(message.session_id, Departure.FAILED)
        self._answer(message.session_id, message.error)
        last = self._last_activity.get(message.session_id)
        if message.error is None and last is not None:
            self._activity(last)  # what it did while it was being created counts now

    @handles(AdoptSession)
    def _adopt(self, message: AdoptSession) -> RuntimeFuture | SessionInfo:
        record = message.record
        ref = self._sessions.get(record.session_id)
        if ref is not None:
            if record.session_id in self._restoring:
                return self._wait_for(record.session_id)
            return SessionInfo(session_id=record.session_id, ref=ref)
        if record.provider not in self.services.providers:
            raise AgentHostError(
                code=ErrorCode.PROVIDER_UNAVAILABLE,
                message=(
                    f"session {record.session_id} uses provider {record.provider!r}, "
                    "which this host does not configure"
                ),
            )
        self.services.mementos.load(record.session_id, record.mementos)
        self._sessions[record.session_id] = SessionActor.start(
            self.services, restored=True, **_from_record(record)
        )
        self._restoring.add(record.session_id)
        log.info("session_restored", session_id=record.session_id, chats=len(record.chats))
        return self._wait_for(record.session_id)

    @handles(ImportRecord)
    def _import(self, message: ImportRecord) -> RuntimeFuture:
        """An imported or forked session: durable, resident, and never an unused draft.
        A chat that comes with its provider's reference resumes that conversation
        (its write reaches the store before the chat's connection reads it back)."""
        record = message.record
        if record.session_id in self._sessions:
            raise AgentHostError(
                code=ErrorCode.INVALID_ARGUMENT,
                message=f"session {record.session_id} exists already",
            )
        if record.provider not in self.services.providers:
            raise AgentHostError(
                code=ErrorCode.PROVIDER_UNAVAILABLE,
                message=f"this host does not configure the provider {record.provider!r}",
            )
        self.services.mementos.load(record.session_id, ())
        self.send(
            self.services.store,
            Write(
                op=ImportSession(record=record),
                ack_to=self.actor_ref,
                ack=SessionSaved(session_id=record.session_id),
            ),
        )
        resumed = tuple(chat.chat_id for chat in record.chats if chat.provider_ref is not None)
        self._sessions[record.session_id] = SessionActor.start(
            self.services, restored=False, used=True, resumed=resumed, **_from_record(record)
        )
        log.info("session_imported", session_id=record.session_id)
        return self._wait_for(record.session_id)

    @handles(DisposeSession)
    def _dispose(self, message: DisposeSession) -> RuntimeFuture:
        """Delete a session: its rows, its actors (so its provider session). The
        caller removed its worktree first (or was refused)."""
        ref = self._sessions.pop(message.session_id, None)
        self._idle.discard(message.session_id)
        self._forget_activity(message.session_id)
        self.counters["disposed"] += 1
        if ref is not None:
            ref.stop(block=False)
        self.services.mementos.forget(message.session_id)
        self._left(message.session_id, Departure.DISPOSED)
        future = RuntimeFuture()
        self._disposals.setdefault(message.session_id, []).append(future)
        self.send(
            self.services.store,
            Write(
                op=DeleteSession(session_id=message.session_id),
                ack_to=self.actor_ref,
                ack=SessionDisposed(session_id=message.session_id),
            ),
        )
        log.info("session_disposed", session_id=message.session_id)
        return future

    @handles(SessionDisposed)
    def _disposed(self, message: SessionDisposed) -> None:
        for future in self._disposals.pop(message.session_id, []):
            if message.error is None:
                future.set(None)
            else:
                future.set_exception(exc_info=(AgentHostError, message.error, None))

    def _left(self, session_id: str, why: Departure) -> None:
        """A session left memory: whoever watches hears it. When it was the last
        one, the collector sweeps (actors/collector.py: what the rare full
        collections left, and the freed heap back to the system)."""
        self.services.departures.left(session_id, why)
        self._forget_activity(session_id)
        if not self._sessions:
            collector.idle()

    def _forget_activity(self, session_id: str) -> None:
        last = self._last_activity.pop(session_id, None)
        if last is not None:
            self._resident_bytes -= last.history_bytes

    @handles(GetCounters)
    def _counters(self, message: GetCounters) -> dict[str, int]:
        return {**self.counters, "resident": len(self._sessions)}

    @handles(SessionReady)
    def _ready(self, message: SessionReady) -> None:
        if message.session_id not in self._restoring:
            if message.error is not None:
                log.warning(
                    "provider_session_open_failed",
                    session_id=message.session_id,
                    error=message.error.message,
                )
            return
        self._restoring.discard(message.session_id)
        last = self._last_activity.get(message.session_id)
        if message.error is None and last is not None:
            self._activity(last)
        if message.error is not None:
            log.warning(
                "session_open_failed", session_id=message.session_id, error=message.error.message
            )
            ref = self._sessions.pop(message.session_id, None)
            if ref is not None:
                ref.stop(block=False)
                self._left(message.session_id, Departure.FAILED)
        self._answer(message.session_id, message.error)

    # -- residency ----------------------------------------------------------------------------
    @handles(SessionActivity)
    def _activity(self, message: SessionActivity) -> None:
        """(Only with a bound on resident sessions.) A session became idle (nobody
        watches it, no turn runs) or busy: the least recently used idle ones
        leave memory past the bound (in sessions, or in their history's bytes).
        Each session releases itself after its own idle period."""
        last = self._last_activity.get(message.session_id)
        self._resident_bytes += message.history_bytes - (0 if last is None else last.history_bytes)
        self._last_activity[message.session_id] = message
        if (
            message.session_id not in self._sessions
            or message.session_id in self._restoring
            or message.session_id in self._waiters
        ):
            return  # a session still being created or resumed counts once it is answered
        self._sessions[message.session_id] = self._sessions.pop(message.session_id)  # used now
        if message.watched or message.active:
            self._idle.discard(message.session_id)
            return
        self._idle.add(message.session_id)
        self._enforce_max_resident()

    def _enforce_max_resident(self) -> None:
        """Past a bound, the least recently used idle sessions leave memory."""
        lifecycle = self.services.lifecycle
        excess = (
            0 if lifecycle.max_resident is None else len(self._sessions) - lifecycle.max_resident
        )
        over = 0
        if lifecycle.max_resident_bytes is not None:
            over = self._resident_bytes - lifecycle.max_resident_bytes
        for session_id in list(self._sessions):
            if excess <= 0 and over <= 0:
                break
            if session_id not in self._idle:
                continue
            last = self._last_activity.get(session_id)
            weight = 0 if last is None else last.history_bytes
            if excess > 0 or weight > 0:  # an empty one frees no bytes
                self._idle.discard(session_id)
                self.send(self._sessions[session_id], ReleaseIfIdle(collect=False))
                excess -= 1
                over -= weight

    @handles(SessionReleased)
    def _released(self, message: SessionReleased) -> None:
        self._sessions.pop(message.session_id, None)
        self._forget_activity(message.session_id)
        self._idle.discard(message.session_id)
        self.services.mementos.forget(message.session_id)
        key = "draft_gc_disposed" if message.disposed else "released"
        self.counters[key] += 1
        if not message.disposed:
            self.send(self.services.store, Write(op=ReleaseLease(session_id=message.session_id)))
        log.info(key, session_id=message.session_id)
        why = Departure.COLLECTED if message.disposed else Departure.RELEASED
        self._left(message.session_id, why)

    @handles(LeasesLost)
    def _leases_lost(self, message: LeasesLost) -> None:
        """Another shard took these sessions: drop them here without a write (the
        store refuses ours); a call on them finds them where they are now."""
        lost = AgentHostError(
            code=ErrorCode.LEASE_LOST, message="the session moved to another shard"
        )
        for session_id in message.session_ids:
            ref = self._sessions.pop(session_id, None)
            self._idle.discard(session_id)
            self._forget_activity(session_id)
            self._restoring.discard(session_id)
            if ref is None:
                continue
            ref.stop(block=False)
            self.services.mementos.forget(session_id)
            self.counters["leases_lost"] += 1
            self._answer(session_id, lost)
            log.warning("session_dropped", session_id=session_id, reason="lease_lost")
            self._left(session_id, Departure.RELEASED)  # its rows stay

    def on_stop(self) -> None:
        stopped = AgentHostError(code=ErrorCode.HOST_STOPPED, message="The host stopped.")
        for waiters in self._waiters.values():
            for future in waiters:
                future.set_exception(exc_info=(AgentHostError, stopped, None))
        self._waiters.clear()
