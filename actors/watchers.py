"""Watchers: callbacks that any thread may add and remove, told in turn by
whoever holds them, on its own thread (a watcher must not block: it hands the
notice to its own loop or actor). A watcher that raises is logged under the
holder's event name and skipped; the others are still told."""

import itertools
import threading
from collections.abc import Callable
from typing import Generic, ParamSpec

import structlog

log = structlog.get_logger(__name__)

P = ParamSpec("P")


class Watchers(Generic[P]):
    def __init__(self, failed: str) -> None:
        """`failed`: the event logged when a watcher raises."""
        self._failed = failed
        self._watchers: dict[int, Callable[P, None]] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()

    def watch(self, watcher: Callable[P, None]) -> Callable[[], None]:
        """Add a watcher; the function returned removes it."""
        key = next(self._ids)
        with self._lock:
            self._watchers[key] = watcher

        def unwatch() -> None:
            with self._lock:
                self._watchers.pop(key, None)

        return unwatch

    @property
    def watched(self) -> bool:
        return bool(self._watchers)

    def tell(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Call every watcher there is now, in the order they were added."""
        with self._lock:
            watchers = list(self._watchers.values())
        for watcher in watchers:
            try:
                watcher(*args, **kwargs)
            except Exception:
                log.exception(self._failed)
