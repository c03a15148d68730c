"""ChatActor: what a chat hears, from its clients and its queue drain.

Client commands (send, steer, remove, edit and reorder pending messages,
answer, cancel, truncate, draft, read-only) and the queue drain's steering
outcomes, on top of ChatSteering (actors/chat_steering.py: what becomes of
steering), ChatInputs (actors/chat_inputs.py) and ChatCore
(actors/chat_core.py), which holds the state and starts and ends turns.
Provider work goes through the chat's TurnTrackerActor; steering bookkeeping
and which pending message runs next through its QueueDrainActor. While the
session decides to leave memory, the chat holds client commands and answers
them once it stays.
"""

from collections import deque
from collections.abc import Sequence
from typing import Any

import attrs
import structlog

from agenthost.actors.admission import Origin
from agenthost.actors.chat_core import Attach
from agenthost.actors.chat_inputs import INPUT_COMMANDS, synced_into
from agenthost.actors.chat_steering import STEERING_BUSY, ChatSteering
from agenthost.actors.chosen_ids import check_new_ids, not_cancellable, queued_turn
from agenthost.actors.contributions import Accept, TurnEndReason
from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.handles import Ticket
from agenthost.actors.protocol import (
    AnswerSettled,
    ApplyActions,
    AssistantStable,
    CancelActiveTurn,
    ChatReady,
    ClientRemoved,
    ClientToolsChanged,
    DeltaRun,
    Diagnose,
    EndTurn,
    PrepareRelease,
    ReleaseAborted,
    ReleaseVote,
    RemoveSteering,
    ReportStatus,
    SpawnSubagentChat,
    StartNext,
    StartProviderTurn,
)
from agenthost.actors.publisher import Publication
from agenthost.actors.queue_policy import NextKind, started_from
from agenthost.actors.runtime import handles
from agenthost.messages.commands import (
    AnswerRequest,
    CancelTurn,
    EditPendingMessage,
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
    DraftChanged,
    PendingMessageAdded,
    PendingMessageRemoved,
    QueuedMessagesReordered,
    ReadOnlyChanged,
    RemovalReason,
    Truncated,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
)
from agenthost.messages.ids import new_id
from agenthost.messages.reducers import ended_parts
from agenthost.messages.reduction import ACTIVE_REDUCERS, reduce_active_run
from agenthost.messages.state import (
    ChatState,
    PendingKind,
    PendingMessage,
    Turn,
    TurnState,
    UserMessage,
)
from agenthost.store.records import (
    SaveAssistantText,
    SaveChatMeta,
    SaveTurnEnded,
)
from agenthost.store.records import TruncateChat as TruncateStoredChat

log = structlog.get_logger(__name__)


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
    *INPUT_COMMANDS,
)


def _not_pending(pending_id: str) -> AgentHostError:
    return AgentHostError(
        code=ErrorCode.NOT_FOUND,
        message=f"message {pending_id} is not pending (it ran, or was removed)",
    )


ENDED_AS = {
    TurnCompleted: TurnState.COMPLETE,
    TurnCancelled: TurnState.CANCELLED,
    TurnFailed: TurnState.ERROR,
}


def _end_reason(turn: Turn) -> TurnEndReason:
    if turn.state is TurnState.COMPLETE:
        return TurnEndReason.SUCCESS
    if turn.state is TurnState.CANCELLED:
        return TurnEndReason.CANCELLED
    if turn.error is not None and turn.error.code is ErrorCode.EXECUTION_ABANDONED:
        return TurnEndReason.ABANDONED
    return TurnEndReason.ERROR


