"""How actors run.

Every agenthost actor subclasses `Actor`, which keeps pykka's API (refs,
tell, ask, proxies, futures, on_start/on_stop/on_failure) and delegates the
three implementation hooks pykka offers new actor types (the inbox, the
future, the loop start) to the current `Runtime`:

- `PooledRuntime` (default): a few shared daemon worker threads and a run
  queue of actors that have mail. An actor is queued at most once at a time,
  so at most one of its handlers runs at a time and its mailbox stays FIFO; a
  worker handles a bounded batch of one actor's messages per turn. An idle
  actor costs its objects, no thread. In debug mode (AGENTHOST_DEBUG=1 or
  `set_debug(True)`), a blocking `future.get()` on a pool worker raises.
- `ThreadingRuntime`: one daemon thread per actor, pykka's own loop (the
  store and worktree actors pin it: they do I/O).
- `DeterministicRunner` (tests): no threads. Messages wait in one list until
  the test delivers them, in an order it chooses (`deliver(i)`), or FIFO
  (`run()`); waiting on a future from the test thread delivers FIFO until it
  is set. Races are reproduced and shrunk, not hoped for.

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
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Protocol, TypeVar, cast

import attrs
import pykka
import structlog
from pykka import ActorDeadError, ActorRef
from pykka._envelope import Envelope
from pykka._threading import ThreadingFutureResult
from pykka.messages import _ActorStop

log = structlog.get_logger(__name__)

ASK_TIMEOUT_S = 10.0
_RECHECK_S = 0.005
STOP_TIMEOUT_S = 5.0

DEFAULT_BATCH = 64
"""How many of one actor's messages a pool worker handles before it moves on."""

F = TypeVar("F", bound=Callable[..., Any])

_debug = os.environ.get("AGENTHOST_DEBUG", "") not in ("", "0")
_worker = threading.local()
"""`_worker.pool` is set on a pool worker thread to the pool it serves."""


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
    drives_futures: bool
    flushes_per_message: bool
    """Whether an actor's `flush` runs after each message, or (on the pool) once
    after the run of messages a worker handles at a time."""

    def create_inbox(self, actor: "Actor") -> Any: ...

    def start(self, actor: "Actor") -> None: ...

    def run_until(self, done: Callable[[], bool], timeout: float | None) -> None: ...


class ThreadingRuntime:
    """pykka's threading model: each actor owns a daemon thread."""

    drives_futures = False
    flushes_per_message = True

    def create_inbox(self, actor: "Actor") -> Any:
        return _ThreadInbox(actor)

    def start(self, actor: "Actor") -> None:
        thread = threading.Thread(target=actor._actor_loop, name=type(actor).__name__, daemon=True)
        thread.start()

    def run_until(self, done: Callable[[], bool], timeout: float | None) -> None:
        return None


class _ThreadInbox(queue.SimpleQueue[Envelope[Any]]):
    """The mailbox of an actor on a thread of its own, read by pykka's loop
    (get and empty stay SimpleQueue's, in C).

    pykka's teardown answers what is left in the inbox once. A sender whose
    liveness check passed just before the stop puts its ask after that, and
    nobody would ever answer it: the asker waited out its whole timeout. Here
    a put that finds the actor stopped answers what is left itself (the flag
    is set before teardown drains, so each message is answered by one of them).
    """

    __slots__ = ("actor",)

    def __init__(self, actor: "Actor") -> None:
        self.actor = actor

    def put(
        self, envelope: Envelope[Any], block: bool = True, timeout: float | None = None
    ) -> None:
        queue.SimpleQueue.put(self, envelope)
        if self.actor.actor_stopped.is_set():
            _answer_left(self.actor, self)


def _answer_left(actor: "Actor", inbox: "queue.SimpleQueue[Envelope[Any]]") -> None:
    """Answer (ActorDeadError) every message left in a stopped actor's inbox;
    never waits on an inbox another thread emptied first."""
    while True:
        try:
            envelope = inbox.get_nowait()
        except queue.Empty:
            return
        _answer_dead(actor, envelope)


