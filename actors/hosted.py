"""`HostedActor`: an actor that belongs to one host's group and services."""

from collections.abc import Callable
from typing import Any

from agenthost.actors.context import Services
from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.protocol import Durable, Flush
from agenthost.actors.runtime import Actor, handles
from agenthost.messages.errors import AgentHostError, ErrorCode


class HostedActor(Actor):
    """Registers in its host's group at construction; leaves it once stopped."""

    def __init__(self, services: Services) -> None:
        super().__init__()
        self.services = services
        services.group.add(self.actor_ref)

    def after_stop(self) -> None:
        self.services.group.discard(self.actor_ref)

    def after_commit(self, answer: Callable[[], Any]) -> RuntimeFuture:
        """A deferred reply: `answer()` once the store committed every write this
        actor sent it so far (a Flush behind them), so whoever reads the store
        next (another front) finds them. Never blocks."""
        reply = RuntimeFuture()
        ref = self.actor_ref

        def committed(_: object) -> None:  # on the store's thread
            if not Actor.send(ref, Durable(reply=reply, answer=answer)):  # it stopped meanwhile
                from agenthost.actors.calls import HOST_STOPPED  # (calls imports the actors)

                stopped = AgentHostError(code=ErrorCode.HOST_STOPPED, message=HOST_STOPPED)
                reply.set_exception(exc_info=(AgentHostError, stopped, None))

        flushed = self.services.store.ask(Flush(), block=False)
        assert isinstance(flushed, RuntimeFuture)  # every runtime's futures are
        flushed.add_done_callback(committed)
        return reply

    @handles(Durable)
    def _durable(self, message: Durable) -> None:
        try:
            message.reply.set(message.answer())
        except Exception:
            message.reply.set_exception()
