"""`ThreadingRuntime`: a thread per actor, as pykka's ThreadingActor.

The store and worktree actors pin it (they do I/O on their own thread). The
loop is pykka's, through actors/pykka_seam.py, plus `flush` after each
message like every runtime.
"""

import queue
import threading
from collections.abc import Callable
from typing import Any

from agenthost.actors.pool import answer_left
from agenthost.actors.runtime import Actor, finished, handle, started


class _ThreadInbox(queue.SimpleQueue[Any]):
    """The mailbox of an actor on a thread of its own (get and empty stay
    SimpleQueue's, in C).

    A sender whose liveness check passed just before the stop puts its ask
    after the loop answered what was left, and nobody would ever answer it:
    the asker waited out its whole timeout. Here a put that finds the actor
    stopped answers what is left itself (the flag is set before the loop
    drains, so each message is answered by one of them).
    """

    __slots__ = ("actor",)

    def __init__(self, actor: Actor) -> None:
        self.actor = actor

    def put(self, envelope: Any, block: bool = True, timeout: float | None = None) -> None:
        queue.SimpleQueue.put(self, envelope)
        if self.actor.actor_stopped.is_set():
            answer_left(self.actor, self)


class ThreadingRuntime:
    """pykka's threading model: each actor owns a daemon thread."""

    flushes_per_message = True
    hosts_pinned_actors = False

    def create_inbox(self, actor: Actor) -> Any:
        return _ThreadInbox(actor)

    def start(self, actor: Actor) -> None:
        thread = threading.Thread(
            target=self._loop, args=(actor,), name=type(actor).__name__, daemon=True
        )
        thread.start()

    def before_wait(self, done: Callable[[], bool], timeout: float | None) -> None:
        return None

    def entered(self) -> None:
        return None

    def exited(self) -> None:
        return None

    @staticmethod
    def _loop(actor: Actor) -> None:
        inbox: _ThreadInbox = actor.actor_inbox  # type: ignore[assignment]
        started(actor)
        stopped = actor.actor_stopped
        while not stopped.is_set():
            handle(actor, inbox.get())
            actor.flush()
        finished(actor)
        answer_left(actor, inbox)
