"""QueueDrainActor: queued and steering messages, one per chat.

The chat's reducer owns the pending lists; this actor owns the policy:
- a steering message goes to the provider at once (through the turn tracker,
  which owns the provider stream) where the provider accepts steering; where
  it does not, it is held and runs as the next turn;
- a client's removal of steering the provider holds is a request: withdraw
  where the provider can, reject at once where it cannot; a held or
  not-yet-sent message is simply dropped (DESIGN.md rule 1). The host's own
  removals (consumed, cancel) never withdraw;
- the head of the queue starts when the chat is idle, never while steering
  is pending (that runs first); a message queued when a turn ended without
  success (a cancel, an error) waits for the next successful turn.
The chat re-checks every proposal against its state before acting on it.
"""

from agenthost.actors.context import Services
from agenthost.actors.hosted import HostedActor
from agenthost.actors.protocol import (
    ProposeDrain,
    ProviderCapabilities,
    Ref,
    RemovalOutcome,
    RemoveSteering,
    RequeueSteering,
    SendSteering,
    StartHeldSteering,
    StartQueued,
    Steer,
    SteeringCancelled,
    SteeringConsumed,
    SteeringRemovalSettled,
    UseTracker,
    WithdrawSteering,
)
from agenthost.actors.runtime import handles
from agenthost.messages.provider import Capabilities


class QueueDrainActor(HostedActor):
    def __init__(self, services: Services, *, chat: Ref) -> None:
        super().__init__(services)
        self.chat = chat
        self._tracker: Ref | None = None
        self._capabilities: Capabilities | None = None
        self._handed: set[str] = set()  # given to the tracker (and so to the provider)
        self._held: list[str] = []  # kept for a provider without mid-turn input

    @handles(UseTracker)
    def _use_tracker(self, message: UseTracker) -> None:
        self._tracker = message.tracker

    @handles(ProviderCapabilities)
    def _capabilities_known(self, message: ProviderCapabilities) -> None:
        self._capabilities = message.capabilities

    # -- steering -----------------------------------------------------------------------
    @handles(Steer)
    def _steer(self, message: Steer) -> None:
        if self._capabilities is not None and not self._capabilities.accepts_steering:
            self._held.append(message.pending_id)
            return
        self._handed.add(message.pending_id)
        self.send(
            self._tracker,
            SendSteering(
                pending_id=message.pending_id, text=message.text, for_turn=message.for_turn
            ),
        )

    @handles(RemoveSteering)
    def _remove(self, message: RemoveSteering) -> None:
        pending_id = message.pending_id
        if pending_id in self._held:
            self._held.remove(pending_id)
            self._settled(
                SteeringRemovalSettled(pending_id=pending_id, outcome=RemovalOutcome.DROPPED)
            )
        elif pending_id in self._handed:
            may = self._capabilities is not None and self._capabilities.can_withdraw_steering
            self.send(self._tracker, WithdrawSteering(pending_id=pending_id, may_withdraw=may))
        else:
            self._settled(
                SteeringRemovalSettled(pending_id=pending_id, outcome=RemovalOutcome.GONE)
            )

    @handles(SteeringRemovalSettled)
    def _settled(self, message: SteeringRemovalSettled) -> None:
        if message.outcome in (RemovalOutcome.DROPPED, RemovalOutcome.WITHDRAWN):
            self._handed.discard(message.pending_id)
        self.send(self.chat, message)

    @handles(SteeringConsumed)
    def _consumed(self, message: SteeringConsumed) -> None:
        self._handed.discard(message.pending_id)

    @handles(RequeueSteering)
    def _requeue(self, message: RequeueSteering) -> None:
        self._handed.discard(message.pending_id)
        self.send(self.chat, message)

    @handles(SteeringCancelled)
    def _cancelled(self, message: SteeringCancelled) -> None:
        for pending_id in message.pending_ids:
            self._handed.discard(pending_id)
        self.send(self.chat, message)

    # -- the queue ---------------------------------------------------------------------------
    @handles(ProposeDrain)
    def _propose(self, message: ProposeDrain) -> None:
        if self._held:
            self.send(self.chat, StartHeldSteering(pending_id=self._held.pop(0)))
            return
        if self._handed or not message.queued_ids:
            return  # steering the provider holds runs first
        if message.head_held:
            return  # a cancel or an error holds what was queued then
        self.send(self.chat, StartQueued(pending_id=message.queued_ids[0]))
