"""What a resident idle session costs in memory (benchmarks/sessions.py measures it)."""

import sys

from agenthost.actors import Host
from agenthost.actors.runtime import live_actors


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
