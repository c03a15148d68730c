"""QueueDrainActor: decides when the head of a chat's queue may start.

The chat's reducer owns the queue; this actor only proposes. A queued
message never reaches the provider until the turn before it ended
successfully: after a cancel or an error the queue holds until the next
successful turn. The chat re-checks a proposal against its state before it
acts on it.
"""

from agenthost.actors.context import Services
from agenthost.actors.hosted import HostedActor
from agenthost.actors.protocol import ProposeDrain, Ref, StartQueued
from agenthost.actors.runtime import handles
from agenthost.messages.state import TurnState


class QueueDrainActor(HostedActor):
    def __init__(self, services: Services, *, chat: Ref) -> None:
        super().__init__(services)
        self.chat = chat

    @handles(ProposeDrain)
    def _propose(self, message: ProposeDrain) -> None:
        if message.active or not message.queued_ids:
            return
        if message.last_turn_state != TurnState.COMPLETE.value:
            return
        self.send(self.chat, StartQueued(pending_id=message.queued_ids[0]))
