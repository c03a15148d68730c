"""How actors run.

Every agenthost actor subclasses `Actor`, which keeps pykka's API (refs,
tell, ask, proxies, futures, on_start/on_stop/on_failure) and delegates the
three hooks pykka offers new actor types (the inbox, the future, the loop
start) to the current `Runtime`:

- `PooledRuntime` (actors/pool.py, the default): a few shared worker threads
  and a run queue of actors that have mail; an idle actor costs no thread.
- `ThreadingRuntime` (actors/threads.py): a thread per actor (the store and
  worktree actors pin it: they do I/O).
- `DeterministicRunner` (agenthost.testing): no threads; the test picks
  which pending message is delivered next.

Each runtime handles a message the way pykka's own loop does, through the
one module that touches pykka's internals (actors/pykka_seam.py).

Handlers are methods decorated with `@handles(MessageType)`; a handler never
blocks (no `ask(...).get()`, no I/O outside the store and worktree actors).

An actor may hold back what it sends and send it together in `flush` (a
chat's store writes, a tracker's messages to its chat). Every runtime calls
`flush` after on_start and before an ask's reply, so a reply never overtakes
what its handler sent; the pool calls it once after the run of messages it
handles for the actor at a time, the other runtimes after each message.
"""

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Protocol, TypeVar

import pykka
import structlog
from pykka import ActorDeadError, ActorRef

from agenthost.actors import futures, pykka_seam
from agenthost.actors.futures import RuntimeFuture, StopFlag

log = structlog.get_logger(__name__)

ASK_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0

F = TypeVar("F", bound=Callable[..., Any])

_debug = os.environ.get("AGENTHOST_DEBUG", "") not in ("", "0")


def set_debug(on: bool) -> None:
    """Turn debug checks on or off (default: env AGENTHOST_DEBUG=1). In debug
    mode a blocking `future.get()` on a pool worker raises RuntimeError."""
    global _debug
    _debug = on


def debug_enabled() -> bool:
    return _debug


def handles(*message_types: type) -> Callable[[F], F]:
    """Mark an actor method as the handler of these message types."""

    def mark(fn: F) -> F:
        fn._handles = message_types  # type: ignore[attr-defined]
        return fn

    return mark


class Runtime(Protocol):
    flushes_per_message: bool
    """Whether an actor's `flush` runs after each message, or (on the pool) once
    after the run of messages a worker handles at a time."""
    hosts_pinned_actors: bool
    """Whether actors that pin a runtime of their own (the store) run here
    instead (a deterministic runner makes every delivery the test's choice)."""

    def create_inbox(self, actor: "Actor") -> Any: ...

    def start(self, actor: "Actor") -> None: ...

    def before_wait(self, done: Callable[[], bool], timeout: float | None) -> None:
        """A thread is about to block on a future that is not set (see futures.py)."""

    def entered(self) -> None:
        """`use_runtime` made this the current runtime on the calling thread."""

    def exited(self) -> None: ...


_live: dict[str, ActorRef[Any]] = {}
_urns = itertools.count(1)
_live_lock = threading.Lock()


_runtime: Runtime | None = None
"""The runtime actors start on; the pool, made on first use (actors/pool.py
builds on this module)."""


def current_runtime() -> Runtime:
    global _runtime
    if _runtime is None:
        from agenthost.actors.pool import PooledRuntime

        _runtime = PooledRuntime()
    return _runtime


def _before_wait(done: Callable[[], bool], timeout: float | None) -> None:
    current_runtime().before_wait(done, timeout)


futures.before_wait = _before_wait


@contextlib.contextmanager
def use_runtime(runtime: Runtime) -> Iterator[Runtime]:
    """Run actors started inside the block on `runtime`; the calling thread drives it."""
    global _runtime
    previous = current_runtime()
    _runtime = runtime
    runtime.entered()
    try:
        yield runtime
    finally:
        runtime.exited()
        _runtime = previous


