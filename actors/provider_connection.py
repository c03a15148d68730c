"""ProviderConnectionActor: the host's side of one provider session.

It hands work to its adapter on the provider kind's event loop with
`run_coroutine_threadsafe` and gets results back as messages (`CallDone`),
so it never blocks. Streamed provider events go straight to the owner (the
chat's turn tracker), tagged with this connection's generation, so events of
a dead connection are recognised and dropped. They go as bursts: the events
an adapter emits in one pass of the loop travel in one message, in order,
and every burst leaves before the result of a call that ended after it. A
crash, from the adapter or from a call, is reported once to the supervisor;
then the actor stops.

Provider references: what the adapter reports it needs to resume the chat's
conversation (ProviderRefReported) is written with the chat, and a resume
first reads it back from the store (LoadProviderRef, answered as a message)
and hands it to the adapter in ProviderResume.
"""

import asyncio
from collections.abc import Coroutine
from typing import Any

import structlog

from agenthost.actors.context import Services
from agenthost.actors.hosted import HostedActor
from agenthost.actors.protocol import (
    CallDone,
    ConnectionDied,
    ConnectionOpenFailed,
    ConnectionReady,
    FromProvider,
    LoadProviderRef,
    OpenSession,
    ProviderDiagnose,
    ProviderDiagnosed,
    ProviderRefLoaded,
    Ref,
    ResumeFellBack,
    Write,
)
from agenthost.actors.runtime import handles
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.provider import (
    CallSettled,
    ConnectionFailed,
    ProviderAnswer,
    ProviderCancel,
    ProviderEvent,
    ProviderRefReported,
    ProviderResume,
    ProviderSend,
    ProviderSteer,
    ProviderWithdraw,
    Settlement,
    SteerAnswered,
    WithdrawAnswered,
)
from agenthost.providers.base import (
    ProviderCallError,
    ProviderCrashed,
    ProviderResumeError,
    resume_with_retry,
)
from agenthost.store.records import SaveProviderRef

log = structlog.get_logger(__name__)


