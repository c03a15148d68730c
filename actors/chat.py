"""ChatActor: one chat's state, changed only through the pure reducer.

It owns the chat state (turns, active turn, steering and queued messages),
the chat's subscribers and the replies to sends and removals. Provider work
goes through its TurnTrackerActor; steering and drain policy through its
QueueDrainActor.

Publication order is the reduction order, and a turn's end reaches
subscribers (and resolves its send) only after the store committed it: an
outbox holds events behind the write they depend on, and a new subscriber's
snapshot is the state as of the last event published, never ahead of it.

Bursts. The tracker sends what it queued for the chat as one message
(ApplyActions, or a ChatBatch of messages handled in order); a burst of
actions is published with one push per subscriber. The store writes the
chat queues leave as one WriteMany when it flushes (see `Actor.flush`), and
before anything else the chat sends (`send` flushes them first), so the
store sees them in the order the chat made them, ahead of whatever they
caused elsewhere.
"""

import itertools
import uuid
from collections import deque
from collections.abc import Sequence
from typing import Any

import attrs
import structlog

from agenthost.actors.context import Services
from agenthost.actors.contributions import (
    Accept,
    ChatKey,
    Dispatch,
    Handled,
    IncomingRequest,
    OutgoingTurn,
    Reject,
    RequestKind,
    RequestSource,
    TurnEnd,
    TurnEndReason,
)
from agenthost.actors.contributions.queue_drain import sender_of
from agenthost.actors.handles import Subscription, Ticket
from agenthost.actors.hosted import HostedActor
from agenthost.actors.protocol import (
    AnswerSettled,
    ApplyActions,
    AssistantStable,
    BeginTurn,
    CancelActiveTurn,
    ChatBatch,
    ChatReady,
    ChatStatusChanged,
    ClientRemoved,
    ClientToolsChanged,
    Committed,
    Diagnose,
    DrainQueue,
    EndTurn,
    PrepareRelease,
    ProposeDrain,
    RecordSteering,
    Ref,
    ReleaseAborted,
    ReleaseVote,
    RemovalOutcome,
    RemoveSteering,
    RequeueSteering,
    SessionStateChanged,
    SpawnSubagentChat,
    StartHeldSteering,
    StartProviderTurn,
    StartQueued,
    StartSteeringTurn,
    Steer,
    SteeringCancelled,
    SteeringRemovalSettled,
    SubscribersChanged,
    UseTracker,
    WriteMany,
)
from agenthost.actors.queue_drain import QueueDrainActor
from agenthost.actors.runtime import Actor, RuntimeFuture, handles
from agenthost.actors.turn_tracker import TurnTrackerActor
from agenthost.messages.commands import (
    AnswerRequest,
    CancelTurn,
    EditPendingMessage,
    GetChatState,
    GetDiagnostics,
    OutcomeState,
    RemovePendingMessage,
    ReorderQueue,
    SendMessage,
    SetDraft,
    SetReadOnly,
    SteerMessage,
    TruncateChat,
    TurnOutcome,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    AssistantDelta,
    ChatEvent,
    ChatSnapshot,
    DraftChanged,
    PendingMessageAdded,
    PendingMessageRemoved,
    QueuedMessagesReordered,
    ReadOnlyChanged,
    RemovalReason,
    SteeringNotWithdrawn,
    SteeringRecorded,
    SteeringWithdrawn,
    Truncated,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from agenthost.messages.reducers import delta_runs, joined_delta, reduce_chat
from agenthost.messages.state import (
    ChatOriginKind,
    ChatState,
    ChatStatus,
    MessageOrigin,
    OriginKind,
    PendingKind,
    PendingMessage,
    SessionState,
    Turn,
    TurnState,
    UserMessage,
    with_attachments,
)
from agenthost.store.records import (
    DeletePending,
    SaveAssistantText,
    SaveChatMeta,
    SavePending,
    SaveSteeringRecorded,
    SaveTurnEnded,
    SaveTurnStarted,
    StoreOp,
)
from agenthost.store.records import TruncateChat as TruncateStoredChat

log = structlog.get_logger(__name__)

STEERING_BUSY = "Cannot change a steering message while it is being processed"
MODEL_KEY = "model"  # a session config value: the model its turns ask for
STEERING_NOT_WITHDRAWN = AgentHostError(
    code=ErrorCode.INVALID_ARGUMENT,
    message="The model already had this steering message; it stays until the model reads it.",
)


@attrs.frozen
class Attach:
    """Add a subscriber; the reply is its snapshot (already queued to it)."""

    subscription: Subscription


@attrs.frozen
class Detach:
    subscription: Subscription


@attrs.frozen
class SteerReply:
    pending: PendingMessage
    ticket: Ticket | None = None


CLIENT_COMMANDS = (
    SendMessage,
    SteerMessage,
    SetDraft,
    SetReadOnly,
    RemovePendingMessage,
    EditPendingMessage,
    ReorderQueue,
    AnswerRequest,
    CancelTurn,
    TruncateChat,
    Attach,
)


ENDED_AS = {
    TurnCompleted: TurnState.COMPLETE,
    TurnCancelled: TurnState.CANCELLED,
    TurnFailed: TurnState.ERROR,
}


@attrs.frozen
class Origin:
    """Who caused an action: a client (`client_id` None: the embedding program),
    or, with `from_client` False, the host acting on a client's queued message."""

    client_id: str | None = None
    from_client: bool = True


def _end_reason(turn: Turn) -> TurnEndReason:
    if turn.state is TurnState.COMPLETE:
        return TurnEndReason.SUCCESS
    if turn.state is TurnState.CANCELLED:
        return TurnEndReason.CANCELLED
    if turn.error is not None and turn.error.code is ErrorCode.EXECUTION_ABANDONED:
        return TurnEndReason.ABANDONED
    return TurnEndReason.ERROR


_ID_PREFIX = uuid.uuid4().hex[:16]  # random per process: ids never repeat across restarts
_ids = itertools.count(1)


def new_id() -> str:
    """A new turn or message id: unique across processes and restarts, without a
    urandom call each time (a uuid4 per turn was 4% of a load run's CPU)."""
    return f"{_ID_PREFIX}{next(_ids):016x}"


# A ChatActor's state is kept in few attributes (with at most 30, CPython shares
# the attribute names among all chats' __dict__s: 1.3 KB less per resident chat).
@attrs.define
class _Writes:
    """Store writes: those queued since the last flush, their numbering, how far
    the store has committed, and each running turn's text that became stable."""

    ops: list[StoreOp] = attrs.field(factory=list)
    seq: int = 0
    gated: bool = False
    committed: int = 0
    stable: dict[str, list[str]] = attrs.field(factory=dict)


@attrs.define
class _Reported:
    """What the session was last told: the chat's status, turn count, subscribers."""

    status: ChatStatus
    turns: int
    subscribers: int = 0


@attrs.define
class _Waiting:
    """Callers waiting on the chat: sends (tickets), removals, and answers."""

    tickets: dict[str, Ticket] = attrs.field(factory=dict)
    removals: dict[str, list[RuntimeFuture]] = attrs.field(factory=dict)
    answers: dict[str, deque[RuntimeFuture]] = attrs.field(factory=dict)


def _not_pending(pending_id: str) -> AgentHostError:
    return AgentHostError(
        code=ErrorCode.NOT_FOUND,
        message=f"message {pending_id} is not pending (it ran, or was removed)",
    )


class ChatActor(HostedActor):
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
    ) -> None:
        super().__init__(services)
        self.session_id = session_id
        self.chat_id = chat_id
        self._key = ChatKey(session_id=session_id, chat_id=chat_id)
        self._session = session_state or SessionState()
        self.default = default
        self._read_only = read_only
        self.provider = provider
        self.session = session
        self.resume = resume
        self._client_tools = client_tools
        self._state = state
        self._published = state
        self._subscribers: list[Subscription] = []
        # (commit seq it waits for, event or None, state after it, ticket to resolve)
        self._outbox: deque[tuple[int, ChatEvent | None, ChatState, Any]] = deque()
        self._writes = _Writes()
        self._waiting = _Waiting()
        self._reported = _Reported(status=state.status, turns=len(state.turns))
        # While the session decides to leave memory: client commands held meanwhile.
        self._closing: list[tuple[Any, RuntimeFuture]] | None = None
        # Queued when a turn ended without success: they wait for a successful turn.
        self._held: set[str] = {m.id for m in state.queued_messages}
        self._turn_seq = len(state.turns)
        self._tracker: Ref | None = None
        self._drain: Ref | None = None
        self._log = log.bind(session_id=session_id, chat_id=chat_id)

    @property
    def driven(self) -> bool:
        """A subagent's chat: its turns come from its parent's provider stream."""
        return self._state.origin.kind is ChatOriginKind.TOOL

    def on_start(self) -> None:
        self.services.directory.register(f"{self.session_id}/{self.chat_id}", self.actor_ref)
        self._hydrate()
        if self.driven:
            self.send(self.session, ChatReady(chat_id=self.chat_id))
            return
        self._drain = QueueDrainActor.start(self.services, chat=self.actor_ref)
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
        for pending in reversed(self._state.steering_messages):
            self._to_queue(pending)
        self._held.update(m.id for m in self._state.queued_messages)

    def _hydrate(self) -> None:
        """Contributions restore what they keep, before the chat is listed."""
        state = self._state
        turns = self.services.contributions.hydrate_turns(state.turns, self._key)
        title, draft = self.services.contributions.hydrate_chat(state.title, state.draft, self._key)
        self._state = self._published = attrs.evolve(state, turns=turns, title=title, draft=draft)

    def on_stop(self) -> None:
        self.services.directory.unregister(f"{self.session_id}/{self.chat_id}", self.actor_ref)
        for child in (self._tracker, self._drain):
            if child is not None and child.is_alive():
                child.stop(block=False)
        stopped = AgentHostError(
            code=ErrorCode.HOST_STOPPED, message="The host stopped before this turn ended."
        )
        for ticket in self._waiting.tickets.values():
            ticket.fail(stopped)
        for _, _, _, ticket in self._outbox:
            if ticket is not None:
                ticket.fail(stopped)
        for futures in (*self._waiting.removals.values(), *self._waiting.answers.values()):
            for future in futures:
                future.set_exception(exc_info=(AgentHostError, stopped, None))
        released = AgentHostError(
            code=ErrorCode.HOST_STOPPED, message="The session left memory; it is restored on use."
        )
        for _, future in self._closing or []:
            future.set_exception(exc_info=(AgentHostError, released, None))
        for subscription in self._subscribers:
            subscription.close()

    # -- state, persistence, publication -----------------------------------------------------
    def _apply(
        self,
        action: ChatEvent,
        after_write: int = 0,
        ticket: Any = None,
        origin: Origin | None = None,
        publish: bool = True,
    ) -> None:
        """Reduce `action`; publish it (once durable, after `after_write`) unless
        the caller publishes a whole burst itself."""
        before = self._state
        self._state = reduce_chat(before, action, self.services.clock.wall_ms())
        self._outbox.append((after_write, action, self._state, ticket))
        if publish:
            self._publish_ready()
        self._dispatched(action, before, origin)

    def _dispatched(
        self, action: ChatEvent, before: ChatState, origin: Origin | None, rejection: str = ""
    ) -> None:
        """Tell the contributions: every action, and which a client applied."""
        from_client = origin is not None and origin.from_client
        if not self.services.contributions.wants(type(action), from_client):
            return
        self.services.contributions.action_done(
            Dispatch(
                chat=self._key,
                action=action,
                from_client=from_client,
                client_id=None if origin is None else origin.client_id,
                before=before,
                state=self._state,
                session=self._session,
                rejection=rejection or None,
                default_chat=self.default,
                subagent=self.driven,
            )
        )

    def _write(self, op: StoreOp, gate: bool = False) -> int:
        """Queue a store write; the store gets a message's writes together, before
        anything else this chat sends. A gated write's commit is acked (Committed)."""
        self._writes.seq += 1
        self._writes.ops.append(op)
        self._writes.gated = self._writes.gated or gate
        return self._writes.seq

    def flush(self) -> None:
        """The store gets the writes queued so far as one WriteMany."""
        writes = self._writes
        if not writes.ops:
            return
        ops, writes.ops = writes.ops, []
        ended = {op.turn_id for op in ops if isinstance(op, SaveTurnEnded)}
        if ended:  # a turn's end carries its whole assistant text
            ops = [
                op for op in ops if not (isinstance(op, SaveAssistantText) and op.turn_id in ended)
            ]
        gated, writes.gated = writes.gated, False
        Actor.send(
            self.services.store,
            WriteMany(
                ops=tuple(ops),
                ack_to=self.actor_ref if gated else None,
                ack=Committed(seq=self._writes.seq),
            ),
        )

    def send(self, ref: Ref | None, message: Any) -> bool:  # type: ignore[override]
        """Tell `ref`, after the writes queued so far (they stay ahead of it)."""
        self.flush()
        return Actor.send(ref, message)

    def _publish_ready(self) -> None:
        """Publish what the store has made durable, in order: events to the
        subscribers (one push for all), then the tickets of the turns that ended."""
        outbox = self._outbox
        events: list[ChatEvent] = []
        tickets: list[tuple[Ticket, ChatState]] = []
        while outbox and outbox[0][0] <= self._writes.committed:
            _, event, state_after, ticket = outbox.popleft()
            self._published = state_after
            if event is not None:
                events.append(event)
            if ticket is not None:
                tickets.append((ticket, state_after))
        if events and self._subscribers:
            self._subscribers = [s for s in self._subscribers if s.push_many(events)]
            self._report_subscribers()
        for ticket, state_after in tickets:
            ticket.resolve(_outcome(ticket, state_after))
        published = self._published
        if (published.status, len(published.turns)) != (
            self._reported.status,
            self._reported.turns,
        ):
            self._reported.status = published.status
            self._reported.turns = len(published.turns)
            self.send(
                self.session,
                ChatStatusChanged(
                    chat_id=self.chat_id, status=int(published.status), turns=len(published.turns)
                ),
            )

    @handles(Committed)
    def _committed_ack(self, message: Committed) -> None:
        if message.error is not None:
            # Not durable. Those waiting on a turn's end hear it; publication goes on
            # (holding it would wedge the chat) and the log says what was lost.
            self._log.error("store_write_lost", seq=message.seq, error=message.error.message)
            for seq, _, _, ticket in self._outbox:  # the gated writes of the failed batch
                if self._writes.committed < seq <= message.seq and ticket is not None:
                    ticket.fail(message.error)
        self._writes.committed = max(self._writes.committed, message.seq)
        self._publish_ready()

    def _stamp(self, event: Any) -> Any:
        return attrs.evolve(event, session_id=self.session_id, chat_id=self.chat_id)

    def _pending(self, pending_id: str) -> PendingMessage | None:
        return next((m for m in self._state.pending if m.id == pending_id), None)

    def _remove_pending(
        self, pending: PendingMessage, reason: RemovalReason, origin: Origin | None = None
    ) -> None:
        self._apply(
            self._stamp(
                PendingMessageRemoved(kind=pending.kind, pending_id=pending.id, reason=reason)
            ),
            origin=origin,
        )
        self._write(DeletePending(pending_id=pending.id))

    def _save_queue_positions(self) -> None:
        for position, pending in enumerate(self._state.queued_messages):
            self._write(
                SavePending(
                    session_id=self.session_id,
                    chat_id=self.chat_id,
                    pending=pending,
                    position=position,
                )
            )

    def _add_pending(
        self,
        kind: PendingKind,
        message: UserMessage,
        origin: Origin,
        pending_id: str | None = None,
    ) -> PendingMessage:
        pending = PendingMessage(id=pending_id or new_id(), kind=kind, message=message)
        self._apply(self._stamp(PendingMessageAdded(pending=pending)), origin=origin)
        position = len(
            self._state.steering_messages
            if kind is PendingKind.STEERING
            else self._state.queued_messages
        )
        self._write(
            SavePending(
                session_id=self.session_id,
                chat_id=self.chat_id,
                pending=pending,
                position=position - 1,
            )
        )
        return pending

    def _busy(self) -> bool:
        """A turn runs, or steering waits that the provider may start a turn for."""
        return self._state.active_turn is not None or bool(self._state.steering_messages)

    def _refuse_if_driven(self) -> None:
        if self.driven:
            raise AgentHostError(
                code=ErrorCode.INVALID_ARGUMENT,
                message="This is a subagent's chat: its parent's turn drives it.",
            )

    # -- leaving memory --------------------------------------------------------------------------
    def on_receive(self, message: Any) -> Any:
        if self._closing is not None and isinstance(message, CLIENT_COMMANDS):
            future = RuntimeFuture()  # answered when the session stays, or fails when it goes
            self._closing.append((message, future))
            return future
        return super().on_receive(message)

    @handles(ChatBatch)
    def _batch(self, message: ChatBatch) -> None:
        for item in message.messages:
            self._handlers[type(item)](self, item)

    @handles(PrepareRelease)
    def _prepare_release(self, message: PrepareRelease) -> None:
        """Agree only with nothing running, watched or waited on; for a deletion,
        only while the chat never held anything (DESIGN.md rule 4)."""
        waited_on = (
            self._waiting.tickets
            or self._waiting.removals
            or self._waiting.answers
            or any(ticket is not None for _, _, _, ticket in self._outbox)
        )
        ok = not (self._busy() or self._subscribers or waited_on)
        if message.collect:
            ok = ok and not self._state.turns and not self._state.pending
        if ok:
            self._closing = []
        self.send(self.session, ReleaseVote(chat_id=self.chat_id, ok=ok))

    @handles(ReleaseAborted)
    def _release_aborted(self, message: ReleaseAborted) -> None:
        held, self._closing = self._closing or [], None
        for command, future in held:
            try:
                future.set(super().on_receive(command))
            except Exception:
                future.set_exception()

    # -- admission -----------------------------------------------------------------------
    def _request(
        self,
        kind: RequestKind,
        text: str,
        client_id: str | None,
        source: RequestSource = RequestSource.CLIENT,
        pending_id: str | None = None,
    ) -> IncomingRequest:
        return IncomingRequest(
            chat=self._key,
            kind=kind,
            text=text,
            source=source,
            client_id=client_id,
            state=self._state,
            session=self._session,
            read_only=self._read_only,
            default_chat=self.default,
            subagent=self.driven,
            pending_id=pending_id,
        )

    def _admit(
        self,
        request: IncomingRequest,
        ticket: Ticket,
        message: UserMessage,
        from_pending: str | None = None,
        turn_id: str | None = None,
    ) -> Ticket:
        """Run admission; start the turn, or settle the request without one."""
        verdict = self.services.contributions.incoming(request)
        if isinstance(verdict, Accept):
            origin = Origin(request.client_id, request.source is RequestSource.CLIENT)
            self._start_turn(
                message, ticket=ticket, from_pending=from_pending, origin=origin, chosen_id=turn_id
            )
        else:
            self._settle(request, verdict, ticket, message, from_pending)
        return ticket

    def _settle(
        self,
        request: IncomingRequest,
        verdict: Handled | Reject,
        ticket: Ticket,
        message: UserMessage,
        from_pending: str | None = None,
    ) -> None:
        """A request that ends without a turn: a local command, or a refusal."""
        pending = None if from_pending is None else self._pending(from_pending)
        if isinstance(verdict, Handled):
            if pending is not None:
                self._remove_pending(pending, RemovalReason.CONSUMED)
            for action in verdict.actions:
                self._apply(self._stamp(action), origin=Origin(request.client_id))
            ticket.resolve(TurnOutcome(state=OutcomeState.HANDLED, text=verdict.reply))
            self._turn_ended(TurnEndReason.LOCAL_COMMAND, None, request.client_id)
            return
        self._log.info("request_rejected", stage=verdict.stage, code=verdict.error.code.value)
        if pending is not None:
            self._remove_pending(pending, RemovalReason.REJECTED)
        refused = self._stamp(
            TurnStarted(turn_id=new_id(), message=message, queued_message_id=from_pending)
        )
        origin = Origin(request.client_id, request.source is RequestSource.CLIENT)
        self._dispatched(refused, self._state, origin, rejection=verdict.error.message)
        ticket.resolve(TurnOutcome(state=OutcomeState.REJECTED, error=verdict.error))
        self._turn_ended(TurnEndReason.REJECTED, None, request.client_id)

    def _refused(self, action: ChatEvent, error: AgentHostError, origin: Origin) -> AgentHostError:
        """A client's action that is not applied: observed with its reason, then raised."""
        self._dispatched(self._stamp(action), self._state, origin, rejection=error.message)
        return error

    def _turn_ended(self, reason: TurnEndReason, turn: Turn | None, client_id: str | None) -> None:
        self.services.contributions.turn_end(
            TurnEnd(
                chat=self._key,
                reason=reason,
                state=self._state,
                session=self._session,
                turn=turn,
                resumable=turn is not None and turn.error is not None and turn.error.resumable,
                subagent=self.driven,
                default_chat=self.default,
                client_id=client_id,
            )
        )

    # -- client commands ---------------------------------------------------------------------
    def _check_new_ids(self, *ids: str | None) -> None:
        taken = {t.id for t in self._state.turns} | {m.id for m in self._state.pending}
        if self._state.active_turn is not None:
            taken.add(self._state.active_turn.id)
        for chosen in ids:
            if chosen is not None and (not chosen or chosen in taken):
                raise AgentHostError(
                    code=ErrorCode.INVALID_ARGUMENT, message=f"id {chosen!r} is empty or in use"
                )

    @handles(SendMessage)
    def _send(self, message: SendMessage) -> Ticket:
        self._refuse_if_driven()
        self._check_new_ids(message.turn_id, message.pending_id)
        user = UserMessage(text=message.text, attachments=message.attachments)
        if not self._busy():
            # A message set as queued while idle runs at once; its turn says it came
            # from that id (AHP: a client that queued it sees it leave the queue).
            request = self._request(RequestKind.SEND, message.text, message.client_id)
            return self._admit(request, Ticket(), user, message.pending_id, message.turn_id)
        pending = self._add_pending(
            PendingKind.QUEUED, user, Origin(message.client_id), message.pending_id
        )
        ticket = Ticket(pending_id=pending.id)
        self._waiting.tickets[pending.id] = ticket
        return ticket

    @handles(SteerMessage)
    def _steer(self, message: SteerMessage) -> SteerReply:
        self._refuse_if_driven()
        self._check_new_ids(message.pending_id)
        request = self._request(RequestKind.STEER, message.text, message.client_id)
        if not self._busy():  # while idle, steering is simply a send
            pending_id = message.pending_id or new_id()
            ticket = Ticket(pending_id=pending_id)
            pending = PendingMessage(
                id=pending_id, kind=PendingKind.STEERING, message=UserMessage(text=message.text)
            )
            self._admit(request, ticket, UserMessage(text=message.text), from_pending=pending_id)
            return SteerReply(pending=pending, ticket=ticket)
        verdict = self.services.contributions.incoming(request)
        if not isinstance(verdict, Accept):  # settled at once, like a send while idle
            ticket = Ticket()
            self._settle(request, verdict, ticket, UserMessage(text=message.text))
            pending = PendingMessage(
                id=new_id(), kind=PendingKind.STEERING, message=UserMessage(text=message.text)
            )
            return SteerReply(pending=pending, ticket=ticket)
        pending = self._add_pending(
            PendingKind.STEERING,
            UserMessage(text=message.text),
            Origin(message.client_id),
            message.pending_id,
        )
        self.send(
            self._drain,
            Steer(pending_id=pending.id, text=pending.text, for_turn=self._state.active_turn_id),
        )
        return SteerReply(pending=pending)

    @handles(RemovePendingMessage)
    def _remove(self, message: RemovePendingMessage) -> RuntimeFuture | bool:
        pending = self._pending(message.pending_id)
        if pending is None:
            removal = PendingMessageRemoved(kind=PendingKind.QUEUED, pending_id=message.pending_id)
            raise self._refused(
                removal, _not_pending(message.pending_id), Origin(message.client_id)
            )
        if pending.kind is PendingKind.QUEUED:
            self._remove_pending(pending, RemovalReason.CLIENT, Origin(message.client_id))
            ticket = self._waiting.tickets.pop(pending.id, None)
            if ticket is not None:
                ticket.resolve(TurnOutcome(state=OutcomeState.REMOVED))
            return True
        future = RuntimeFuture()
        first = pending.id not in self._waiting.removals
        self._waiting.removals.setdefault(pending.id, []).append(future)
        if first:
            self.send(self._drain, RemoveSteering(pending_id=pending.id))
        return future

    @handles(EditPendingMessage)
    def _edit(self, message: EditPendingMessage) -> PendingMessage:
        pending = self._pending(message.pending_id) or PendingMessage(
            id=message.pending_id, kind=PendingKind.QUEUED, message=UserMessage(text="")
        )
        edited = attrs.evolve(pending, message=attrs.evolve(pending.message, text=message.text))
        if self._pending(message.pending_id) is None:
            error = _not_pending(message.pending_id)
            raise self._refused(PendingMessageAdded(pending=edited), error, Origin())
        if pending.kind is PendingKind.STEERING:
            error = AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message=STEERING_BUSY)
            raise self._refused(PendingMessageAdded(pending=edited), error, Origin())
        self._apply(self._stamp(PendingMessageAdded(pending=edited)), origin=Origin())
        self._save_queue_positions()
        return edited

    @handles(ReorderQueue)
    def _reorder(self, message: ReorderQueue) -> tuple[PendingMessage, ...]:
        self._apply(
            self._stamp(QueuedMessagesReordered(order=message.pending_ids)), origin=Origin()
        )
        self._save_queue_positions()
        return self._state.queued_messages

    @handles(AnswerRequest)
    def _answer(self, message: AnswerRequest) -> RuntimeFuture:
        future = RuntimeFuture()
        self._waiting.answers.setdefault(message.request_id, deque()).append(future)
        self.send(self._tracker, message)
        return future

    @handles(AnswerSettled)
    def _answer_settled(self, message: AnswerSettled) -> None:
        waiting = self._waiting.answers.get(message.request_id)
        if not waiting:
            return
        future = waiting.popleft()
        if not waiting:
            del self._waiting.answers[message.request_id]
        if message.error is None:
            future.set(None)
        else:
            future.set_exception(exc_info=(AgentHostError, message.error, None))

    @handles(GetDiagnostics)
    def _diagnostics(self, message: GetDiagnostics) -> Any:
        assert self._tracker is not None
        return self._tracker.ask(Diagnose(), block=False)

    @handles(ClientToolsChanged, ClientRemoved)
    def _clients(self, message: ClientToolsChanged | ClientRemoved) -> None:
        self.send(self._tracker, message)

    @handles(TruncateChat)
    def _truncate(self, message: TruncateChat) -> ChatState:
        truncation = Truncated(turn_id=message.turn_id)
        if self._state.active_turn is not None:
            error = AgentHostError(
                code=ErrorCode.INVALID_ARGUMENT,
                message="A turn is running: cancel it before truncating the chat.",
            )
            raise self._refused(truncation, error, Origin())
        ids = [t.id for t in self._state.turns]
        if message.turn_id is not None and message.turn_id not in ids:
            error = AgentHostError(
                code=ErrorCode.NOT_FOUND,
                message=f"chat {self.chat_id} has no turn {message.turn_id}",
            )
            raise self._refused(truncation, error, Origin())
        self._apply(self._stamp(Truncated(turn_id=message.turn_id)), origin=Origin())
        self._write(
            TruncateStoredChat(chat_id=self.chat_id, keep=tuple(t.id for t in self._state.turns))
        )
        return self._state

    @handles(CancelTurn)
    def _cancel(self, message: CancelTurn) -> bool:
        active = self._state.active_turn
        if active is None:
            idle = AgentHostError(code=ErrorCode.NOT_FOUND, message="No turn is running.")
            self._refused(TurnCancelled(turn_id=""), idle, Origin())
            return False
        self.send(self._tracker, CancelActiveTurn(turn_id=active.id))
        return True

    @handles(SetDraft)
    def _set_draft(self, message: SetDraft) -> None:
        draft = DraftChanged(draft=message.text or None)
        self._apply(self._stamp(draft), origin=Origin(message.client_id))

    @handles(SetReadOnly)
    def _set_read_only(self, message: SetReadOnly) -> None:
        if message.read_only == self._read_only:
            return
        self._read_only = message.read_only
        self._write(SaveChatMeta(chat_id=self.chat_id, read_only=message.read_only))
        self._apply(self._stamp(ReadOnlyChanged(read_only=message.read_only)), origin=Origin())

    @handles(SessionStateChanged)
    def _session_changed(self, message: SessionStateChanged) -> None:
        self._session = message.state

    @handles(DrainQueue)
    def _drain_queue(self, message: DrainQueue) -> None:
        self._propose_drain()

    @handles(GetChatState)
    def _get_state(self, message: GetChatState) -> ChatState:
        return self._published

    @handles(Attach)
    def _attach(self, message: Attach) -> ChatSnapshot:
        snapshot = self._stamp(ChatSnapshot(state=self._published))
        message.subscription.push(snapshot)
        self._subscribers.append(message.subscription)
        self._report_subscribers()
        return snapshot

    @handles(Detach)
    def _detach(self, message: Detach) -> None:
        self._subscribers = [s for s in self._subscribers if s is not message.subscription]
        self._report_subscribers()

    def _report_subscribers(self) -> None:
        count = len(self._subscribers)
        if count != self._reported.subscribers:
            self._reported.subscribers = count
            self.send(self.session, SubscribersChanged(chat_id=self.chat_id, count=count))

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
            self._write(DeletePending(pending_id=from_pending))
        self._apply(
            self._stamp(
                TurnStarted(turn_id=turn_id, message=message, queued_message_id=from_pending)
            ),
            origin=origin,
        )
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
            )
        )
        self._turn_seq += 1
        self._writes.stable[turn_id] = []
        if not provider_started:
            outgoing = self.services.contributions.outgoing(
                OutgoingTurn(
                    chat=self._key,
                    turn_id=turn_id,
                    text=message.text,
                    state=self._state,
                    session=self._session,
                )
            )
            self.send(
                self._tracker,
                BeginTurn(
                    turn_id=turn_id,
                    text=with_attachments(outgoing.text, message.attachments),
                    history=history,
                    instructions=outgoing.instructions,
                    model=dict(self._session.config).get(MODEL_KEY) or None,
                    attachments=message.attachments,
                ),
            )
        return turn_id

    def _propose_drain(self) -> None:
        if self._state.active_turn is None and self._state.pending:
            queued = self._state.queued_messages
            self.send(
                self._drain,
                ProposeDrain(
                    queued_ids=tuple(m.id for m in queued),
                    head_held=bool(queued) and queued[0].id in self._held,
                ),
            )

    @handles(StartQueued)
    def _start_queued(self, message: StartQueued) -> None:
        queued = self._state.queued_messages
        if self._busy() or not queued:
            return
        pending = queued[0]
        if pending.id != message.pending_id:
            # The proposal is stale (the queue changed since): propose the head again.
            self._propose_drain()
            return
        request = self._request(
            RequestKind.SEND,
            pending.text,
            sender_of(self.services.mementos, self._key, pending.id),
            source=RequestSource.QUEUE,
            pending_id=pending.id,
        )
        ticket = self._waiting.tickets.pop(pending.id, None) or Ticket(pending_id=pending.id)
        self._admit(request, ticket, pending.message, from_pending=pending.id)

    @handles(StartProviderTurn)
    def _start_provider_turn(self, message: StartProviderTurn) -> None:
        if self._state.active_turn is None:
            self._start_turn(UserMessage(text=message.text), turn_id=message.turn_id)

    @handles(SpawnSubagentChat)
    def _spawn_subagent(self, message: SpawnSubagentChat) -> None:
        self.send(self.session, message)

    @handles(StartHeldSteering)
    def _start_held(self, message: StartHeldSteering) -> None:
        pending = self._pending(message.pending_id)
        if pending is None:
            return
        if self._state.active_turn is not None:  # a direct send got there first: hold it again
            self.send(
                self._drain,
                Steer(
                    pending_id=pending.id, text=pending.text, for_turn=self._state.active_turn_id
                ),
            )
            return
        steering = UserMessage(text=pending.text, origin=MessageOrigin(kind=OriginKind.STEERING))
        self._start_turn(steering, from_pending=pending.id)

    # -- from the turn tracker and the queue drain -----------------------------------------------
    @handles(ChatReady)
    def _chat_ready(self, message: ChatReady) -> None:
        self.send(self.session, message)

    @handles(ApplyActions)
    def _apply_actions(self, message: ApplyActions) -> None:
        """A burst of the provider's actions, published together. A run of deltas
        to one part is reduced once (nobody can see the states between them: they
        are published together), unless a contribution observes deltas."""
        actions = message.actions
        if self.services.contributions.observers(AssistantDelta):
            runs: Sequence[Sequence[ChatEvent]] = [(action,) for action in actions]
        else:
            runs = delta_runs(actions)
        try:
            for run in runs:
                if len(run) == 1:
                    self._apply(run[0], publish=False)
                else:
                    self._apply_run(run)  # type: ignore[arg-type]
        finally:
            self._publish_ready()

    def _apply_run(self, run: Sequence[AssistantDelta]) -> None:
        self._state = reduce_chat(self._state, joined_delta(run), self.services.clock.wall_ms())
        for delta in run:  # each published as it came, all with the run's end state
            self._outbox.append((0, delta, self._state, None))

    @handles(AssistantStable)
    def _assistant_stable(self, message: AssistantStable) -> None:
        stable = self._writes.stable.get(message.turn_id)
        if stable is None:
            return
        stable.append(message.text)
        self._write(SaveAssistantText(turn_id=message.turn_id, text="".join(stable)))

    @handles(EndTurn)
    def _end_turn(self, message: EndTurn) -> None:
        action = message.action
        turn_id: str = action.turn_id  # type: ignore[attr-defined]
        if self._state.active_turn_id != turn_id:
            self._log.info("turn_end_ignored", turn_id=turn_id, reason="not active")
            return
        stable = "".join(self._writes.stable.pop(turn_id, []))
        seq = self._write(
            SaveTurnEnded(
                turn_id=turn_id,
                state=ENDED_AS[type(action)],
                assistant_text=stable,
                ended_at=self.services.clock.wall_ms(),
                error=action.error if isinstance(action, TurnFailed) else None,
                finish_reason=message.finish_reason,
            ),
            gate=True,
        )
        # Its end reaches subscribers, and its sender, once the store committed it.
        self._apply(action, after_write=seq, ticket=self._waiting.tickets.pop(turn_id, None))
        turn = self._state.turns[-1]
        self._log.info(
            "turn_ended",
            turn_id=turn_id,
            outcome=turn.state.value,
            error=None if turn.error is None else turn.error.code.value,
            reason=None if turn.error is None else turn.error.message,
            assistant_chars=len(stable),
        )
        if turn.state is TurnState.COMPLETE:
            self._held.clear()
        else:
            self._held.update(m.id for m in self._state.queued_messages)
        self._turn_ended(_end_reason(turn), turn, None)  # queue_drain drains after a success

    @handles(SteeringCancelled)
    def _steering_cancelled(self, message: SteeringCancelled) -> None:
        """A cancel ended the turn these were for: the host's own removal."""
        for pending_id in message.pending_ids:
            pending = self._pending(pending_id)
            if pending is not None:
                self._remove_pending(pending, RemovalReason.CANCELLED)
            self._answer_removal(pending_id, True)
        self._propose_drain()

    @handles(RecordSteering)
    def _record_steering(self, message: RecordSteering) -> None:
        pending = self._pending(message.pending_id) or PendingMessage(
            id=message.pending_id, kind=PendingKind.STEERING, message=UserMessage(text=message.text)
        )
        active = self._state.active_turn
        if active is None or active.id != message.turn_id:
            self._log.warning("steering_record_ignored", pending_id=message.pending_id)
            return
        recorded = attrs.evolve(
            pending,
            message=UserMessage(text=message.text, origin=MessageOrigin(kind=OriginKind.STEERING)),
        )
        self._apply(self._stamp(SteeringRecorded(turn_id=message.turn_id, pending=recorded)))
        self._write(DeletePending(pending_id=message.pending_id))
        self._write(
            SaveSteeringRecorded(
                turn_id=message.turn_id,
                pending_id=message.pending_id,
                text=message.text,
                position=len(self._state.active_turn.steering) - 1
                if self._state.active_turn
                else 0,
            )
        )
        self._answer_removal(message.pending_id, False)

    @handles(StartSteeringTurn)
    def _start_steering_turn(self, message: StartSteeringTurn) -> None:
        pending = self._pending(message.pending_id)
        if pending is not None:
            self._remove_pending(pending, RemovalReason.CONSUMED)
        steering = UserMessage(text=message.text, origin=MessageOrigin(kind=OriginKind.STEERING))
        self._start_turn(steering, from_pending=message.pending_id, turn_id=message.turn_id)
        self._answer_removal(message.pending_id, False)

    @handles(SteeringRemovalSettled)
    def _removal_settled(self, message: SteeringRemovalSettled) -> None:
        pending = self._pending(message.pending_id)
        outcome = message.outcome
        removal = PendingMessageRemoved(kind=PendingKind.STEERING, pending_id=message.pending_id)
        if outcome is RemovalOutcome.REJECTED:
            error = AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message=STEERING_BUSY)
            self._refused(removal, error, Origin())
            for future in self._waiting.removals.pop(message.pending_id, []):
                future.set_exception(exc_info=(AgentHostError, error, None))
            return
        if outcome in (RemovalOutcome.WITHDRAWN, RemovalOutcome.DROPPED):
            if pending is not None:
                reason = (
                    RemovalReason.WITHDRAWN
                    if outcome is RemovalOutcome.WITHDRAWN
                    else RemovalReason.CLIENT
                )
                self._remove_pending(pending, reason)
            if outcome is RemovalOutcome.WITHDRAWN:
                self._apply(self._stamp(SteeringWithdrawn(pending_id=message.pending_id)))
            self._answer_removal(message.pending_id, True)
            self._propose_drain()
            return
        if outcome is RemovalOutcome.NOT_WITHDRAWN:
            self._log.warning("steering_not_withdrawn", pending_id=message.pending_id)
            self._apply(self._stamp(SteeringNotWithdrawn(pending_id=message.pending_id)))
            self._refused(removal, STEERING_NOT_WITHDRAWN, Origin())
        self._answer_removal(message.pending_id, False)

    def _answer_removal(self, pending_id: str, removed: bool) -> None:
        for future in self._waiting.removals.pop(pending_id, []):
            future.set(removed)

    @handles(RequeueSteering)
    def _requeue(self, message: RequeueSteering) -> None:
        pending = self._pending(message.pending_id)
        if pending is None or pending.kind is not PendingKind.STEERING:
            return
        self._to_queue(pending)
        self._answer_removal(pending.id, False)
        self._propose_drain()

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
        queued = attrs.evolve(pending, kind=PendingKind.QUEUED)
        self._apply(self._stamp(PendingMessageAdded(pending=queued)))
        self._apply(self._stamp(QueuedMessagesReordered(order=(queued.id,))))
        self._save_queue_positions()


def _outcome(ticket: Ticket, state: ChatState) -> TurnOutcome:
    """A ticket's outcome, from the published state its turn's end produced."""
    turn = next((t for t in reversed(state.turns) if t.id == ticket.turn_id), None)
    if turn is None:
        return TurnOutcome(state=OutcomeState.ERROR, turn_id=ticket.turn_id)
    return TurnOutcome(
        state=OutcomeState(turn.state.value),
        text=turn.assistant_text,
        error=turn.error,
        turn_id=turn.id,
    )