class _PoolInbox:
    """One pooled actor's mailbox.

    `claim` is held while the actor is in the run queue or a worker is handling
    it (and before it starts), so no two workers ever handle it at once. It is
    taken only with a non-blocking acquire (an atomic test-and-set): a sender
    never waits on a worker, and whoever takes it queues the actor. The
    messages wait in a SimpleQueue (about 170 bytes empty; a deque is 770).
    """

    __slots__ = ("actor", "claim", "items", "pool", "started")

    def __init__(self, pool: "PooledRuntime", actor: "Actor") -> None:
        self.pool = pool
        self.actor = actor
        self.items: queue.SimpleQueue[Envelope[Any]] = queue.SimpleQueue()
        self.claim = threading.Lock()
        self.claim.acquire()  # released after on_start has run
        self.started = False

    def put(self, envelope: Envelope[Any], /) -> None:
        self.items.put(envelope)
        if self.claim.acquire(blocking=False):
            self.pool._ready.put(self)

    def get(self) -> Envelope[Any]:  # pragma: no cover - the pool never loops per actor
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

    drives_futures = False
    flushes_per_message = False

    def __init__(self, workers: int | None = None, batch: int = DEFAULT_BATCH) -> None:
        """Args:
        workers: worker threads (default max(2, cpu count)).
        batch: messages of one actor handled per turn before the next actor's.
        """
        self.workers = workers if workers is not None else max(2, os.cpu_count() or 1)
        self.batch = batch
        self._lock = threading.Lock()
        self._ready: queue.SimpleQueue[_PoolInbox | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    # -- runtime hooks ---------------------------------------------------------------------
    def create_inbox(self, actor: "Actor") -> Any:
        return _PoolInbox(self, actor)

    def start(self, actor: "Actor") -> None:
        """Queue the actor's on_start (it runs on a worker, before any message)."""
        if not self._threads:
            self._spawn()
        self._ready.put(actor.actor_inbox)  # type: ignore[arg-type]

    def run_until(self, done: Callable[[], bool], timeout: float | None) -> None:
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
                    inbox.actor._stop()
                with contextlib.suppress(Exception):
                    self._finish(inbox)

    def _turn(self, inbox: _PoolInbox) -> None:
        actor = inbox.actor
        if not inbox.started:
            inbox.started = True
            actor._actor_loop_setup()
        items = inbox.items
        for _ in range(self.batch):
            if items.empty():
                break
            _process(actor, items.get_nowait())
            if actor.actor_stopped.is_set():
                break
        actor.flush()  # what this run of messages held back leaves together
        self._finish(inbox)

    def _finish(self, inbox: _PoolInbox) -> None:
        """End an actor's turn: answer what a stopped actor still holds, and
        queue it again if mail is left (behind the others, for fairness)."""
        items = inbox.items
        if inbox.actor.actor_stopped.is_set():
            _answer_left(inbox.actor, items)
        if not items.empty():  # still claimed: requeue
            self._ready.put(inbox)
            return
        inbox.claim.release()
        # A sender that put before the release saw the claim taken and left the
        # actor to us: look again.
        if not items.empty() and inbox.claim.acquire(blocking=False):
            self._ready.put(inbox)


@attrs.frozen
class Delivery:
    """A message waiting in the deterministic runner."""

    actor: str
    message: Any


class _Inbox:
    __slots__ = ("_actor", "_runner")

    def __init__(self, runner: "DeterministicRunner", actor: "Actor") -> None:
        self._runner = runner
        self._actor = actor

    def put(self, envelope: Envelope[Any], /) -> None:
        self._runner._put(self._actor, envelope)

    def get(self) -> Envelope[Any]:  # pragma: no cover - the runner never loops
        raise RuntimeError("the deterministic runner delivers messages itself")

    def empty(self) -> bool:
        return self._runner._empty_for(self._actor)


class DeterministicRunner:
    """A single-threaded runner in which the test picks the next delivery.

    Messages from any thread (provider loops, clock timers) wait here; only
    the thread that delivers runs handlers.
    """

    drives_futures = True
    flushes_per_message = True  # a test picks every delivery: each one's effects go out with it

    def __init__(self, own_threads: bool = False) -> None:
        """Args:
        own_threads: let actors that own a thread (the store) keep it; by default
            they run here too, so every delivery is the test's choice.
        """
        self.own_threads = own_threads
        self._items: deque[tuple[Actor, Envelope[Any]]] = deque()
        self._cond = threading.Condition()
        self._driver: int | None = None
        self._actors: list[Actor] = []
        self.history: list[Delivery] = []

    # -- runtime hooks -------------------------------------------------------
    def create_inbox(self, actor: "Actor") -> Any:
        return _Inbox(self, actor)

    def start(self, actor: "Actor") -> None:
        self._actors.append(actor)
        actor._actor_loop_setup()

    def stop_remaining(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop every actor this runner still runs, delivering what that takes."""
        for actor in reversed(self._actors):
            if not actor.actor_stopped.is_set():
                with contextlib.suppress(ActorDeadError):
                    actor.actor_ref.tell(_ActorStop())
        with contextlib.suppress(TimeoutError):
            self.run(
                until=lambda: all(a.actor_stopped.is_set() for a in self._actors), timeout=timeout
            )
        self._actors.clear()

    def _put(self, actor: "Actor", envelope: Envelope[Any]) -> None:
        with self._cond:
            self._items.append((actor, envelope))
            self._cond.notify_all()

    def _empty_for(self, actor: "Actor") -> bool:
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
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError("deterministic runner: condition not met")
                    # `until` may turn true on another thread (the store's, a
                    # provider loop's) without a message: re-check it often.
                    self._cond.wait(min(remaining, _RECHECK_S))
                    continue
            index = 0 if choose is None else choose(self.pending(), self.deliverable())
            if index is None:
                if until is None:
                    return count
                with self._cond:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError("deterministic runner: condition not met")
                    self._cond.wait(min(remaining, _RECHECK_S))
                continue
            self.deliver(index)
            count += 1

    def run_until(self, done: Callable[[], bool], timeout: float | None) -> None:
        if self._driver is not None and threading.get_ident() != self._driver:
            return
        with contextlib.suppress(TimeoutError):
            self.run(until=done, timeout=ASK_TIMEOUT_S if timeout is None else timeout)

    # -- one message, as pykka's loop handles it -------------------------------
    def _process(self, actor: "Actor", envelope: Envelope[Any]) -> None:
        _process(actor, envelope)
        if actor.actor_stopped.is_set():
            with self._cond:
                mine = [(a, e) for a, e in self._items if a is actor]
                self._items = deque((a, e) for a, e in self._items if a is not actor)
            for _, left in mine:
                _answer_dead(actor, left)


def _process(actor: "Actor", envelope: Envelope[Any]) -> None:
    """Handle one message as pykka's `_actor_loop_running` does (shared by the
    pool and the deterministic runner): the reply, or the failure hooks for a
    tell. A message to a stopped actor is answered with ActorDeadError."""
    if actor.actor_stopped.is_set():
        _answer_dead(actor, envelope)
        return
    try:
        response = actor._handle_receive(envelope.message)
        if envelope.reply_to is not None:
            actor.flush()  # a reply never overtakes what its handler sent
            envelope.reply_to.set(response)
    except Exception:
        if envelope.reply_to is not None:
            actor.flush()
            envelope.reply_to.set_exception()
        else:
            actor._handle_failure(*sys.exc_info())
            try:
                actor.on_failure(*sys.exc_info())
            except Exception:
                actor._handle_failure(*sys.exc_info())
    except BaseException:
        if getattr(_worker, "pool", None) is None:
            raise  # the deterministic runner's driver: let Ctrl-C through
        # pykka stops the actor (and every other); on the pool only the actor
        # stops, and an asker gets the exception instead of waiting forever.
        log.error("actor_interrupted", actor=type(actor).__name__, exc_info=True)
        if envelope.reply_to is not None:
            with contextlib.suppress(Exception):
                envelope.reply_to.set_exception()
        actor._stop()


def _answer_dead(actor: "Actor", envelope: Envelope[Any]) -> None:
    if envelope.reply_to is None:
        return
    if isinstance(envelope.message, _ActorStop):
        envelope.reply_to.set(None)
        return
    error = ActorDeadError(f"{actor.actor_ref} stopped before handling the message")
    envelope.reply_to.set_exception(exc_info=(ActorDeadError, error, None))


_runtime: Runtime = PooledRuntime()
_live: dict[str, ActorRef[Any]] = {}
_urns = itertools.count(1)
_live_lock = threading.Lock()


def current_runtime() -> Runtime:
    return _runtime


@contextlib.contextmanager
def use_runtime(runtime: Runtime) -> Iterator[Runtime]:
    """Run actors started inside the block on `runtime`; the calling thread drives it."""
    global _runtime
    previous = _runtime
    _runtime = runtime
    if isinstance(runtime, DeterministicRunner):
        runtime._driver = threading.get_ident()
    try:
        yield runtime
    finally:
        if isinstance(runtime, DeterministicRunner):
            runtime.stop_remaining()
        _runtime = previous


def _call_isolated(callback: Callable[[Any], None], future: Any) -> None:
    """A done callback runs on the setter's thread (often an actor's): one that
    raises must never take that actor down."""
    try:
        callback(future)
    except Exception:
        log.warning("future_callback_failed", exc_info=True)


class RuntimeFuture(pykka.Future[Any]):
    """pykka's threading future made light, plus done callbacks; under the
    deterministic runner, waiting on it from the driving thread delivers
    messages until it is set.

    Same API and behaviour as pykka's ThreadingFuture (get with timeout ->
    pykka.Timeout, set/set_exception once else queue.Full, get hooks for map,
    join, reduce), but two plain locks instead of a Condition (an RLock, a deque
    and bound methods: objects the garbage collector walks, one set per ask).
    `_done` is held until the future is set; a waiter acquires and releases it.
    """

    def __init__(self) -> None:
        super().__init__()
        self._result: ThreadingFutureResult | None = None
        self._state = threading.Lock()
        self._done = threading.Lock()
        self._done.acquire()
        self._callbacks: list[Callable[[RuntimeFuture], None]] | None = None

    def add_done_callback(self, callback: Callable[["RuntimeFuture"], None]) -> None:
        """Call `callback(self)` once set (at once if it already is), on the setter's thread."""
        with self._state:
            if self._result is None:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(callback)
                return
        _call_isolated(callback, self)

    def set(self, value: Any | None = None) -> None:
        self._settle(ThreadingFutureResult(value=value))

    def set_exception(self, exc_info: Any = None) -> None:
        assert exc_info is None or len(exc_info) == 3
        self._settle(ThreadingFutureResult(exc_info=exc_info or sys.exc_info()))

    def set_get_hook(self, func: Any) -> None:
        with self._state:
            if self._result is not None:
                raise queue.Full
            super().set_get_hook(func)
        with contextlib.suppress(RuntimeError):  # wake waiters; they call the hook
            self._done.release()

    def _settle(self, result: ThreadingFutureResult) -> None:
        with self._state:
            if self._result is not None or self._get_hook is not None:
                raise queue.Full
            self._result = result
            callbacks, self._callbacks = self._callbacks, None
        self._done.release()
        for callback in callbacks or ():
            _call_isolated(callback, self)

    def get(self, *, timeout: float | None = None) -> Any:
        if self._get_hook is not None:
            return super().get(timeout=timeout)
        if self._result is None:
            if _debug and timeout != 0 and getattr(_worker, "pool", None) is not None:
                raise RuntimeError(
                    "a blocking future.get() on a pool worker thread: handlers on the pool"
                    " never block (DESIGN.md); tell, and let the answer come back as a message"
                )
            runtime = _runtime
            if runtime.drives_futures:
                runtime.run_until(lambda: self._result is not None, timeout)
            if self._result is None:
                wait = -1 if timeout is None else max(timeout, 0.0)
                if not self._done.acquire(timeout=wait):
                    raise pykka.Timeout(f"{timeout} seconds")
                self._done.release()
            if self._get_hook is not None:  # set while we waited
                return super().get(timeout=timeout)
        result = self._result
        assert result is not None
        if result.exc_info is not None:
            exc_type, exc_value, exc_traceback = result.exc_info
            assert exc_type is not None
            if exc_value is None:
                exc_value = exc_type()
            if exc_value.__traceback__ is not exc_traceback:
                raise exc_value.with_traceback(exc_traceback)
            raise exc_value
        return result.value


