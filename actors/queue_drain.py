"""QueueDrainActor: one per chat, the owner of its steering and queue bookkeeping.

It keeps the chat's steering ledger (actors/steering.py: the one copy) and
whether the queue is held, and acts on them:
- a client's removal of steering the provider holds is a request: it sends
  the provider connection a ProviderWithdraw where the provider can
  withdraw, and rejects at once where it cannot; a held or not yet handed
  message is simply dropped (DESIGN.md rule 1);
- it tells the tracker which steering message an echo consumed;
- it decides which pending message runs next (actors/queue_policy.py, a pure
  function of the chat state and this bookkeeping) when the chat may be idle,
  and the chat re-checks before it starts it.

The tracker hands steering to the provider (it orders calls to the provider:
steering never overtakes its turn) and reports what it did with each.

Hops: steer is chat -> tracker -> connection; a removal chat -> queue drain
-> connection -> provider -> connection -> queue drain -> chat; a drain
(queue drain -> chat) follows a turn end or a chat's DrainNow.
"""

import structlog

from agenthost.actors.context import Services
from agenthost.actors.hosted import HostedActor
from agenthost.actors.protocol import (
    DrainNow,
    EchoMatched,
    FromProvider,
    MatchEcho,
    ProviderConnected,
    ProviderGone,
    Ref,
    RemoveSteering,
    RequeueSteering,
    RunCancelled,
    StartNext,
    SteeringCancelled,
    SteeringConsumed,
    SteeringHandled,
    SteeringRemovalSettled,
    TrackSteering,
    TurnEndedWithPending,
    Unpark,
    UseTracker,
)
from agenthost.actors.queue_policy import NextKind, next_to_run
from agenthost.actors.runtime import handles
from agenthost.actors.steering import (
    Cancel,
    Effect,
    Requeue,
    Settle,
    SteeringLedger,
    Withdraw,
)
from agenthost.actors.steering import Unpark as UnparkEffect
from agenthost.messages.provider import (
    ProviderWithdraw,
    SteerAnswered,
    UserMessageEcho,
    WithdrawAnswered,
)
from agenthost.messages.state import ChatState

log = structlog.get_logger(__name__)


