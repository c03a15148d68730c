"""ChatCore: one chat's state, changed only through the pure reducer.

What a chat holds (turns, the active turn, steering and queued messages)
and how it changes: each action is reduced, persisted through the store
writes the chat queues, and published through its Publisher
(actors/publisher.py: a turn's end reaches subscribers, and resolves its
send, only once the store committed it; a command's reply once its effect
is published, so a caller reads its own writes). Turns start here (after
admission) and end here (from the turn tracker). What the chat hears from
its clients and its queue drain is ChatActor's (actors/chat.py).

Bursts. The tracker sends what it queued for the chat as one message
(ApplyActions, or a ChatBatch of messages handled in order); a burst of
actions is published with one push per subscriber. The store writes the
chat queues leave as one WriteMany when it flushes (see `Actor.flush`), and
before anything else the chat sends, so the store sees them in the order
the chat made them, ahead of whatever they caused elsewhere.
"""

from collections import deque
from collections.abc import Sequence
from typing import Any

import attrs
import structlog

from agenthost.actors.admission import Admission, Origin, Verdict
from agenthost.actors.context import Services
from agenthost.actors.contributions import Accept, ChatKey, Handled, Reject, TurnEndReason
from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.handles import Subscription, Ticket
from agenthost.actors.hosted import HostedActor
from agenthost.actors.protocol import (
    BeginTurn,
    ChatBatch,
    ChatReady,
    ChatStatusChanged,
    Committed,
    DrainNow,
    Ref,
    SessionStateChanged,
    SubscribersChanged,
    UseTracker,
)
from agenthost.actors.publisher import Publication, Publisher, StoreWrites
from agenthost.actors.queue_drain import QueueDrainActor
from agenthost.actors.queue_policy import STEERING
from agenthost.actors.runtime import Actor, handles
from agenthost.actors.turn_tracker import TurnTrackerActor
from agenthost.messages.commands import (
    GetChatState,
    OutcomeState,
    TurnOutcome,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    ChatEvent,
    ChatSnapshot,
    PendingMessageAdded,
    PendingMessageRemoved,
    QueuedMessagesReordered,
    RemovalReason,
    TurnStarted,
)
from agenthost.messages.ids import new_id
from agenthost.messages.reducers import reduce_chat
from agenthost.messages.reduction import replace
from agenthost.messages.sizes import value_bytes
from agenthost.messages.state import (
    ChatOriginKind,
    ChatState,
    ChatStatus,
    PendingKind,
    PendingMessage,
    SessionState,
    Turn,
    UserMessage,
    with_attachments,
)
from agenthost.store.records import (
    DeletePending,
    SavePending,
    SaveTurnStarted,
    StoreOp,
)

log = structlog.get_logger(__name__)

MODEL_KEY = "model"  # a session config value: the model its turns ask for
HOST_STOPPED = AgentHostError(
    code=ErrorCode.HOST_STOPPED, message="The host stopped before this turn ended."
)


@attrs.frozen
class Attach:
    """Add a subscriber; the reply is its snapshot (already queued to it)."""

    subscription: Subscription


@attrs.frozen
class Detach:
    subscription: Subscription


@attrs.define
class _Reported:
    """The chat's status, turn count and subscribers as the session last heard
    them, and when to tell it again.

    The session hears subscribers as they change, but a status change only
    when it has to: every one once it asked (`wanted`: it was asked for its
    summary, or the host bounds resident sessions); otherwise only the chat's
    first turn (`first_turn`: a draft is used from then on). Idle release asks
    the chat itself how long it has been idle (`idle_since`, on the clock), so
    a turn costs the session no message of its own."""

    status: ChatStatus
    turns: int
    history_bytes: int = 0  # counted only while the host bounds them (Lifecycle)
    subscribers: int = 0
    wanted: bool = False
    first_turn: bool = False
    idle_since: float = 0.0