class ProviderConnectionActor(HostedActor):
    def __init__(
        self,
        services: Services,
        *,
        session_id: str,
        chat_id: str,
        provider: str,
        owner: Ref,
        steering: Ref,
        generation: int,
        resume: bool,
    ) -> None:
        super().__init__(services)
        self.steering = steering
        self.session_id = session_id
        self.chat_id = chat_id
        self.provider = provider
        self.owner = owner
        self.generation = generation
        self.resume = resume
        self._loop = services.loops[provider]
        self._burst = self._loop.burst(self._deliver)
        self._adapter = services.providers[provider].open_session(
            session_id, chat_id, self._burst.emit
        )
        self._failed = False
        self._lost = False  # the loop thread's: a ConnectionFailed or a crashed call went by
        self._log = log.bind(
            session_id=session_id, chat_id=chat_id, provider=provider, generation=generation
        )

    def on_start(self) -> None:
        if self.resume:  # with the reference stored with the chat, once the store answers
            self.send(
                self.services.store, LoadProviderRef(chat_id=self.chat_id, reply_to=self.actor_ref)
            )
        else:
            self._submit(OpenSession(), self._adapter.start())

    @handles(ProviderRefLoaded)
    def _ref_loaded(self, message: ProviderRefLoaded) -> None:
        if self._failed:
            return
        if message.error is not None:
            self._opened(ProviderCallError(message.error, taken=False))
            return
        resume = ProviderResume(
            session_id=self.session_id, chat_id=self.chat_id, provider_ref=message.provider_ref
        )
        self._submit(
            OpenSession(), resume_with_retry(self._adapter, resume, self.services.resume_retry)
        )

    # -- the loop thread's side -------------------------------------------------------
    def _deliver(self, events: tuple[ProviderEvent, ...]) -> None:
        """A burst from the adapter (the loop thread's `Burst`): never blocks."""
        if not self._burst.failed and ProviderRefReported not in map(type, events):
            self.send(self.owner, FromProvider(generation=self.generation, events=events))
            return  # the common case: every event is the owner's
        for event in events:
            if isinstance(event, ProviderRefReported):
                self._log.info("provider_ref_reported", size=len(event.provider_ref))
                op = SaveProviderRef(chat_id=self.chat_id, provider_ref=event.provider_ref)
                self.send(self.services.store, Write(op=op))
        owned = tuple(
            e for e in events if not isinstance(e, ConnectionFailed | ProviderRefReported)
        )
        if any(isinstance(e, ConnectionFailed) for e in events):
            self._lost = True
        if owned:
            self.send(self.owner, FromProvider(generation=self.generation, events=owned))
        for event in events:
            if isinstance(event, ConnectionFailed):
                self.send(self.actor_ref, event)

    def _submit(self, call: object, coro: Coroutine[Any, Any, Any]) -> None:
        def done(f: Any) -> None:
            if not f.cancelled() and isinstance(f.exception(), ProviderCrashed):
                self._lost = True  # before the actor hears of it: later results mean nothing
            if isinstance(call, ProviderSend) and self._rides(f):
                # A send that went through rides the burst behind what it emitted:
                # one message to the owner instead of a hop through this actor.
                self._burst.emit(_resolved(call.turn_id, f.result()))
                self._burst.flush()
                return
            self._burst.flush()  # what the call emitted reaches the owner before its result
            if f.cancelled():
                exc: BaseException | None = asyncio.CancelledError()
                result = None
            else:
                exc = f.exception()
                result = None if exc is not None else f.result()
            self.send(self.actor_ref, CallDone(call=call, result=result, exception=exc))

        self._loop.call(coro, done)  # on the loop thread, as the call ends

    def _rides(self, call: Any) -> bool:
        """Whether a finished send's result can ride the burst: it went through,
        this is the loop thread, and the connection is not lost (a lost one's
        results mean nothing: they take the hop to `_done`, which drops them)."""
        return (
            self._burst.on_loop()
            and not (self._failed or self._lost or self._burst.failed)
            and not call.cancelled()
            and call.exception() is None
        )

    # -- commands from the tracker ---------------------------------------------------------
    @handles(ProviderSend)
    def _send(self, message: ProviderSend) -> None:
        self._submit(message, self._adapter.send(message))

    @handles(ProviderCancel)
    def _cancel(self, message: ProviderCancel) -> None:
        self._submit(message, self._adapter.cancel(message))

    @handles(ProviderSteer)
    def _steer(self, message: ProviderSteer) -> None:
        self._submit(message, self._adapter.steer(message))

    @handles(ProviderAnswer)
    def _answer(self, message: ProviderAnswer) -> None:
        self._submit(message, self._adapter.answer(message))

    @handles(ProviderDiagnose)
    def _diagnose(self, message: ProviderDiagnose) -> None:
        adapter = self._adapter

        async def snapshot() -> dict[str, Any]:
            return adapter.turn_diagnostic_snapshot(message.turn_key)

        self._submit(message, snapshot())

    @handles(ProviderWithdraw)
    def _withdraw(self, message: ProviderWithdraw) -> None:
        self._submit(message, self._adapter.withdraw(message))

    # -- results -----------------------------------------------------------------------------
    @handles(CallDone)
    def _done(self, message: CallDone) -> None:
        if self._failed:
            return  # a dead connection's results mean nothing; the supervisor has it
        exc = message.exception
        if isinstance(exc, ProviderCrashed):
            self._fail(exc.error)
            return
        result = message.result
        match message.call:
            case OpenSession():
                self._opened(exc)
            case ProviderSend(turn_id=turn_id):
                self._settled(turn_id, result, exc)
            case ProviderSteer(pending_id=pending_id):
                self._to(self.steering, _steer_answer(pending_id, result, exc))
            case ProviderDiagnose(turn_key=turn_key):
                details = result if isinstance(result, dict) else {}
                self.send(
                    self.owner,
                    ProviderDiagnosed(
                        generation=self.generation,
                        turn_key=turn_key,
                        details=tuple(sorted((str(k), str(v)) for k, v in details.items())),
                    ),
                )
            case ProviderWithdraw(pending_id=pending_id):
                if exc is not None:
                    self._log.warning("withdraw_failed", pending_id=pending_id, exc_info=exc)
                removed = exc is None and bool(result)
                self._to(self.steering, WithdrawAnswered(pending_id=pending_id, removed=removed))
            case _ if exc is not None and not isinstance(exc, asyncio.CancelledError):
                self._log.warning(
                    "provider_call_failed", call=type(message.call).__name__, exc_info=exc
                )

    def _opened(self, exc: BaseException | None) -> None:
        if isinstance(exc, ProviderResumeError) and exc.no_history:
            self._log.warning("resume_fell_back", reason=exc.message)
            self.send(self.services.supervisor, ResumeFellBack(session_id=self.session_id))
            exc = None
        if exc is None:
            self.send(
                self.owner,
                ConnectionReady(
                    ref=self.actor_ref,
                    generation=self.generation,
                    capabilities=self._adapter.capabilities,
                ),
            )
            return
        error = _as_error(exc, "could not open the provider session")
        self._log.warning("provider_open_failed", error=error.message)
        self.send(self.owner, ConnectionOpenFailed(generation=self.generation, error=error))
        if self.resume and self.generation == 0:
            # Restoring a session: the caller of open_session hears the error and
            # the stored session stays as it is, to be opened again later.
            self._failed = True
            self.stop()
        else:
            self._fail(error)  # the supervisor restarts it, as any failed connection

    def _settled(self, turn_id: str, result: Any, exc: BaseException | None) -> None:
        if exc is None:
            settled = _resolved(turn_id, result)
        elif isinstance(exc, ProviderCallError):
            settled = CallSettled(
                turn_id=turn_id,
                settlement=Settlement.REJECTED if exc.taken else Settlement.NOT_STARTED,
                error=exc.error,
            )
        else:
            if not isinstance(exc, asyncio.CancelledError):
                self._log.warning("provider_send_failed", turn_id=turn_id, exc_info=exc)
            settled = CallSettled(
                turn_id=turn_id,
                settlement=Settlement.REJECTED,
                error=_as_error(exc, "the provider call failed"),
            )
        self._to(self.owner, settled)

    def _to(self, ref: Ref, event: ProviderEvent) -> None:
        self.send(ref, FromProvider(generation=self.generation, events=(event,)))

    @handles(ConnectionFailed)
    def _connection_failed(self, message: ConnectionFailed) -> None:
        self._fail(message.error)

    def _fail(self, error: AgentHostError) -> None:
        if self._failed:
            return
        self._failed = True
        self._log.warning("provider_connection_failed", error=error.message)
        self.send(
            self.services.supervisor,
            ConnectionDied(
                session_id=self.session_id,
                chat_id=self.chat_id,
                generation=self.generation,
                error=error,
            ),
        )
        self.stop()

    def on_stop(self) -> None:
        future = self._loop.submit(self._adapter.dispose())
        future.add_done_callback(lambda f: f.cancelled() or f.exception())
        # What the adapter emits while it closes still reaches the owner; then the
        # burst lets go of this actor (its bound `_deliver`: a reference cycle).
        future.add_done_callback(self._burst.detach)


def _resolved(turn_id: str, provider_message_id: Any) -> CallSettled:
    return CallSettled(
        turn_id=turn_id, settlement=Settlement.RESOLVED, provider_message_id=provider_message_id
    )


def _steer_answer(pending_id: str, result: Any, exc: BaseException | None) -> SteerAnswered:
    if exc is None:
        return SteerAnswered(pending_id=pending_id, provider_message_id=result)
    return SteerAnswered(
        pending_id=pending_id,
        error=_as_error(exc, "the provider refused the steering message"),
        no_active_turn=isinstance(exc, ProviderCallError) and exc.no_active_turn,
    )


def _as_error(exc: BaseException, context: str) -> AgentHostError:
    if isinstance(exc, ProviderCallError):
        return exc.error
    if isinstance(exc, ProviderResumeError):
        return AgentHostError(
            code=ErrorCode.PROVIDER_ERROR, message=f"{context}: {exc.code} {exc.message}"
        )
    if isinstance(exc, asyncio.CancelledError):
        return AgentHostError(code=ErrorCode.PROVIDER_ERROR, message=f"{context}: cancelled")
    return AgentHostError(code=ErrorCode.PROVIDER_ERROR, message=f"{context}: {exc}")
