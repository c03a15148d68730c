"""The garbage collector, tuned while a host runs.

A turn allocates a few hundred short-lived container objects (messages,
events, states); nearly all are freed by reference counting, but each one
counts towards the next young collection. At CPython's default thresholds
(700, 10, 10) that is a young collection every few turns, each walking
whatever survived, and a full collection (every tracked object, all threads
waiting on the GIL) every time the heap grew by a quarter. Measured with
`gc.callbacks` (thread CPU time) in `agenthost load --chats 1000 --turns 6`:
the collector took 67 µs of a turn's CPU at the defaults, 35 µs with young
collections after 20,000 allocations and 20 µs after 50,000 (no better past
that).

While a host runs:
- young collections run after `YOUNG_EVERY` (50,000) net allocations instead
  of 700: cyclic garbage waits longer to be freed, at most that many objects
  (a few MB; peak RSS after a 1,000-chat load was the same within 2 MB);
- full collections run after 1,000 middle-generation collections instead
  of 10: the old generation (every resident session) is walked rarely.
A threshold is changed only when it is still lower than ours (it is a
process setting), and put back when the last host that changed it stops,
unless the embedding program changed it meanwhile.
"""

import gc
import threading

YOUNG_EVERY = 50_000  # net allocations of tracked objects per young collection
FULL_EVERY = 1000  # middle-generation collections per full collection

_lock = threading.Lock()
_holders = 0
_saved: tuple[int, int, int] | None = None
_ours: tuple[int, int, int] | None = None


def hold() -> None:
    """A host starts: tune the thresholds (unless already higher)."""
    global _holders, _saved, _ours
    with _lock:
        if _holders == 0:
            young, middle, full = gc.get_threshold()
            tuned = (max(young, YOUNG_EVERY), middle, max(full, FULL_EVERY))
            if tuned != (young, middle, full):
                _saved = (young, middle, full)
                _ours = tuned
                gc.set_threshold(*tuned)
        _holders += 1


def release() -> None:
    """A host stops: the last one puts back what it changed (if nobody changed it since)."""
    global _holders, _saved, _ours
    with _lock:
        _holders = max(_holders - 1, 0)
        if _holders or _saved is None:
            return
        if gc.get_threshold() == _ours:
            gc.set_threshold(*_saved)
        _saved = _ours = None
