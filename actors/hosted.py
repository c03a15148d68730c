"""`HostedActor`: an actor that belongs to one host's group and services."""

from agenthost.actors.context import Services
from agenthost.actors.runtime import Actor


class HostedActor(Actor):
    """Registers in its host's group at construction; leaves it once stopped."""

    def __init__(self, services: Services) -> None:
        super().__init__()
        self.services = services
        services.group.add(self.actor_ref)

    def after_stop(self) -> None:
        self.services.group.discard(self.actor_ref)
