"""The garbage collector's full collections, made rare while a host runs.

CPython's full (generation 2) collection walks every tracked object while
holding the GIL, so every actor, provider loop and client waits for it. With
thousands of resident sessions (millions of objects) one pass takes hundreds
of milliseconds, and at the default thresholds (700, 10, 10) one runs every
time the heap grew by a quarter: in `python -m benchmarks peers` at 10,000
chats, 29 full collections took 18 s of a 36 s run (gc.callbacks).

A host raises only the third threshold (full collections after 1,000 young
collections of the middle generation instead of 10): young cycles are still
freed as soon as before, only the old generation is walked less often. It is
a process setting, so it is changed only when it is still lower than ours,
and put back when the last host that changed it stops.
"""

import gc
import threading

FULL_EVERY = 1000  # middle-generation collections per full collection

_lock = threading.Lock()
_holders = 0
_saved: tuple[int, int, int] | None = None


def hold() -> None:
    """A host starts: make full collections rare (unless already rarer)."""
    global _holders, _saved
    with _lock:
        if _holders == 0:
            young, middle, full = gc.get_threshold()
            if full < FULL_EVERY:
                _saved = (young, middle, full)
                gc.set_threshold(young, middle, FULL_EVERY)
        _holders += 1


def release() -> None:
    """A host stops: the last one puts back what it changed (if nobody changed it since)."""
    global _holders, _saved
    with _lock:
        _holders = max(_holders - 1, 0)
        if _holders or _saved is None:
            return
        young, middle, _ = _saved
        if gc.get_threshold() == (young, middle, FULL_EVERY):
            gc.set_threshold(*_saved)
        _saved = None
