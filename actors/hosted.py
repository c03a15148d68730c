"""`HostedActor`: an actor that belongs to one host's group and services."""

from typing import Any

from agenthost.actors.context import Services
from agenthost.actors.runtime import Actor


class HostedActor(Actor):
    """Registers in its host's group at construction; leaves it when it stops."""

    def __init__(self, services: Services) -> None:
        super().__init__()
        self.services = services
        services.group.add(self.actor_ref)

    def _stop(self) -> None:
        self.services.group.discard(self.actor_ref)
        super()._stop()

    def _handle_failure(self, *exc_info: Any) -> None:
        self.services.group.discard(self.actor_ref)
        super()._handle_failure(*exc_info)
