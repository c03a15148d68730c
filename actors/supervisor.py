"""SupervisorActor: parent of every provider connection; restarts failed ones.

one_for_one: a connection that dies is restarted alone, with exponential
backoff and jitter on the host clock, at most `intensity` times within
`period` seconds. Its owner (the chat's turn tracker) hears ConnectionLost
first, so turns whose producer died end as execution_abandoned; nothing else
about the session changes. Past the limit the owner hears
ProviderUnavailable, and sends fail at once with a clear error, until the
connection is started again after a cool-down (the owner then hears
CoolDownEnded, and turns wait for the connection as after any restart).
While a connection cools down its provider counts as unavailable in
`services.health` (what `Host.on_providers_changed` reports).
"""

import random

import attrs
import structlog

from agenthost.actors.context import Services
from agenthost.actors.hosted import HostedActor
from agenthost.actors.protocol import (
    CloseConnection,
    ConnectionDied,
    ConnectionLost,
    CoolDownEnded,
    GetCounters,
    OpenConnection,
    ProviderUnavailable,
    Ref,
    RestartConnection,
    ResumeFellBack,
)
from agenthost.actors.provider_connection import ProviderConnectionActor
from agenthost.actors.runtime import handles
from agenthost.messages.errors import AgentHostError, ErrorCode

log = structlog.get_logger(__name__)


@attrs.frozen(kw_only=True)
class RestartPolicy:
    intensity: int = 5
    period: float = 60.0
    backoff_min: float = 0.05
    backoff_max: float = 2.0
    cooldown: float = 30.0

    def delay(self, restarts_so_far: int, rng: random.Random) -> float:
        if restarts_so_far == 0:
            return 0.0
        base = min(self.backoff_max, self.backoff_min * 2 ** (restarts_so_far - 1))
        return base * (0.5 + rng.random() / 2)


@attrs.define
class _Child:
    session_id: str
    chat_id: str
    provider: str
    owner: Ref
    steering: Ref
    ref: Ref
    generation: int
    restarts: list[float] = attrs.field(factory=list)  # a deque is 600 B per idle chat
    cooling: bool = False  # marked unavailable: its next start ends the cool-down


class SupervisorActor(HostedActor):
    def __init__(self, services: Services, policy: RestartPolicy | None = None) -> None:
        super().__init__(services)
        self.policy = policy or RestartPolicy()
        self._children: dict[tuple[str, str], _Child] = {}
        self._rng = random.Random()
        self.restarts = 0
        self.resume_fallbacks = 0

    def _start_child(self, child: _Child, resume: bool) -> Ref:
        return ProviderConnectionActor.start(
            self.services,
            session_id=child.session_id,
            chat_id=child.chat_id,
            provider=child.provider,
            owner=child.owner,
            steering=child.steering,
            generation=child.generation,
            resume=resume,
        )

    @handles(OpenConnection)
    def _open(self, message: OpenConnection) -> None:
        key = (message.session_id, message.chat_id)
        previous = self._children.get(key)
        child = _Child(
            session_id=message.session_id,
            chat_id=message.chat_id,
            provider=message.provider,
            owner=message.owner,
            steering=message.steering,
            ref=None,  # type: ignore[arg-type]
            generation=0 if previous is None else previous.generation + 1,
        )
        if previous is not None:
            previous.ref.stop(block=False)
            self._cooled(previous)
        child.ref = self._start_child(child, message.resume)
        self._children[key] = child

    @handles(CloseConnection)
    def _close(self, message: CloseConnection) -> None:
        key = (message.session_id, message.chat_id)
        child = self._children.get(key)
        if child is None or child.owner != message.owner:
            return  # a newer owner opened its own connection since
        del self._children[key]
        self._cooled(child)
        if child.ref.is_alive():
            child.ref.stop(block=False)

    @handles(ConnectionDied)
    def _died(self, message: ConnectionDied) -> None:
        key = (message.session_id, message.chat_id)
        child = self._children.get(key)
        if child is None or child.generation != message.generation:
            return
        self.send(child.owner, ConnectionLost(generation=child.generation, error=message.error))
        now = self.services.clock.now()
        child.restarts = [at for at in child.restarts if at > now - self.policy.period]
        if len(child.restarts) >= self.policy.intensity:
            log.error(
                "provider_marked_unavailable",
                session_id=child.session_id,
                chat_id=child.chat_id,
                provider=child.provider,
                restarts=len(child.restarts),
                error=message.error.message,  # the last failure, in the provider's words
            )
            error = AgentHostError(
                code=ErrorCode.PROVIDER_UNAVAILABLE,
                message=(
                    f"provider {child.provider!r} failed {len(child.restarts) + 1} times within "
                    f"{self.policy.period:g} s and is unavailable: {message.error.message}"
                ),
            )
            self.send(child.owner, ProviderUnavailable(error=error))
            child.restarts.clear()
            child.cooling = True
            self.services.health.cooling(child.provider, +1)
            self._restart_later(child, self.policy.cooldown)  # it comes back after a cool-down
            return
        delay = self.policy.delay(len(child.restarts), self._rng)
        child.restarts.append(now)
        self._restart_later(child, delay)

    def _cooled(self, child: _Child) -> None:
        """The child's cool-down is over (or the child is gone): its provider may
        be available again (services.health)."""
        if child.cooling:
            child.cooling = False
            self.services.health.cooling(child.provider, -1)

    def _restart_later(self, child: _Child, delay: float) -> None:
        restart = RestartConnection(session_id=child.session_id, chat_id=child.chat_id)
        if delay <= 0:
            self._restart(restart)
            return

        def fire() -> None:
            self.send(self.actor_ref, restart)

        self.services.clock.call_later(delay, fire)

    @handles(ResumeFellBack)
    def _fell_back(self, message: ResumeFellBack) -> None:
        self.resume_fallbacks += 1

    @handles(GetCounters)
    def _counters(self, message: GetCounters) -> dict[str, int]:
        return {"provider_restarts": self.restarts, "resume_fallbacks": self.resume_fallbacks}

    @handles(RestartConnection)
    def _restart(self, message: RestartConnection) -> None:
        child = self._children.get((message.session_id, message.chat_id))
        if child is None:
            return
        child.generation += 1
        self.restarts += 1
        if child.cooling:
            self._cooled(child)
            self.send(child.owner, CoolDownEnded())
        log.info(
            "provider_connection_restarted",
            session_id=child.session_id,
            chat_id=child.chat_id,
            provider=child.provider,
            generation=child.generation,
        )
        child.ref = self._start_child(child, resume=True)
