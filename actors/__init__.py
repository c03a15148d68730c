"""The pykka actors and the public surface.

Belongs here: HostActor, SupervisorActor, SessionActor, ChatActor,
TurnTrackerActor, QueueDrainActor, ProviderConnectionActor, StoreActor,
WorktreeActor, the runtime that runs them, the clock, and the surface (Host,
Session, Chat, TurnHandle; agenthost.actors.aio for asyncio). Invariants:
1. An actor's state is touched only by its own handlers; only frozen values
   and actor refs cross between actors.
2. No handler blocks: no `ask(...).get()` in a handler (answers come back as
   messages or deferred futures), no I/O except in the StoreActor and the
   WorktreeActor, which run on threads of their own. Every other actor runs
   on the shared pool (PooledRuntime), where a blocked handler holds a
   worker every other actor needs; debug mode makes a blocking get raise.
3. Time comes from the injected clock; nothing here sleeps.
4. Every turn ends exactly once, through TurnTrackerActor._end, and its end
   reaches subscribers only after the store committed it.
5. A session leaves memory, or is deleted as an unused draft, only when every
   chat agrees at that moment; the store keeps it either way unless deleted.
   Whoever watches (`Host.on_session_left`) hears of every departure.
6. A burst stays in order across hops: the events an adapter emits in one
   loop pass travel as one message, and leave before the result of a call
   that ended after them (ProviderConnectionActor, providers.base.Burst).
"""

from agenthost.actors.clock import SystemClock
from agenthost.actors.context import Departure
from agenthost.actors.handles import Subscription
from agenthost.actors.limits import HostLimits
from agenthost.actors.pool import PooledRuntime
from agenthost.actors.runtime import use_runtime
from agenthost.actors.supervisor import RestartPolicy
from agenthost.actors.surface import Chat, Host, Session, TurnHandle
from agenthost.actors.threads import ThreadingRuntime

__all__ = [
    "Chat",
    "Departure",
    "Host",
    "HostLimits",
    "PooledRuntime",
    "RestartPolicy",
    "Session",
    "Subscription",
    "SystemClock",
    "ThreadingRuntime",
    "TurnHandle",
    "use_runtime",
]
