"""How actors run.

Every agenthost actor subclasses `Actor`, which keeps pykka's API (refs,
tell, ask, proxies, futures, on_start/on_stop/on_failure) and delegates the
three implementation hooks pykka offers new actor types (the inbox, the
future, the loop start) to the current `Runtime`:

- `ThreadingRuntime` (default): one daemon thread per actor, pykka's own loop.
- `DeterministicRunner` (tests): no threads. Messages wait in one list until
  the test delivers them, in an order it chooses (`deliver(i)`), or FIFO
  (`run()`); waiting on a future from the test thread delivers FIFO until it
  is set. Races are reproduced and shrunk, not hoped for.

Handlers are methods decorated with `@handles(MessageType)`; a handler never
blocks (no `ask(...).get()`, no I/O outside the store and worktree actors).
"""

import contextlib
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Protocol, TypeVar

import attrs
import pykka
import structlog
from pykka import ActorDeadError, ActorRef
from pykka._envelope import Envelope
from pykka._threading import ThreadingFuture
from pykka.messages import _ActorStop

log = structlog.get_logger(__name__)

ASK_TIMEOUT_S = 10.0
_RECHECK_S = 0.005
STOP_TIMEOUT_S = 5.0

F = TypeVar("F", bound=Callable[..., Any])


def handles(*message_types: type) -> Callable[[F], F]:
    """Mark an actor method as the handler of these message types."""

    def mark(fn: F) -> F:
        fn._handles = message_types  # type: ignore[attr-defined]
        return fn

    return mark


class Runtime(Protocol):
    drives_futures: bool

    def create_inbox(self, actor: "Actor") -> Any: ...

    def start(self, actor: "Actor") -> None: ...

    def run_until(self, done: Callable[[], bool], timeout: float | None) -> None: ...


class ThreadingRuntime:
    """pykka's threading model: each actor owns a daemon thread."""

    drives_futures = False

    def create_inbox(self, actor: "Actor") -> Any:
        import queue

        return queue.Queue()

    def start(self, actor: "Actor") -> None:
        thread = threading.Thread(target=actor._actor_loop, name=type(actor).__name__, daemon=True)
        thread.start()

    def run_until(self, done: Callable[[], bool], timeout: float | None) -> None:
        return None


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
        import time

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
        if actor.actor_stopped.is_set():
            _answer_dead(actor, envelope)
            return
        try:
            response = actor._handle_receive(envelope.message)
            if envelope.reply_to is not None:
                envelope.reply_to.set(response)
        except Exception:
            if envelope.reply_to is not None:
                envelope.reply_to.set_exception()
            else:
                actor._handle_failure(*sys.exc_info())
                with contextlib.suppress(Exception):
                    actor.on_failure(*sys.exc_info())
        if actor.actor_stopped.is_set():
            with self._cond:
                mine = [(a, e) for a, e in self._items if a is actor]
                self._items = deque((a, e) for a, e in self._items if a is not actor)
            for _, left in mine:
                _answer_dead(actor, left)


def _answer_dead(actor: "Actor", envelope: Envelope[Any]) -> None:
    if envelope.reply_to is None:
        return
    if isinstance(envelope.message, _ActorStop):
        envelope.reply_to.set(None)
        return
    error = ActorDeadError(f"{actor.actor_ref} stopped before handling the message")
    envelope.reply_to.set_exception(exc_info=(ActorDeadError, error, None))


_runtime: Runtime = ThreadingRuntime()
_live: dict[str, ActorRef[Any]] = {}
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


class RuntimeFuture(ThreadingFuture[Any]):
    """pykka's threading future, plus done callbacks; under the deterministic
    runner, waiting on it from the driving thread delivers messages until set."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: list[Callable[[RuntimeFuture], None]] = []

    def add_done_callback(self, callback: Callable[["RuntimeFuture"], None]) -> None:
        """Call `callback(self)` once set (at once if it already is), on the setter's thread."""
        with self._condition:
            if self._result is None:
                self._callbacks.append(callback)
                return
        _call_isolated(callback, self)

    def set(self, value: Any | None = None) -> None:
        super().set(value)
        self._run_callbacks()

    def set_exception(self, exc_info: Any = None) -> None:
        super().set_exception(exc_info if exc_info is not None else sys.exc_info())
        self._run_callbacks()

    def _run_callbacks(self) -> None:
        with self._condition:
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _call_isolated(callback, self)

    def get(self, *, timeout: float | None = None) -> Any:
        runtime = _runtime
        if runtime.drives_futures and self._result is None and self._get_hook is None:
            runtime.run_until(lambda: self._result is not None, timeout)
        return super().get(timeout=timeout)


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

    def __init__(self) -> None:
        runtime = _runtime
        own = type(self).own_runtime
        inline = isinstance(runtime, DeterministicRunner) and not runtime.own_threads
        self._runtime = own if own is not None and not inline else runtime
        super().__init__()

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
    """Stop every actor the runtime still runs (tests' autouse fixture)."""
    futures = []
    for ref in live_actors():
        with contextlib.suppress(ActorDeadError):
            futures.append(ref.stop(block=False))
    for future in futures:
        with contextlib.suppress(ActorDeadError, pykka.Timeout):
            future.get(timeout=timeout)
    with _live_lock:
        _live.clear()
