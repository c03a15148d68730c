"""`PooledRuntime`: actors on a few shared worker threads (the default runtime).

A run queue holds the actors that have mail. An actor is queued at most once
at a time, so at most one of its handlers runs at a time and its mailbox
stays FIFO; a worker handles a bounded batch of one actor's messages per
turn, then flushes what they held back. An idle actor costs its objects, no
thread. In debug mode a blocking `future.get()` on a worker raises.
"""

import contextlib
import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any

import structlog

from agenthost.actors import pykka_seam
from agenthost.actors.runtime import Actor, debug_enabled, finished, handle, started

log = structlog.get_logger(__name__)

STOP_TIMEOUT_S = 5.0
DEFAULT_BATCH = 64
"""How many of one actor's messages a pool worker handles before it moves on."""


def default_workers() -> int:
    """Two workers while the interpreter has a GIL, else one per core.

    Handlers never block and never release the GIL for long (I/O is the store's
    and the worktrees' own threads'), so past the first a worker runs nothing
    in parallel: it only takes the GIL from the others, each hand-off evicting
    the caches they had warm (it was one per core, 16 on 16 cores). The second
    is kept so that one slow handler does not hold up every other actor.
    Measured on 2 cores (1,000 chats, 1 and 16 turns a chat, four paired runs):
    one worker cost a turn 0.88-1.00x of two workers' CPU (median 0.95x)."""
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    return 2 if gil else max(2, os.cpu_count() or 1)


_worker = threading.local()
"""`_worker.pool` is set on a pool worker thread to the pool it serves."""


def on_worker() -> bool:
    """Whether this thread is a pool worker."""
    return getattr(_worker, "pool", None) is not None


def answer_left(actor: Actor | str, inbox: "queue.SimpleQueue[Any]") -> None:
    """Answer (ActorDeadError) every message left in a stopped actor's inbox;
    never waits on an inbox another thread emptied first."""
    while True:
        try:
            envelope = inbox.get_nowait()
        except queue.Empty:
            return
        pykka_seam.answer_dead(actor, envelope)


class _PoolInbox:
    """One pooled actor's mailbox.

    `claim` is held while the actor is in the run queue or a worker is handling
    it (and before it starts), so no two workers ever handle it at once. It is
    taken only with a non-blocking acquire (an atomic test-and-set): a sender
    never waits on a worker, and whoever takes it queues the actor. The
    messages wait in a SimpleQueue (about 170 bytes empty; a deque is 770).

    Once the actor stopped and was finished, the inbox lets go of it (`actor`
    None, `gone` its name for late answers): the actor holds its ref, the ref
    this inbox, so otherwise every stopped actor would be a reference cycle,
    left for the rarely run full collection (actors/collector.py) instead of
    freed at once.
    """

    __slots__ = ("actor", "claim", "gone", "items", "pool", "started")

    def __init__(self, pool: "PooledRuntime", actor: Actor) -> None:
        self.pool = pool
        self.actor: Actor | None = actor
        self.gone = ""
        self.items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.claim = threading.Lock()
        self.claim.acquire()  # released after on_start has run
        self.started = False

    def put(self, envelope: Any, /) -> None:
        self.items.put(envelope)
        if self.claim.acquire(blocking=False):
            self.pool._ready.put(self)

    def get(self) -> Any:  # pragma: no cover - the pool never loops per actor
        raise RuntimeError("pooled actors are run by the pool's workers")

    def empty(self) -> bool:
        return self.items.empty()


class PooledRuntime:
    """Actors on a small shared pool of daemon worker threads.

    Keeps pykka's semantics: per-actor FIFO, one handler of an actor at a time,
    on_start before the first message, on_stop/on_failure, and every ask
    queued behind a stop (or sent after it) answered with ActorDeadError.
    Handlers must never block: a worker blocked in `future.get()` is a worker
    the other actors lose (debug mode makes it raise).
    """

    flushes_per_message = False
    hosts_pinned_actors = False

    def __init__(self, workers: int | None = None, batch: int = DEFAULT_BATCH) -> None:
        """Args:
        workers: worker threads (default `default_workers()`).
        batch: messages of one actor handled per turn before the next actor's.
        """
        self.workers = workers if workers is not None else default_workers()
        self.batch = batch
        self._lock = threading.Lock()
        self._ready: queue.SimpleQueue[_PoolInbox | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    # -- runtime hooks ---------------------------------------------------------------------
    def create_inbox(self, actor: Actor) -> Any:
        return _PoolInbox(self, actor)

    def start(self, actor: Actor) -> None:
        """Queue the actor's on_start (it runs on a worker, before any message)."""
        if not self._threads:
            self._spawn()
        self._ready.put(actor.actor_inbox)  # type: ignore[arg-type]

    def before_wait(self, done: Callable[[], bool], timeout: float | None) -> None:
        if debug_enabled() and on_worker():
            raise RuntimeError(
                "a blocking future.get() on a pool worker thread: handlers on the pool"
                " never block (DESIGN.md); tell, and let the answer come back as a message"
            )

    def entered(self) -> None:
        return None

    def exited(self) -> None:
        return None

    # -- the pool ----------------------------------------------------------------------------
    def _spawn(self) -> None:
        with self._lock:
            if self._threads:
                return
            for index in range(self.workers):
                thread = threading.Thread(
                    target=self._work, name=f"agenthost-pool-{index}", daemon=True
                )
                thread.start()
                self._threads.append(thread)

    def shutdown(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop the workers once they finish their current turn (actors still
        queued stay queued; a later start spawns workers again)."""
        with self._lock:
            threads, self._threads = self._threads, []
        for _ in threads:
            self._ready.put(None)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout)

    def _work(self) -> None:
        _worker.pool = self
        ready = self._ready
        while True:
            inbox = ready.get()
            if inbox is None:
                return
            try:
                self._turn(inbox)
            except BaseException:  # never lose a worker; the actor is stopped
                log.error("pool_turn_failed", actor=type(inbox.actor).__name__, exc_info=True)
                with contextlib.suppress(Exception):
                    if inbox.actor is not None:
                        pykka_seam.stop_now(inbox.actor)
                with contextlib.suppress(Exception):
                    self._finish(inbox)

    def _turn(self, inbox: _PoolInbox) -> None:
        actor = inbox.actor
        if actor is None:  # stopped and let go: only late mail to answer
            self._finish(inbox)
            return
        if not inbox.started:
            inbox.started = True
            started(actor)
        items = inbox.items
        for _ in range(self.batch):  # (once the actor stops, handle() answers the rest)
            if items.empty():
                break
            handle(actor, items.get_nowait())
        actor.flush()  # what this run of messages held back leaves together
        self._finish(inbox)

    def _finish(self, inbox: _PoolInbox) -> None:
        """End an actor's turn: answer what a stopped actor still holds, and
        queue it again if mail is left (behind the others, for fairness)."""
        items = inbox.items
        actor = inbox.actor
        if actor is None:
            answer_left(inbox.gone, items)
        elif actor.actor_stopped.is_set():
            finished(actor)
            answer_left(actor, items)
            inbox.gone, inbox.actor = str(actor.actor_ref), None
        if not items.empty():  # still claimed: requeue
            self._ready.put(inbox)
            return
        inbox.claim.release()
        # A sender that put before the release saw the claim taken and left the
        # actor to us: look again.
        if not items.empty() and inbox.claim.acquire(blocking=False):
            self._ready.put(inbox)
