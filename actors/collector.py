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

When a host's last resident session leaves memory (`idle()`), the collector
sweeps, a second later on a thread of its own: a full collection (whatever
cyclic garbage the rare full collections left; a stopped actor is freed by
reference counting, tests/actors/test_memory.py), then glibc's
`malloc_trim(0)`, which gives the free pages inside its arenas back to the
system. Without the trim the freed memory stays resident: after a 5-minute
soak, 865 MB with every session gone, 440 MB once trimmed; each worker thread
allocates from an arena of its own, and glibc returns only the top of one by
itself. Elsewhere than glibc the trim is skipped. Only while a host tunes the
collector (`hold()`). (The AHP server also trims, without a collection, 30 s
after sessions left while it runs: server/memory.py, with `glibc_trim`.)
"""

import ctypes
import ctypes.util
import gc
import threading
from collections.abc import Callable

import structlog

log = structlog.get_logger(__name__)

YOUNG_EVERY = 50_000  # net allocations of tracked objects per young collection
FULL_EVERY = 1000  # middle-generation collections per full collection

SWEEP_DELAY_S = 1.0  # after the last session left: its actors have stopped by then

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


def glibc_trim() -> Callable[[], int] | None:
    """glibc's malloc_trim(0), or None where the C library has none (macOS, musl)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: int(trim(0))


_trim = glibc_trim()


class Sweeps:
    """How many sweeps ran (and a wait for the next, for tests)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.count = 0
        self._pending = False

    @property
    def pending(self) -> bool:
        with self._changed:
            return self._pending

    def want(self) -> bool:
        """Whether a sweep should be scheduled (none is pending)."""
        with self._changed:
            if self._pending:
                return False
            self._pending = True
            return True

    def done(self) -> None:
        with self._changed:
            self._pending = False
            self.count += 1
            self._changed.notify_all()

    def wait_count(self, count: int, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self.count >= count, timeout)

    def wait_settled(self, timeout: float) -> bool:
        """Wait until no sweep is pending."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._pending, timeout)


sweeps = Sweeps()


def idle() -> None:
    """A host's last resident session left memory: sweep soon (while a host tunes
    the collector; at most one sweep pending)."""
    with _lock:
        if _holders == 0:
            return
    if not sweeps.want():
        return
    timer = threading.Timer(SWEEP_DELAY_S, sweep)
    timer.name = "agenthost-sweep"
    timer.daemon = True
    timer.start()


def sweep() -> None:
    """A full collection, then the freed heap back to the system (glibc)."""
    try:
        collected = gc.collect()
        if _trim is not None:
            _trim()
        log.info("memory_swept", collected=collected, trimmed=_trim is not None)
    finally:
        sweeps.done()
