"""ChatSteering: what a chat does with steering, between ChatActor's client
commands (actors/chat.py) and ChatInputs, on top of ChatCore.

A steering message for the running turn is tracked by the queue drain and
handed over by the turn tracker (the drain first, so it knows it before the
tracker reports). What became of it comes back from them: recorded in the
running turn, started as a turn of its own, withdrawn or not on a removal,
cancelled with its turn, or requeued at the head of the queue; a removal is
answered once what it did is published (DESIGN.md rule 1: a steering message
the provider holds is removed only once the provider withdrew it).
"""

import attrs

from agenthost.actors.admission import Origin
from agenthost.actors.chat_inputs import ChatInputs
from agenthost.actors.protocol import (
    HandOverSteering,
    RecordSteering,
    RemovalOutcome,
    RequeueSteering,
    StartSteeringTurn,
    SteeringCancelled,
    SteeringRemovalSettled,
    TrackSteering,
)
from agenthost.actors.publisher import Publication
from agenthost.actors.runtime import handles
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    PendingMessageRemoved,
    RemovalReason,
    SteeringNotWithdrawn,
    SteeringRecorded,
    SteeringWithdrawn,
)
from agenthost.messages.state import (
    MessageOrigin,
    OriginKind,
    PendingKind,
    PendingMessage,
    UserMessage,
)
from agenthost.store.records import (
    DeletePending,
    SaveSteeringRecorded,
)

STEERING_BUSY = "Cannot change a steering message while it is being processed"
STEERING_NOT_WITHDRAWN = AgentHostError(
    code=ErrorCode.INVALID_ARGUMENT,
    message="The model already had this steering message; it stays until the model reads it.",
)


class ChatSteering(ChatInputs):
    def _hand_over(self, pending: PendingMessage) -> None:
        """Steering for the running turn: the queue drain tracks it (first, so it
        knows it before the tracker reports), the tracker hands it over."""
        self.send(self._drain, TrackSteering(pending_id=pending.id, text=pending.text))
        self.send(
            self._tracker,
            HandOverSteering(
                pending_id=pending.id, text=pending.text, for_turn=self._state.active_turn_id
            ),
        )

    @handles(SteeringCancelled)
    def _steering_cancelled(self, message: SteeringCancelled) -> None:
        """A cancel ended the turn these were for: the host's own removal."""
        for pending_id in message.pending_ids:
            pending = self._pending(pending_id)
            if pending is not None:
                self._remove_pending(pending, RemovalReason.CANCELLED)
            self._answer_removal(pending_id, True)
        self._drain_point()

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
        self._write(DeletePending(chat_id=self.chat_id, pending_id=message.pending_id))
        active = self._state.active_turn
        self._write(
            SaveSteeringRecorded(
                chat_id=self.chat_id,
                turn_id=message.turn_id,
                pending_id=message.pending_id,
                text=message.text,
                position=len(active.steering) - 1 if active else 0,
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
            self._admission.refused(self._stamp(removal), self._state, Origin(), error)
            self._answer_removal(message.pending_id, error)
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
            self._drain_point()
            return
        if outcome is RemovalOutcome.NOT_WITHDRAWN:
            self._log.warning("steering_not_withdrawn", pending_id=message.pending_id)
            self._apply(self._stamp(SteeringNotWithdrawn(pending_id=message.pending_id)))
            self._admission.refused(
                self._stamp(removal), self._state, Origin(), STEERING_NOT_WITHDRAWN
            )
        self._answer_removal(message.pending_id, False)

    def _answer_removal(self, pending_id: str, answer: bool | AgentHostError) -> None:
        """Those removing `pending_id` hear how it ended, once that is published."""
        for future in self._waiting.removals.pop(pending_id, []):
            self._publisher.add(
                Publication(after_write=0, state=self._state, reply=future, value=answer)
            )
        self._publish_ready()

    @handles(RequeueSteering)
    def _requeue(self, message: RequeueSteering) -> None:
        pending = self._pending(message.pending_id)
        if pending is None or pending.kind is not PendingKind.STEERING:
            return
        self._to_queue(pending)
        self._answer_removal(pending.id, False)
        self._drain_point()