@attrs.define
class _Waiting:
    """Callers waiting on the chat: queued sends (tickets by pending id), steering
    removals, answers, and cancels (until their turn's end is published)."""

    tickets: dict[str, Ticket] = attrs.field(factory=dict)
    removals: dict[str, list[RuntimeFuture]] = attrs.field(factory=dict)
    answers: dict[str, deque[RuntimeFuture]] = attrs.field(factory=dict)
    cancels: dict[str, list[RuntimeFuture]] = attrs.field(factory=dict)

    def any(self) -> bool:
        return bool(self.tickets or self.removals or self.answers or self.cancels)


def _committed(seq: int) -> Committed:
    return Committed(seq=seq)


# A chat's state is kept in few attributes (with at most 29, CPython shares
# the attribute names among all chats' __dict__s: 1.3 KB less per resident chat).
class ChatCore(HostedActor):
    def __init__(
        self,
        services: Services,
        *,
        session_id: str,
        chat_id: str,
        provider: str,
        state: ChatState,
        session: Ref,
        resume: bool,
        client_tools: tuple[tuple[str, str], ...] = (),
        session_state: SessionState | None = None,
        default: bool = True,
        read_only: bool = False,
        report_status: bool = False,
    ) -> None:
        super().__init__(services)
        self.session_id = session_id
        self.chat_id = chat_id
        self.provider = provider
        self.session = session
        self.resume = resume
        self._client_tools = client_tools
        self._state = state
        self._publisher = Publisher(state)
        self._writes = StoreWrites()
        self._waiting = _Waiting()
        self._reported = _Reported(
            status=state.status,
            turns=len(state.turns),
            history_bytes=self._history_bytes(state.turns),
            wanted=report_status or services.lifecycle.bounded,
            first_turn=not state.turns,
            idle_since=services.clock.now(),
        )
        self._admission = Admission(
            services.contributions,
            services.mementos,
            ChatKey(session_id=session_id, chat_id=chat_id),
            session=session_state or SessionState(),
            default=default,
            read_only=read_only,
            driven=state.origin.kind is ChatOriginKind.TOOL,
        )
        # While the session decides to leave memory: client commands held meanwhile.
        self._closing: list[tuple[Any, RuntimeFuture]] | None = None
        self._turn_seq = len(state.turns)
        # A pending message is stored after every other (a position past each one
        # stored): removals leave gaps, so the list's length is not one.
        self._next_position = 0
        self._tracker: Ref | None = None
        self._drain: Ref | None = None
        self._log = log.bind(session_id=session_id, chat_id=chat_id)

    @property
    def driven(self) -> bool:
        """A subagent's chat: its turns come from its parent's provider stream."""
        return self._admission.driven

    def on_start(self) -> None:
        self.services.directory.register(f"{self.session_id}/{self.chat_id}", self.actor_ref)
        self._hydrate()
        if self.driven:
            self.send(self.session, ChatReady(chat_id=self.chat_id))
            return
        self._drain = QueueDrainActor.start(
            self.services,
            session_id=self.session_id,
            chat_id=self.chat_id,
            chat=self.actor_ref,
            queue_held=bool(self._state.pending),  # a restored queue waits for a success
        )
        self._tracker = TurnTrackerActor.start(
            self.services,
            session_id=self.session_id,
            chat_id=self.chat_id,
            provider=self.provider,
            chat=self.actor_ref,
            drain=self._drain,
            resume=self.resume,
            client_tools=self._client_tools,
        )
        self.send(self._drain, UseTracker(tracker=self._tracker))
        # Restored steering was meant for a turn that died with the process: it
        # heads the queue, which waits (as after any failed turn) for a success.
        restored = self._state.steering_messages
        for pending in reversed(restored):
            self._to_queue(pending)
        if self._state.queued_messages and not restored:
            self._save_queue_positions()  # stored with gaps, perhaps: new ones go after

    def _hydrate(self) -> None:
        """Contributions restore what they keep, before the chat is listed."""
        state = self._state
        contributions = self._admission.dispatcher
        key = self._admission.chat
        turns = contributions.hydrate_turns(state.turns, key)
        title, draft = contributions.hydrate_chat(state.title, state.draft, key)
        self._state = attrs.evolve(state, turns=turns, title=title, draft=draft)
        self._publisher.published = self._state

    def on_stop(self) -> None:
        self.services.directory.unregister(f"{self.session_id}/{self.chat_id}", self.actor_ref)
        for child in (self._tracker, self._drain):
            if child is not None and child.is_alive():
                child.stop(block=False)
        for ticket in self._waiting.tickets.values():
            ticket.fail(HOST_STOPPED)
        waiting = self._waiting
        for futures in (
            *waiting.removals.values(),
            *waiting.answers.values(),
            *waiting.cancels.values(),
        ):
            for future in futures:
                future.set_exception(exc_info=(AgentHostError, HOST_STOPPED, None))
        self._publisher.stop(HOST_STOPPED)
        released = AgentHostError(
            code=ErrorCode.HOST_STOPPED, message="The session left memory; it is restored on use."
        )
        for _, future in self._closing or []:
            future.set_exception(exc_info=(AgentHostError, released, None))

    # -- state, persistence, publication -----------------------------------------------------
    def _apply(
        self,
        action: ChatEvent,
        after_write: int = 0,
        ticket: Ticket | None = None,
        origin: Origin | None = None,
        publish: bool = True,
    ) -> None:
        """Reduce `action`; publish it (once durable, after `after_write`) unless
        the caller publishes a whole burst itself."""
        before = self._state
        self._state = reduce_chat(before, action, self.services.clock.wall_ms())
        if after_write or ticket is not None:
            self._publisher.add(
                Publication(after_write=after_write, state=self._state, event=action, ticket=ticket)
            )
        else:
            self._publisher.event(action, self._state)
        if publish:
            self._publish_ready()
        self._admission.dispatched(action, before, self._state, origin)

    def _reply(self, value: Any) -> Any:
        """A command's reply (an exception is raised to the caller): once what it
        changed is published, so the caller reads its own writes."""
        reply = self._publisher.reply_when_published(value, self._state)
        if reply is value and isinstance(value, BaseException):
            raise value
        return reply

    def _write(self, op: StoreOp, gate: bool = False) -> int:
        return self._writes.write(op, gate)

    def flush(self) -> None:
        """The store gets the writes queued so far as one WriteMany."""
        if not self._writes.ops:  # (the common case: it runs after every message)
            return
        writes = self._writes.take(self.actor_ref, _committed)
        if writes is not None:
            Actor.send(self.services.store, writes)

    def send(self, ref: Ref | None, message: Any) -> bool:  # type: ignore[override]
        """Tell `ref`, after the writes queued so far (they stay ahead of it)."""
        self.flush()
        return Actor.send(ref, message)

    def _publish_ready(self) -> None:
        """Publish what the store has made durable; tell the session what changed."""
        if self._publisher.publish_ready():
            self._report_subscribers()
        published = self._publisher.published
        reported = self._reported
        if published.status == reported.status and len(published.turns) == reported.turns:
            return
        reported.status = published.status
        if len(published.turns) > reported.turns:
            reported.history_bytes += self._history_bytes(published.turns[reported.turns :])
        elif len(published.turns) < reported.turns:  # truncated
            reported.history_bytes = self._history_bytes(published.turns)
        reported.turns = len(published.turns)
        running = published.active_turn is not None
        if not running and not published.steering_messages:
            reported.idle_since = self.services.clock.now()
        if reported.wanted or (reported.first_turn and running):
            reported.first_turn = reported.first_turn and not running
            self._report_status()

    def _history_bytes(self, turns: Sequence[Turn]) -> int:
        """What these turns hold in text, while the host bounds it (else 0)."""
        if self.services.lifecycle.max_resident_bytes is None:
            return 0
        return sum(value_bytes(turn) for turn in turns)

    def _report_status(self) -> None:
        reported = self._reported
        self.send(
            self.session,
            ChatStatusChanged(
                chat_id=self.chat_id,
                status=int(reported.status),
                turns=reported.turns,
                history_bytes=reported.history_bytes,
            ),
        )

    @handles(Committed)
    def _committed_ack(self, message: Committed) -> None:
        if message.error is not None:
            # Not durable: those waiting on a turn's end hear it, and the log says
            # what was lost.
            self._log.error("store_write_lost", seq=message.seq, error=message.error.message)
        self._publisher.committed_upto(message.seq, message.error)
        self._publish_ready()

    def _stamp(self, event: Any) -> Any:
        return replace(event, session_id=self.session_id, chat_id=self.chat_id)

    def _pending(self, pending_id: str) -> PendingMessage | None:
        return next((m for m in self._state.pending if m.id == pending_id), None)

    def _busy(self) -> bool:
        """A turn runs, or steering waits that the provider may start a turn for."""
        return self._state.active_turn is not None or bool(self._state.steering_messages)

    # -- pending messages ------------------------------------------------------------------
    def _add_pending(
        self,
        kind: PendingKind,
        message: UserMessage,
        origin: Origin,
        pending_id: str | None,
        turn_id: str | None = None,
    ) -> PendingMessage:
        pending = PendingMessage(
            id=pending_id or new_id(), kind=kind, message=message, turn_id=turn_id
        )
        self._apply(self._stamp(PendingMessageAdded(pending=pending)), origin=origin)
        self._write(
            SavePending(
                session_id=self.session_id,
                chat_id=self.chat_id,
                pending=pending,
                position=self._next_position,
            )
        )
        self._next_position += 1
        return pending

    def _remove_pending(
        self, pending: PendingMessage, reason: RemovalReason, origin: Origin | None = None
    ) -> None:
        self._apply(
            self._stamp(
                PendingMessageRemoved(kind=pending.kind, pending_id=pending.id, reason=reason)
            ),
            origin=origin,
        )
        self._write(DeletePending(chat_id=self.chat_id, pending_id=pending.id))

    def _save_queue_positions(self) -> None:
        """The queue's stored order made its order now (positions 0 to n - 1)."""
        queued = self._state.queued_messages
        for position, pending in enumerate(queued):
            self._write(
                SavePending(
                    session_id=self.session_id,
                    chat_id=self.chat_id,
                    pending=pending,
                    position=position,
                )
            )
        self._next_position = max(self._next_position, len(queued))

    def _to_queue(self, pending: PendingMessage) -> None:
        """A steering message the provider cannot take becomes the head of the queue."""
        self._apply(
            self._stamp(
                PendingMessageRemoved(
                    kind=PendingKind.STEERING,
                    pending_id=pending.id,
                    reason=RemovalReason.REQUEUED,
                )
            )
        )
        # Its message says it was steering: its turn is a steering turn (queue_policy rule 5).
        message = attrs.evolve(pending.message, origin=STEERING)
        queued = attrs.evolve(pending, kind=PendingKind.QUEUED, message=message)
        self._apply(self._stamp(PendingMessageAdded(pending=queued)))
        self._apply(self._stamp(QueuedMessagesReordered(order=(queued.id,))))
        self._save_queue_positions()

    def _drain_point(self) -> None:
        """The chat may be idle with messages pending: the queue drain decides."""
        if self._state.active_turn is None and self._state.pending:
            self.send(self._drain, DrainNow(state=self._state))

    # -- turns -------------------------------------------------------------------------------
    def _start_turn(
        self,
        message: UserMessage,
        *,
        ticket: Ticket | None = None,
        from_pending: str | None = None,
        turn_id: str | None = None,
        origin: Origin | None = None,
        chosen_id: str | None = None,
    ) -> str:
        """Start a turn; with `turn_id` given the provider already started it (steering).
        The provider gets the text and instructions as the contributions leave them."""
        provider_started = turn_id is not None
        turn_id = turn_id or chosen_id or new_id()
        history = self._state.turns
        if from_pending is not None and self._pending(from_pending) is not None:
            self._write(DeletePending(chat_id=self.chat_id, pending_id=from_pending))
        started = TurnStarted(
            session_id=self.session_id,
            chat_id=self.chat_id,
            turn_id=turn_id,
            message=message,
            queued_message_id=from_pending,
        )
        self._apply(started, origin=origin)
        if ticket is not None:
            ticket.started(turn_id)
            self._waiting.tickets[turn_id] = ticket
        self._write(
            SaveTurnStarted(
                session_id=self.session_id,
                chat_id=self.chat_id,
                turn_id=turn_id,
                seq=self._turn_seq,
                user_text=message.text,
                attachments=message.attachments,
                started_at=self.services.clock.wall_ms(),
                origin=message.origin,
            )
        )
        self._turn_seq += 1
        self._writes.stable[turn_id] = []
        if not provider_started:
            self._begin_on_provider(turn_id, message, history)
        return turn_id

    def _begin_on_provider(
        self, turn_id: str, message: UserMessage, history: tuple[Turn, ...], parts: int = 0
    ) -> None:
        """The tracker runs the turn on the provider, its text and instructions
        as the contributions leave them (`parts`: those the turn has already)."""
        outgoing = self._admission.outgoing(turn_id, message.text, self._state)
        self.send(
            self._tracker,
            BeginTurn(
                turn_id=turn_id,
                text=with_attachments(outgoing.text, message.attachments),
                history=history,
                instructions=outgoing.instructions,
                model=dict(self._admission.session.config).get(MODEL_KEY) or None,
                attachments=message.attachments,
                parts=parts,
            ),
        )

    def _admit(
        self,
        ticket: Ticket,
        message: UserMessage,
        origin: Origin,
        *,
        steer: bool = False,
        from_pending: str | None = None,
        turn_id: str | None = None,
    ) -> Ticket:
        """Run admission; start the turn, or settle the request without one."""
        verdict = self._admission.admit(
            message.text, origin, self._state, steer=steer, pending_id=from_pending
        )
        if isinstance(verdict, Accept):
            self._start_turn(
                message, ticket=ticket, from_pending=from_pending, origin=origin, chosen_id=turn_id
            )
        else:
            self._settle(verdict, ticket, message, origin, from_pending)
        return ticket

    def _settle(
        self,
        verdict: Verdict,
        ticket: Ticket,
        message: UserMessage,
        origin: Origin,
        from_pending: str | None = None,
    ) -> None:
        """A request that ends without a turn: a local command, or a refusal."""
        pending = None if from_pending is None else self._pending(from_pending)
        if isinstance(verdict, Handled):
            if pending is not None:
                self._remove_pending(pending, RemovalReason.CONSUMED)
            for action in verdict.actions:
                self._apply(self._stamp(action), origin=origin.as_client())
            ticket.resolve(TurnOutcome(state=OutcomeState.HANDLED, text=verdict.reply))
            self._admission.turn_ended(TurnEndReason.LOCAL_COMMAND, None, self._state, origin)
            return
        assert isinstance(verdict, Reject)
        self._log.info("request_rejected", stage=verdict.stage, code=verdict.error.code.value)
        if pending is not None:
            self._remove_pending(pending, RemovalReason.REJECTED)
        refused = self._stamp(
            TurnStarted(turn_id=new_id(), message=message, queued_message_id=from_pending)
        )
        self._admission.refused(refused, self._state, origin, verdict.error)
        ticket.resolve(TurnOutcome(state=OutcomeState.REJECTED, error=verdict.error))
        self._admission.turn_ended(TurnEndReason.REJECTED, None, self._state, origin)

    @handles(ChatBatch)
    def _batch(self, message: ChatBatch) -> None:
        for item in message.messages:
            self._handlers[type(item)](self, item)

    @handles(SessionStateChanged)
    def _session_changed(self, message: SessionStateChanged) -> None:
        self._admission.session_changed(message.state)

    @handles(GetChatState)
    def _get_state(self, message: GetChatState) -> ChatState:
        return self._publisher.published

    @handles(Attach)
    def _attach(self, message: Attach) -> ChatSnapshot:
        snapshot = self._stamp(ChatSnapshot(state=self._publisher.published))
        self._publisher.attach(message.subscription, snapshot)
        self._report_subscribers()
        return snapshot

    @handles(Detach)
    def _detach(self, message: Detach) -> None:
        self._publisher.detach(message.subscription)
        self._report_subscribers()

    def _report_subscribers(self) -> None:
        count = len(self._publisher.subscribers)
        if count != self._reported.subscribers:
            self._reported.subscribers = count
            self.send(self.session, SubscribersChanged(chat_id=self.chat_id, count=count))