class Actor(pykka_seam.SeamActor):
    """Base of every agenthost actor: typed dispatch and a pluggable runtime."""

    _handlers: ClassVar[dict[type, Callable[..., Any]]] = {}
    own_runtime: ClassVar[Runtime | None] = None
    """A runtime this actor class always runs on (the store's own thread), or None."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        table: dict[type, Callable[..., Any]] = {}
        for klass in reversed(cls.__mro__):
            for value in vars(klass).values():
                for message_type in getattr(value, "_handles", ()):
                    table[message_type] = value
        cls._handlers = table

    def __init__(self) -> None:
        runtime = current_runtime()
        own = type(self).own_runtime
        self.runtime = own if own is not None and not runtime.hosts_pinned_actors else runtime
        # The urn is unique within the process, which is all a ref needs (a uuid4
        # costs a urandom call: a tenth of the time it took to start a chat's actors).
        super().__init__(
            urn=f"urn:agenthost:actor:{next(_urns)}",
            inbox=self.create_inbox(),
            stopped=StopFlag(),
        )

    @classmethod
    def start(cls, *args: Any, **kwargs: Any) -> ActorRef[Any]:
        """Start the actor. Unlike pykka's, it is kept in the runtime's own registry
        (O(1) add and remove), not in pykka's ActorRegistry (a list scanned on
        every lookup and removal, so stopping n actors there is quadratic)."""
        obj = cls(*args, **kwargs)
        obj.start_loop()
        return obj.actor_ref

    def create_inbox(self) -> Any:
        return self.runtime.create_inbox(self)

    @staticmethod
    def create_future() -> pykka.Future[Any]:
        return RuntimeFuture()

    def start_loop(self) -> None:
        with _live_lock:
            _live[self.actor_urn] = self.actor_ref
        self.runtime.start(self)

    def after_stop(self) -> None:
        """Runs once the actor has stopped, however it stopped (a stop, a failure in
        a handler or in on_start), on the thread that saw it stop. Unlike
        on_stop it runs after a failure too; it must not send to the actor."""

    def flush(self) -> None:
        """Send what handlers held back to send together (a chat's store writes,
        a tracker's messages to its chat). The runtime calls it after on_start,
        before an ask's reply, and after each message; on the pool, after the
        run of messages a worker handles at a time, so a busy actor's effects
        travel in fewer, larger messages."""

    def on_receive(self, message: Any) -> Any:
        handler = self._handlers.get(type(message))
        if handler is None:
            log.warning(
                "message_unhandled", actor=type(self).__name__, message=type(message).__name__
            )
            return None
        return handler(self, message)

    @staticmethod
    def send(ref: ActorRef[Any] | None, message: Any) -> bool:
        """Tell `ref`, tolerating an actor that already stopped. Returns whether it was sent.
        (ActorRef.tell's check and put, without its exception for a stopped actor.)"""
        if ref is None or ref.actor_stopped.is_set():
            return False
        ref.actor_inbox.put(pykka_seam.Envelope(message))
        return True


handle = pykka_seam.process
"""One message, as every runtime handles it (pykka's loop semantics)."""


def started(actor: Actor) -> None:
    """Before the first message: on_start, then what it held back."""
    pykka_seam.start(actor)
    actor.flush()


def finished(actor: Actor) -> None:
    """The actor stopped: it leaves the registry and its `after_stop` runs (once)."""
    with _live_lock:
        if _live.pop(actor.actor_urn, None) is None:
            return
    try:
        actor.after_stop()
    except Exception:
        log.warning("after_stop_failed", actor=type(actor).__name__, exc_info=True)


def live_actors() -> list[ActorRef[Any]]:
    with _live_lock:
        return list(_live.values())


def stop_all(timeout: float = STOP_TIMEOUT_S) -> None:
    """Stop every actor the runtime still runs (tests' autouse fixture), within
    `timeout` in all. Linear in the number of actors."""
    deadline = time.monotonic() + timeout
    stops = []
    for ref in live_actors():
        with contextlib.suppress(ActorDeadError):
            stops.append(ref.stop(block=False))
    for stop in stops:
        with contextlib.suppress(ActorDeadError, pykka.Timeout):
            stop.get(timeout=max(deadline - time.monotonic(), 0.0))
    with _live_lock:
        _live.clear()
