"""What a resident idle session costs in memory (benchmarks/sessions.py measures it)."""

import gc
import sys
import threading
import weakref
from collections.abc import Callable

from agenthost.actors import Host
from agenthost.actors.runtime import live_actors
from agenthost.messages.commands import OutcomeState
from agenthost.providers.scripted import ScriptedProvider
from agenthost.providers.scripted_steps import Gate, Say
from agenthost.testing import FakeClock


def _dict_size(attributes: int) -> int:
    """The size of the __dict__ of the third instance of a class with that many attributes."""
    namespace: dict[str, object] = {}
    body = "".join(f"    self.a{i} = {i}\n" for i in range(attributes))
    exec(f"def __init__(self):\n{body}", namespace)
    cls = type("Probe", (), {"__init__": namespace["__init__"]})
    return sys.getsizeof(vars([cls(), cls(), cls()][2]))


def test_a_resident_chats_actors_keep_their_compact_attribute_dicts(host: Host) -> None:
    """CPython shares an instance's attribute names with the other instances of
    its class (a compact __dict__) only up to 29 attributes: past that a chat
    actor pays 1.3 KB more per resident chat, 130 MB per 100k chats."""
    compact = _dict_size(29)
    assert _dict_size(30) > compact  # the limit this test guards is real
    chats = [host.create_session().chat() for _ in range(3)]
    chats[0].send("hello").result(timeout=10)
    sizes: dict[str, int] = {}
    for ref in live_actors():
        actor = ref._actor_weakref()
        if actor is not None:
            sizes[type(actor).__name__] = sys.getsizeof(vars(actor))
    for name in ("SessionActor", "ChatActor", "TurnTrackerActor", "QueueDrainActor"):
        assert sizes[name] <= compact, (name, sizes[name])


SESSION_ACTORS = {
    "SessionActor",
    "ChatActor",
    "TurnTrackerActor",
    "QueueDrainActor",
    "ProviderConnectionActor",
}


def test_a_released_session_is_freed_at_once_not_left_to_the_cycle_collector(
    provider: ScriptedProvider, start_host: Callable[..., Host], clock: FakeClock
) -> None:
    """A stopped actor still in a reference cycle (an actor holds its ref, the ref
    its inbox, the inbox the actor; a helper holds its owner's bound methods)
    waits for a full collection, which a running host makes rare
    (actors/collector.py): in a 20-minute soak every session that ever left
    stayed in memory, and RSS only grew. Here the collector is off: each of a
    released session's actors must be freed by reference counting alone."""
    provider.on("long", Say("start"), Gate("never"))
    host = start_host(provider, idle_release_s=5.0)
    left = threading.Event()
    host.on_session_left(lambda session_id, why: left.set())
    freed = threading.Semaphore(0)
    gc.collect()
    gc.disable()
    try:
        session = host.create_session()
        chat = session.chat()
        assert chat.send("hello").result(timeout=10).state is OutcomeState.COMPLETE
        turn = chat.send("long")
        provider.wait_reached("never", timeout=10)
        chat.steer("and then")
        assert chat.cancel() is True
        assert turn.result(timeout=10).state is OutcomeState.CANCELLED
        watched = []
        for ref in live_actors():
            actor = ref._actor_weakref()
            if type(actor).__name__ in SESSION_ACTORS and actor.session_id == session.id:
                watched.append(weakref.ref(actor, lambda _: freed.release()))
                watched.append(weakref.ref(ref, lambda _: freed.release()))  # nothing keeps it
                del actor
        assert {type(w()).__name__ for w in watched[::2]} == SESSION_ACTORS
        del ref
        del session, chat, turn
        clock.advance(10.0)
        assert left.wait(timeout=10)
        for _ in watched:
            assert freed.acquire(timeout=10), [type(w()).__name__ for w in watched if w()]
    finally:
        gc.enable()
