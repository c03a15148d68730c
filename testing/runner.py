"""`DeterministicRunner`: a single-threaded runtime in which the test picks the
next delivery, so races are reproduced and shrunk, not hoped for."""

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import attrs
from pykka import ActorDeadError

from agenthost.actors import pykka_seam
from agenthost.actors.runtime import ASK_TIMEOUT_S, STOP_TIMEOUT_S, Actor, finished, handle, started

_RECHECK_S = 0.005


@attrs.frozen
class Delivery:
    """A message waiting in the deterministic runner."""

    actor: str
    message: Any


class _Inbox:
    __slots__ = ("_actor", "_runner")

    def __init__(self, runner: "DeterministicRunner", actor: Actor) -> None:
        self._runner = runner
        self._actor = actor

    def put(self, envelope: Any, /) -> None:
        self._runner._put(self._actor, envelope)

    def get(self) -> Any:  # pragma: no cover - the runner never loops
        raise RuntimeError("the deterministic runner delivers messages itself")

    def empty(self) -> bool:
        return self._runner._empty_for(self._actor)


class DeterministicRunner:
    """A single-threaded runner in which the test picks the next delivery.

    Messages from any thread (provider loops, clock timers) wait here; only
    the thread that delivers runs handlers. Waiting on a future from the
    driving thread delivers (FIFO) until it is set. `after_delivery`, if set,
    is called after each delivery (a test lets a provider's loop react there,
    so what is pending next does not depend on its thread's timing).
    """

    flushes_per_message = True  # a test picks every delivery: each one's effects go out with it

    def __init__(self, own_threads: bool = False) -> None:
        """Args:
        own_threads: let actors that own a thread (the store) keep it; by default
            they run here too, so every delivery is the test's choice.
        """
        self.own_threads = own_threads
        self.hosts_pinned_actors = not own_threads
        self._items: deque[tuple[Actor, Any]] = deque()
        self._cond = threading.Condition()
        self._driver: int | None = None
        self._actors: list[Actor] = []
        self.history: list[Delivery] = []
        # Called on the driving thread after each delivery's handler ran: a test
        # lets another thread (a provider's loop) react before the next choice.
        self.after_delivery: Callable[[Delivery], None] | None = None

    # -- runtime hooks -------------------------------------------------------
    def create_inbox(self, actor: Actor) -> Any:
        return _Inbox(self, actor)

    def start(self, actor: Actor) -> None:
        self._actors.append(actor)
        started(actor)
        if actor.actor_stopped.is_set():
            finished(actor)

    def before_wait(self, done: Callable[[], bool], timeout: float | None) -> None:
        if self._driver is not None and threading.get_ident() != self._driver:
            return
        with contextlib.suppress(TimeoutError):
            self.run(until=done, timeout=ASK_TIMEOUT_S if timeout is None else timeout)

    def entered(self) -> None:
        self._driver = threading.get_ident()
        pykka_seam.interruptible.on = True

    def exited(self) -> None:
        self.stop_remaining()
        pykka_seam.interruptible.on = False

    def stop_remaining(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop every actor this runner still runs, delivering what that takes."""
        for actor in reversed(self._actors):
            if not actor.actor_stopped.is_set():
                with contextlib.suppress(ActorDeadError):
                    actor.actor_ref.tell(pykka_seam.stop_message())
        with contextlib.suppress(TimeoutError):
            self.run(
                until=lambda: all(a.actor_stopped.is_set() for a in self._actors), timeout=timeout
            )
        self._actors.clear()

    def _put(self, actor: Actor, envelope: Any) -> None:
        with self._cond:
            self._items.append((actor, envelope))
            self._cond.notify_all()

    def _empty_for(self, actor: Actor) -> bool:
        with self._cond:
            return not any(a is actor for a, _ in self._items)

    # -- what the test drives --------------------------------------------------
    def pending(self) -> list[Delivery]:
        with self._cond:
            return [Delivery(type(a).__name__, e.message) for a, e in self._items]

    def deliverable(self) -> list[int]:
        """Indexes that may go next: the oldest pending message of each actor
        (a mailbox is FIFO; only the order between actors is free)."""
        with self._cond:
            seen: set[int] = set()
            heads = []
            for index, (actor, _) in enumerate(self._items):
                if id(actor) not in seen:
                    seen.add(id(actor))
                    heads.append(index)
            return heads

    def deliver(self, index: int = 0) -> Delivery:
        """Deliver the pending message at `index` and run its handler.

        Raises:
            ValueError: an older message of the same actor is still pending.
        """
        with self._cond:
            actor, envelope = self._items[index]
            if any(a is actor for a, _ in list(self._items)[:index]):
                raise ValueError(
                    f"{type(actor).__name__} has older pending messages: mailboxes are FIFO"
                )
            del self._items[index]
        self._process(actor, envelope)
        delivery = Delivery(type(actor).__name__, envelope.message)
        self.history.append(delivery)
        if self.after_delivery is not None:
            self.after_delivery(delivery)
        return delivery

    def run(
        self,
        until: Callable[[], bool] | None = None,
        timeout: float = ASK_TIMEOUT_S,
        choose: Callable[[list[Delivery], list[int]], int | None] | None = None,
    ) -> int:
        """Deliver messages until `until()` holds or, with no `until`, until
        nothing (deliverable) is pending. Waits up to `timeout` for messages
        from other threads while `until` is unmet. Returns how many it delivered.

        `choose(pending, deliverable)` picks the next index among `deliverable`
        (default: the oldest), or None to deliver nothing now and wait.
        """
        deadline = time.monotonic() + timeout
        count = 0
        while True:
            if until is not None and until():
                return count
            with self._cond:
                if not self._items:
                    if until is None:
                        return count
                    self._wait_for_mail(deadline)
                    continue
            index = 0 if choose is None else choose(self.pending(), self.deliverable())
            if index is None:
                if until is None:
                    return count
                with self._cond:
                    self._wait_for_mail(deadline)
                continue
            self.deliver(index)
            count += 1

    def _wait_for_mail(self, deadline: float) -> None:
        """(Holding the condition.) Wait a little for a message from another thread;
        `until` may also turn true there (the store's, a provider loop's) without
        one, so the caller re-checks often."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("deterministic runner: condition not met")
        self._cond.wait(min(remaining, _RECHECK_S))

    # -- one message, as pykka's loop handles it -------------------------------
    def _process(self, actor: Actor, envelope: Any) -> None:
        handle(actor, envelope)
        actor.flush()
        if actor.actor_stopped.is_set():
            finished(actor)
            with self._cond:
                mine = [(a, e) for a, e in self._items if a is actor]
                self._items = deque((a, e) for a, e in self._items if a is not actor)
            for _, left in mine:
                pykka_seam.answer_dead(actor, left)