class QueueDrainActor(HostedActor):
    def __init__(
        self, services: Services, *, session_id: str, chat_id: str, chat: Ref, queue_held: bool
    ) -> None:
        """Args:
        queue_held: the chat was restored with messages pending: nothing queued
            starts on its own until a turn succeeds.
        """
        super().__init__(services)
        self.session_id = session_id
        self.chat_id = chat_id
        self.chat = chat
        self._ledger = SteeringLedger()
        self._queue_held = queue_held
        self._tracker: Ref | None = None
        self._conn: Ref | None = None
        self._generation = -1
        self._can_withdraw = False
        self._log = log.bind(session_id=session_id, chat_id=chat_id)

    def on_start(self) -> None:
        self.services.directory.register(self._key, self.actor_ref)

    def on_stop(self) -> None:
        self.services.directory.unregister(self._key, self.actor_ref)

    @property
    def _key(self) -> str:
        return drain_key(self.session_id, self.chat_id)

    @handles(UseTracker)
    def _use_tracker(self, message: UseTracker) -> None:
        self._tracker = message.tracker

    # -- steering ---------------------------------------------------------------------
    @handles(TrackSteering)
    def _track(self, message: TrackSteering) -> None:
        self._ledger.add(message.pending_id, message.text)

    @handles(SteeringHandled)
    def _handled(self, message: SteeringHandled) -> None:
        self._act(self._ledger.handled(message.pending_id, message.how, self._can_withdraw))

    @handles(RemoveSteering)
    def _remove(self, message: RemoveSteering) -> None:
        self._act(self._ledger.remove(message.pending_id, self._can_withdraw))

    @handles(FromProvider)
    def _from_provider(self, message: FromProvider) -> None:
        if message.generation != self._generation:
            return  # a dead connection's answers mean nothing
        for event in message.events:
            match event:
                case SteerAnswered():
                    if event.error is not None:
                        self._log.info(
                            "steering_requeued",
                            pending_id=event.pending_id,
                            reason=event.error.message,
                            no_active_turn=event.no_active_turn,
                        )
                    self._act(
                        self._ledger.answered(
                            event.pending_id,
                            event.provider_message_id,
                            refused=event.error is not None,
                            may_withdraw=self._can_withdraw,
                        )
                    )
                case WithdrawAnswered():
                    if event.pending_id not in self._ledger and event.removed:
                        self._log.error("withdraw_after_consumption", pending_id=event.pending_id)
                    self._act(self._ledger.withdrawn(event.pending_id, event.removed))

    @handles(MatchEcho)
    def _match(self, message: MatchEcho) -> None:
        echo = message.echo
        entry = self._ledger.match(echo) if isinstance(echo, UserMessageEcho) else None
        self.send(
            message.reply_to,
            EchoMatched(
                token=message.token,
                pending_id=None if entry is None else entry.pending_id,
                text="" if entry is None else entry.text,
            ),
        )

    @handles(SteeringConsumed)
    def _consumed(self, message: SteeringConsumed) -> None:
        self._ledger.consumed(message.pending_id)

    @handles(RunCancelled)
    def _run_cancelled(self, message: RunCancelled) -> None:
        self._act(self._ledger.cancelled())

    @handles(ProviderConnected)
    def _connected(self, message: ProviderConnected) -> None:
        self._conn = message.ref
        self._generation = message.generation
        self._can_withdraw = message.can_withdraw

    @handles(ProviderGone)
    def _gone(self, message: ProviderGone) -> None:
        """Its turn ends without success: what it had waits with the queue."""
        self._conn = None
        self._queue_held = True
        self._act(self._ledger.provider_gone())

    def _act(self, effects: list[Effect]) -> None:
        for effect in effects:
            match effect:
                case Settle(pending_id, outcome):
                    self.send(
                        self.chat, SteeringRemovalSettled(pending_id=pending_id, outcome=outcome)
                    )
                case Withdraw(pending_id, provider_message_id, text):
                    self.send(
                        self._conn,
                        ProviderWithdraw(
                            session_id=self.session_id,
                            chat_id=self.chat_id,
                            pending_id=pending_id,
                            provider_message_id=provider_message_id,
                            text=text,
                        ),
                    )
                case Requeue(pending_id):
                    self.send(self.chat, RequeueSteering(pending_id=pending_id))
                case Cancel(pending_ids):
                    self.send(self.chat, SteeringCancelled(pending_ids=pending_ids))
                case UnparkEffect(pending_id):
                    self.send(self._tracker, Unpark(pending_id=pending_id))

    # -- the queue ---------------------------------------------------------------------------
    @handles(TurnEndedWithPending)
    def _turn_ended(self, message: TurnEndedWithPending) -> None:
        if message.succeeded is False:
            self._queue_held = True
            return
        if message.succeeded:
            self._queue_held = False
        if message.drain:
            self._drain(message.state)

    @handles(DrainNow)
    def _drain_now(self, message: DrainNow) -> None:
        self._drain(message.state)

    def _drain(self, state: ChatState) -> None:
        chosen = next_to_run(
            state,
            held_steering=self._ledger.held(),
            steering_on_provider=self._ledger.on_provider(),
            queue_held=self._queue_held,
        )
        if chosen is None:
            return
        text = ""
        if chosen.kind is NextKind.HELD_STEERING:
            entry = self._ledger.get(chosen.pending_id)
            text = "" if entry is None else entry.text
            self._ledger.take_held(chosen.pending_id)
        self.send(self.chat, StartNext(kind=chosen.kind, pending_id=chosen.pending_id, text=text))


def drain_key(session_id: str, chat_id: str) -> str:
    """A chat's queue drain in the host's directory."""
    return f"{session_id}/{chat_id}/drain"