_flag_lock = threading.Lock()


class StopFlag:
    """threading.Event's API (is_set, set, clear, wait) as a bool; a real Event
    is made only for a thread that waits on it."""

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        with _flag_lock:
            event = self._event
        if event is not None:
            event.set()

    def clear(self) -> None:
        self._set = False
        with _flag_lock:
            event = self._event
        if event is not None:
            event.clear()

    def wait(self, timeout: float | None = None) -> bool:
        if self._set:
            return True
        with _flag_lock:
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        if self._set:  # set() ran before the event existed
            event.set()
        return event.wait(timeout)


class Actor(pykka.Actor):
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
        if cls.flush is not Actor.flush:
            cls._handle_receive = Actor._receive_then_flush  # type: ignore[method-assign,assignment]

    def __init__(self) -> None:
        runtime = _runtime
        own = type(self).own_runtime
        inline = isinstance(runtime, DeterministicRunner) and not runtime.own_threads
        self._runtime = own if own is not None and not inline else runtime
        # pykka.Actor.__init__'s four fields, but the stopped flag is a StopFlag:
        # pykka's threading.Event (a Condition, a lock and a deque) is about 1 KB
        # and a dozen objects the garbage collector walks, per actor.
        # Unique within the process, which is all a ref needs (a uuid4 costs a
        # urandom call: a tenth of the time it took to start a chat's actors).
        self.actor_urn = f"urn:agenthost:actor:{next(_urns)}"
        self.actor_inbox = self._create_actor_inbox()
        self.actor_stopped = StopFlag()  # type: ignore[assignment]
        self._actor_ref = ActorRef(self)

    @classmethod
    def start(cls, *args: Any, **kwargs: Any) -> ActorRef[Any]:
        """Start the actor. Unlike pykka's, it is kept in the runtime's own registry
        (O(1) add and remove), not in pykka's ActorRegistry (a list scanned on
        every lookup and removal, so stopping n actors there is quadratic)."""
        obj = cls(*args, **kwargs)
        obj._start_actor_loop()
        return obj.actor_ref

    def _create_actor_inbox(self) -> Any:  # type: ignore[override]
        return self._runtime.create_inbox(self)

    @staticmethod
    def _create_future() -> pykka.Future[Any]:
        return RuntimeFuture()

    def _start_actor_loop(self) -> None:
        with _live_lock:
            _live[self.actor_urn] = self.actor_ref
        self._runtime.start(self)

    def _stop(self) -> None:
        _forget(self)
        super()._stop()

    def _handle_failure(self, *exc_info: Any) -> None:
        _forget(self)
        super()._handle_failure(*exc_info)

    def _actor_loop_setup(self) -> None:
        super()._actor_loop_setup()
        self.flush()

    def _actor_loop_teardown(self) -> None:
        """pykka's teardown (only its own loop runs it: a `_ThreadInbox`), but
        never blocking on an inbox a late sender emptied; the pool answers what
        is left in `_finish`."""
        _answer_left(self, cast(_ThreadInbox, self.actor_inbox))

    def _receive_then_flush(self, message: Any) -> Any:
        """`_handle_receive` of a class that holds back (see `flush`)."""
        try:
            return pykka.Actor._handle_receive(self, message)
        finally:
            if self._runtime.flushes_per_message:
                self.flush()

    def flush(self) -> None:
        """Send what handlers held back to send together (a chat's store writes,
        a tracker's messages to its chat). The runtime calls it after on_start,
        before an ask's reply, and after each message; on the pool, after the
        run of messages a worker handles at a time, so a busy actor's effects
        travel in fewer, larger messages. (A class that overrides it gets the
        per-message call; the others skip it.)"""

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
        """Tell `ref`, tolerating an actor that already stopped. Returns whether it was sent."""
        if ref is None:
            return False
        try:
            ref.tell(message)
        except ActorDeadError:
            return False
        return True


def _forget(actor: pykka.Actor) -> None:
    with _live_lock:
        _live.pop(actor.actor_urn, None)


def live_actors() -> list[ActorRef[Any]]:
    with _live_lock:
        return list(_live.values())


def stop_all(timeout: float = STOP_TIMEOUT_S) -> None:
    """Stop every actor the runtime still runs (tests' autouse fixture), within
    `timeout` in all. Linear in the number of actors."""

    deadline = time.monotonic() + timeout
    futures = []
    for ref in live_actors():  # an ask of pykka's stop message: one future, not ref.stop's two
        with contextlib.suppress(ActorDeadError):
            futures.append(ref.ask(_ActorStop(), block=False))
    for future in futures:
        with contextlib.suppress(ActorDeadError, pykka.Timeout):
            future.get(timeout=max(deadline - time.monotonic(), 0.0))
    with _live_lock:
        _live.clear()
