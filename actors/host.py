"""HostActor: the process's session registry.

It creates sessions (resident at once, answered once the session's row is
committed) and adopts sessions the surface loaded from the store (answered
once their provider sessions resumed). A session whose provider failed to
resume is stopped and forgotten in memory; its stored rows stay untouched.
"""

import uuid

import attrs
import structlog

from agenthost.actors.context import Services
from agenthost.actors.hosted import HostedActor
from agenthost.actors.protocol import AdoptSession, Ref, SessionReady, SessionSaved, Write
from agenthost.actors.runtime import RuntimeFuture, handles
from agenthost.actors.session import SessionActor
from agenthost.messages.commands import CreateSession
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.state import ChatState, PendingKind, chat_resource
from agenthost.store.records import SaveSession

log = structlog.get_logger(__name__)


@attrs.frozen
class SessionInfo:
    session_id: str
    ref: Ref


class HostActor(HostedActor):
    def __init__(self, services: Services) -> None:
        super().__init__(services)
        self._sessions: dict[str, Ref] = {}
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
        session_id = uuid.uuid4().hex
        chat_id = uuid.uuid4().hex
        now = self.services.clock.wall_ms()
        self._sessions[session_id] = SessionActor.start(
            self.services,
            session_id=session_id,
            provider=message.provider,
            chats=(ChatState(resource=chat_resource(chat_id), modified_at=now),),
            chat_ids=(chat_id,),
            restored=False,
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
                ),
                ack_to=self.actor_ref,
                ack=SessionSaved(session_id=session_id),
            ),
        )
        log.info("session_created", session_id=session_id, provider=message.provider)
        return self._wait_for(session_id)

    @handles(SessionSaved)
    def _saved(self, message: SessionSaved) -> None:
        self._answer(message.session_id, None)

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
        chats = tuple(
            ChatState(
                resource=chat_resource(chat.chat_id),
                title=chat.title,
                turns=chat.turns,
                steering_messages=tuple(m for m in chat.pending if m.kind is PendingKind.STEERING),
                queued_messages=tuple(m for m in chat.pending if m.kind is PendingKind.QUEUED),
                draft=chat.draft,
                origin=chat.origin,
            )
            for chat in record.chats
        )
        self._sessions[record.session_id] = SessionActor.start(
            self.services,
            session_id=record.session_id,
            provider=record.provider,
            chats=chats,
            chat_ids=tuple(chat.chat_id for chat in record.chats),
            restored=True,
        )
        self._restoring.add(record.session_id)
        log.info("session_restored", session_id=record.session_id, chats=len(chats))
        return self._wait_for(record.session_id)

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
        if message.error is not None:
            log.warning(
                "session_open_failed", session_id=message.session_id, error=message.error.message
            )
            ref = self._sessions.pop(message.session_id, None)
            if ref is not None:
                ref.stop(block=False)
        self._answer(message.session_id, message.error)

    def on_stop(self) -> None:
        stopped = AgentHostError(code=ErrorCode.HOST_STOPPED, message="The host stopped.")
        for waiters in self._waiters.values():
            for future in waiters:
                future.set_exception(exc_info=(AgentHostError, stopped, None))
        self._waiters.clear()
