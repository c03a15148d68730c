"""`RuntimeFuture`: every agenthost actor's reply future, and `StopFlag`.

Both are built on pykka's public API only (pykka.Future's `set_get_hook` and
`get` for hooks; nothing private).
"""

import contextlib
import queue
import sys
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

import pykka
import structlog

log = structlog.get_logger(__name__)

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


class _Outcome:
    """A set future's value or exception (one object; never changes)."""

    __slots__ = ("exc_info", "value")

    def __init__(self, value: Any = None, exc_info: ExcInfo | None = None) -> None:
        self.value = value
        self.exc_info = exc_info


def _call_isolated(callback: Callable[[Any], None], future: Any) -> None:
    """A done callback runs on the setter's thread (often an actor's): one that
    raises must never take that actor down."""
    try:
        callback(future)
    except Exception:
        log.warning("future_callback_failed", exc_info=True)


before_wait: Callable[[Callable[[], bool], float | None], None] | None = None
"""Set by runtime.py, called before a thread blocks on a future that is not
set: `before_wait(done, timeout)` raises where blocking is forbidden (a pool
worker in debug mode) and drives a deterministic runner until `done()`. (A
future must not import the runtime: the runtime builds on this module.)"""


class RuntimeFuture(pykka.Future[Any]):
    """pykka's threading future made light, plus `done()` and done callbacks;
    under the deterministic runner, waiting on it from the driving thread
    delivers messages until it is set.

    Same API and behaviour as pykka's ThreadingFuture (get with timeout ->
    pykka.Timeout, set/set_exception once else queue.Full, get hooks for map,
    join, reduce), but two plain locks instead of a Condition (an RLock, a deque
    and bound methods: objects the garbage collector walks, one set per ask).
    `_done` is held until the future is set; a waiter acquires and releases it.
    """

    def __init__(self) -> None:
        super().__init__()
        self._outcome: _Outcome | None = None
        self._hooked = False
        self._state = threading.Lock()
        self._done = threading.Lock()
        self._done.acquire()
        self._callbacks: list[Callable[[RuntimeFuture], None]] | None = None

    def done(self) -> bool:
        """Whether it is set (a value, an exception, or a get hook)."""
        return self._outcome is not None or self._hooked

    def add_done_callback(self, callback: Callable[["RuntimeFuture"], None]) -> None:
        """Call `callback(self)` once set (at once if it already is), on the setter's thread."""
        with self._state:
            if self._outcome is None:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(callback)
                return
        _call_isolated(callback, self)

    def set(self, value: Any | None = None) -> None:
        self._settle(_Outcome(value=value))

    def set_exception(self, exc_info: Any = None) -> None:
        assert exc_info is None or len(exc_info) == 3
        outcome: Any = exc_info or sys.exc_info()
        self._settle(_Outcome(exc_info=outcome))

    def set_get_hook(self, func: Any) -> None:
        with self._state:
            if self._outcome is not None or self._hooked:
                raise queue.Full
            self._hooked = True
            super().set_get_hook(func)
        with contextlib.suppress(RuntimeError):  # wake waiters; they call the hook
            self._done.release()

    def _settle(self, outcome: _Outcome) -> None:
        with self._state:
            if self._outcome is not None or self._hooked:
                raise queue.Full
            self._outcome = outcome
            callbacks, self._callbacks = self._callbacks, None
        self._done.release()
        for callback in callbacks or ():
            _call_isolated(callback, self)

    def get(self, *, timeout: float | None = None) -> Any:
        if self._hooked:
            return super().get(timeout=timeout)
        if self._outcome is None:
            if timeout != 0 and before_wait is not None:
                before_wait(lambda: self._outcome is not None, timeout)
            if self._outcome is None:
                wait = -1 if timeout is None else max(timeout, 0.0)
                if not self._done.acquire(timeout=wait):
                    raise pykka.Timeout(f"{timeout} seconds")
                self._done.release()
            if self._hooked:  # set while we waited
                return super().get(timeout=timeout)
        outcome = self._outcome
        assert outcome is not None
        if outcome.exc_info is not None:
            exc_type, exc_value, exc_traceback = outcome.exc_info
            if exc_value is None:
                exc_value = exc_type()
            if exc_value.__traceback__ is not exc_traceback:
                raise exc_value.with_traceback(exc_traceback)
            raise exc_value
        return outcome.value

    def result_nowait(self) -> Any:
        """The value (or raises the exception) of a future that is `done()`."""
        if not self.done():
            raise RuntimeError("the future is not set yet")
        return self.get(timeout=0)


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