class ChatActor(ChatSteering):
    """A chat's actor: ChatCore, and the handlers of what it hears (those about
    what a turn asks of its clients in ChatInputs)."""

    # -- client commands ---------------------------------------------------------------------
    @handles(SendMessage)
    def _send(self, message: SendMessage) -> Any:
        self._admission.refuse_if_driven()
        check_new_ids(self._state, message.turn_id, message.pending_id)
        user = UserMessage(text=message.text, attachments=message.attachments)
        origin = Origin(message.client_id)
        if not self._busy():
            # A message set as queued while idle runs at once; its turn says it came
            # from that id (AHP: a client that queued it sees it leave the queue).
            if message.pending_id is not None:
                user = started_from(PendingKind.QUEUED, user)
            ticket = self._admit(
                Ticket(), user, origin, from_pending=message.pending_id, turn_id=message.turn_id
            )
            return self._reply(ticket)
        # Queued with the turn id its sender chose, if any: its turn runs under it.
        pending = self._add_pending(
            PendingKind.QUEUED, user, origin, message.pending_id, turn_id=message.turn_id
        )
        ticket = Ticket(pending_id=pending.id)
        self._waiting.tickets[pending.id] = ticket
        return self._reply(ticket)

    @handles(SteerMessage)
    def _steer(self, message: SteerMessage) -> Any:
        self._admission.refuse_if_driven()
        check_new_ids(self._state, message.pending_id)
        origin = Origin(message.client_id)
        text = UserMessage(text=message.text)
        if not self._busy():  # while idle, steering is simply a send
            pending_id = message.pending_id or new_id()
            ticket = Ticket(pending_id=pending_id)
            pending = PendingMessage(id=pending_id, kind=PendingKind.STEERING, message=text)
            steering = started_from(PendingKind.STEERING, text)
            self._admit(ticket, steering, origin, steer=True, from_pending=pending_id)
            return self._reply(SteerReply(pending=pending, ticket=ticket))
        verdict = self._admission.admit(message.text, origin, self._state, steer=True)
        if not isinstance(verdict, Accept):  # settled at once, like a send while idle
            ticket = Ticket()
            self._settle(verdict, ticket, text, origin)
            pending = PendingMessage(id=new_id(), kind=PendingKind.STEERING, message=text)
            return self._reply(SteerReply(pending=pending, ticket=ticket))
        pending = self._add_pending(PendingKind.STEERING, text, origin, message.pending_id)
        self._hand_over(pending)
        return self._reply(SteerReply(pending=pending))

    @handles(RemovePendingMessage)
    def _remove(self, message: RemovePendingMessage) -> Any:
        pending = self._pending(message.pending_id)
        if pending is None:
            removal = PendingMessageRemoved(kind=PendingKind.QUEUED, pending_id=message.pending_id)
            error = _not_pending(message.pending_id)
            self._admission.refused(
                self._stamp(removal), self._state, Origin(message.client_id), error
            )
            return self._reply(error)
        if pending.kind is PendingKind.QUEUED:
            self._remove_pending(pending, RemovalReason.CLIENT, Origin(message.client_id))
            ticket = self._waiting.tickets.pop(pending.id, None)
            if ticket is not None:
                ticket.resolve(TurnOutcome(state=OutcomeState.REMOVED))
            return self._reply(True)
        future = RuntimeFuture()
        first = pending.id not in self._waiting.removals
        self._waiting.removals.setdefault(pending.id, []).append(future)
        if first:
            self.send(self._drain, RemoveSteering(pending_id=pending.id))
        return future

    @handles(EditPendingMessage)
    def _edit(self, message: EditPendingMessage) -> Any:
        pending = self._pending(message.pending_id) or PendingMessage(
            id=message.pending_id, kind=PendingKind.QUEUED, message=UserMessage(text="")
        )
        edited = attrs.evolve(pending, message=attrs.evolve(pending.message, text=message.text))
        refusal = None
        if self._pending(message.pending_id) is None:
            refusal = _not_pending(message.pending_id)
        elif pending.kind is PendingKind.STEERING:
            refusal = AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message=STEERING_BUSY)
        if refusal is not None:
            added = self._stamp(PendingMessageAdded(pending=edited))
            self._admission.refused(added, self._state, Origin(), refusal)
            return self._reply(refusal)
        self._apply(self._stamp(PendingMessageAdded(pending=edited)), origin=Origin())
        self._save_queue_positions()
        return self._reply(edited)

    @handles(ReorderQueue)
    def _reorder(self, message: ReorderQueue) -> Any:
        self._apply(
            self._stamp(QueuedMessagesReordered(order=message.pending_ids)), origin=Origin()
        )
        self._save_queue_positions()
        return self._reply(self._state.queued_messages)

    @handles(AnswerRequest)
    def _answer(self, message: AnswerRequest) -> RuntimeFuture:
        future = RuntimeFuture()
        self._waiting.answers.setdefault(message.request_id, deque()).append(future)
        self.send(self._tracker, synced_into(self._state, message))
        return future

    @handles(AnswerSettled)
    def _answer_settled(self, message: AnswerSettled) -> None:
        waiting = self._waiting.answers.get(message.request_id)
        if not waiting:
            return
        future = waiting.popleft()
        if not waiting:
            del self._waiting.answers[message.request_id]
        answer: Any = None if message.error is None else message.error
        self._publisher.add(
            Publication(after_write=0, state=self._state, reply=future, value=answer)
        )
        self._publish_ready()

    @handles(GetDiagnostics)
    def _diagnostics(self, message: GetDiagnostics) -> Any:
        assert self._tracker is not None
        return self._tracker.ask(Diagnose(), block=False)

    @handles(ClientToolsChanged, ClientRemoved)
    def _clients(self, message: ClientToolsChanged | ClientRemoved) -> None:
        self.send(self._tracker, message)

    @handles(TruncateChat)
    def _truncate(self, message: TruncateChat) -> Any:
        truncation = self._stamp(Truncated(turn_id=message.turn_id))
        refusal = None
        if self._state.active_turn is not None:
            refusal = AgentHostError(
                code=ErrorCode.INVALID_ARGUMENT,
                message="A turn is running: cancel it before truncating the chat.",
            )
        elif message.turn_id is not None and all(
            t.id != message.turn_id for t in self._state.turns
        ):
            refusal = AgentHostError(
                code=ErrorCode.NOT_FOUND,
                message=f"chat {self.chat_id} has no turn {message.turn_id}",
            )
        if refusal is not None:
            self._admission.refused(truncation, self._state, Origin(), refusal)
            return self._reply(refusal)
        self._apply(truncation, origin=Origin())
        self._write(
            TruncateStoredChat(chat_id=self.chat_id, keep=tuple(t.id for t in self._state.turns))
        )
        return self._reply(self._state)

    @handles(CancelTurn)
    def _cancel(self, message: CancelTurn) -> Any:
        """True once the turn it cancelled ended as cancelled and that end is
        published (read your writes); False when none runs, or when the turn's own
        end overtook the cancel. A cancel naming a turn: that turn's, or its queued
        message's removal (True at once), or refused saying why (actors/chosen_ids.py)."""
        active = self._state.active_turn
        if message.turn_id is not None and (active is None or active.id != message.turn_id):
            return self._cancel_queued(message.turn_id, Origin(message.client_id))
        if active is None:
            idle = AgentHostError(code=ErrorCode.NOT_FOUND, message="No turn is running.")
            self._admission.refused(
                self._stamp(TurnCancelled(turn_id="")), self._state, Origin(), idle
            )
            return self._reply(False)
        future = RuntimeFuture()
        self._waiting.cancels.setdefault(active.id, []).append(future)
        self.send(self._tracker, CancelActiveTurn(turn_id=active.id))
        return future

    def _cancel_queued(self, turn_id: str, origin: Origin) -> Any:
        queued = queued_turn(self._state, turn_id)
        if queued is None:
            refusal = not_cancellable(self._state, turn_id)
            cancel = self._stamp(TurnCancelled(turn_id=turn_id))
            self._admission.refused(cancel, self._state, origin, refusal)
            return self._reply(refusal)
        self._remove_pending(queued, RemovalReason.CLIENT, origin)
        ticket = self._waiting.tickets.pop(queued.id, None)
        if ticket is not None:
            ticket.resolve(TurnOutcome(state=OutcomeState.REMOVED))
        return self._reply(True)

    @handles(SetDraft)
    def _set_draft(self, message: SetDraft) -> Any:
        draft = DraftChanged(draft=message.text or None)
        self._apply(self._stamp(draft), origin=Origin(message.client_id))
        return self._reply(None)

    @handles(SetReadOnly)
    def _set_read_only(self, message: SetReadOnly) -> Any:
        if message.read_only != self._admission.read_only:
            self._admission.read_only = message.read_only
            self._write(SaveChatMeta(chat_id=self.chat_id, read_only=message.read_only))
            self._apply(self._stamp(ReadOnlyChanged(read_only=message.read_only)), origin=Origin())
        return self._reply(None)

    @handles(StartNext)
    def _start_next(self, message: StartNext) -> None:
        """The queue drain's choice; the state may have moved on since it chose."""
        pending = self._pending(message.pending_id)
        if message.kind is NextKind.HELD_STEERING:
            if pending is None:
                return
            if self._state.active_turn is not None:  # a direct send got there first: hold it again
                self._hand_over(pending)
                return
            self._start_turn(started_from(pending.kind, pending.message), from_pending=pending.id)
            return
        queued = self._state.queued_messages
        if self._busy() or not queued:
            return  # a later turn end drains again
        if queued[0].id != message.pending_id:
            self._drain_point()  # the queue changed since: decide again
            return
        head = queued[0]
        ticket = self._waiting.tickets.pop(head.id, None) or Ticket(pending_id=head.id)
        self._admit(
            ticket,
            started_from(head.kind, head.message),
            Origin(self._admission.sender_of(head.id), from_client=False),
            from_pending=head.id,
            turn_id=head.turn_id,
        )

    @handles(StartProviderTurn)
    def _start_provider_turn(self, message: StartProviderTurn) -> None:
        if self._state.active_turn is None:
            self._start_turn(UserMessage(text=message.text), turn_id=message.turn_id)

    @handles(SpawnSubagentChat)
    def _spawn_subagent(self, message: SpawnSubagentChat) -> None:
        self.send(self.session, message)

    # -- from the turn tracker and the queue drain -----------------------------------------------
    @handles(ChatReady)
    def _chat_ready(self, message: ChatReady) -> None:
        self.send(self.session, message)

    @handles(ApplyActions)
    def _apply_actions(self, message: ApplyActions) -> None:
        """A burst of the provider's actions, published together. Actions in a row
        that change only the active turn (parts, text, usage) that no contribution
        observes are reduced at once (nobody can see the states between them: they
        are published together); a DeltaRun as its joined text, unless a
        contribution observes deltas."""
        actions = message.actions
        if self._admission.observed(AssistantDelta):
            actions = _each_delta(actions)  # type: ignore[assignment]
        run: list[Any] = []  # a DeltaRun, or an action of ACTIVE_REDUCERS' types
        try:
            for action in actions:
                kind = type(action)
                if kind is DeltaRun or (
                    kind in ACTIVE_REDUCERS and not self._admission.observed(kind)
                ):
                    run.append(action)
                    continue
                if run:
                    self._apply_run(run)
                    run = []
                self._apply(action, publish=False)  # type: ignore[arg-type]  # not a DeltaRun
            if run:
                self._apply_run(run)
        finally:
            self._publish_ready()

    def _apply_run(self, run: list[Any]) -> None:
        reduced = [a.joined() if type(a) is DeltaRun else a for a in run]
        self._state = reduce_active_run(self._state, reduced)
        # each as it came, with the run's end state (made only for those who take them)
        self._publisher.events_of(lambda: _each_delta(run), self._state)

    @handles(AssistantStable)
    def _assistant_stable(self, message: AssistantStable) -> None:
        stable = self._writes.stable.get(message.turn_id)
        if stable is None:
            return
        stable.append(message.text)
        self._write(
            SaveAssistantText(chat_id=self.chat_id, turn_id=message.turn_id, text="".join(stable))
        )

    @handles(EndTurn)
    def _end_turn(self, message: EndTurn) -> None:
        action = message.action
        turn_id: str = action.turn_id  # type: ignore[attr-defined]
        if self._state.active_turn_id != turn_id:
            self._log.info("turn_end_ignored", turn_id=turn_id, reason="not active")
            return
        active = self._state.active_turn
        assert active is not None
        pieces = self._writes.stable.pop(turn_id, [])
        if message.stable:
            pieces.append(message.stable)
        stable = "".join(pieces)
        failed = action if isinstance(action, TurnFailed) else None
        seq = self._write(
            SaveTurnEnded(
                chat_id=self.chat_id,
                turn_id=turn_id,
                state=ENDED_AS[type(action)],
                assistant_text=stable,
                ended_at=self.services.clock.wall_ms(),
                error=None if failed is None else failed.error,
                finish_reason=message.finish_reason,
                usage=active.usage,
                response_parts=ended_parts(
                    active.response_parts, None if failed is None else failed.part
                ),
            ),
            gate=True,
        )
        # Its end reaches subscribers, and its sender, once the store committed it.
        self._apply(action, after_write=seq, ticket=self._waiting.tickets.pop(turn_id, None))
        # A cancel hears whether it ended the turn: False when the turn's own end
        # (a completion, an error) overtook it.
        cancelled = isinstance(action, TurnCancelled)
        for future in self._waiting.cancels.pop(turn_id, []):
            self._publisher.add(
                Publication(after_write=seq, state=self._state, reply=future, value=cancelled)
            )
        turn = self._state.turns[-1]
        self._log.info(
            "turn_ended",
            turn_id=turn_id,
            outcome=turn.state.value,
            error=None if turn.error is None else turn.error.code.value,
            reason=None if turn.error is None else turn.error.message,
            assistant_chars=len(stable),
        )
        self._admission.turn_ended(_end_reason(turn), turn, self._state, None)

    # -- leaving memory --------------------------------------------------------------------------
    def on_stop(self) -> None:
        super().on_stop()
        # Whatever still holds this actor once it stopped (a handle kept by a
        # server's cache or an embedder holds its ref, and through it the actor)
        # holds none of its turns: 60 turns of 0.9 MB stayed in memory so.
        empty = ChatState(resource=self._state.resource)
        self._state = self._publisher.published = empty
        self._writes.stable.clear()

    def on_receive(self, message: Any) -> Any:
        if self._closing is not None and isinstance(message, CLIENT_COMMANDS):
            future = RuntimeFuture()  # answered when the session stays, or fails when it goes
            self._closing.append((message, future))
            return future
        return super().on_receive(message)

    @handles(PrepareRelease)
    def _prepare_release(self, message: PrepareRelease) -> None:
        """Agree only with nothing running, watched or waited on, idle for the time
        asked; for a deletion, only while the chat never held anything (DESIGN.md
        rule 4). A refusal says since when the chat is idle, if it is."""
        waited_on = self._waiting.any() or self._publisher.waited_on()
        if self._busy() or self._publisher.subscribers or waited_on:
            self.send(self.session, ReleaseVote(chat_id=self.chat_id, ok=False))
            return
        idle_since = self._reported.idle_since
        used = message.collect and bool(self._state.turns or self._state.pending)
        ok = not used and self.services.clock.now() - idle_since >= message.idle_for
        if ok:
            self._closing = []
        self.send(
            self.session,
            ReleaseVote(
                chat_id=self.chat_id, ok=ok, idle_since=None if ok else idle_since, used=used
            ),
        )

    @handles(ReportStatus)
    def _report_wanted(self, message: ReportStatus) -> None:
        self._reported.wanted = True
        self._report_status()

    @handles(ReleaseAborted)
    def _release_aborted(self, message: ReleaseAborted) -> None:
        held, self._closing = self._closing or [], None
        for command, future in held:
            try:
                future.set(super().on_receive(command))
            except Exception:
                future.set_exception()


def _each_delta(actions: Sequence[ChatEvent | DeltaRun]) -> list[ChatEvent]:
    """`actions` with each DeltaRun as its deltas."""
    each: list[ChatEvent] = []
    for action in actions:
        if type(action) is DeltaRun:
            each.extend(action.deltas())
        else:
            each.append(action)  # type: ignore[arg-type]
    return each
