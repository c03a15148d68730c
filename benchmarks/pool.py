"""The pooled runtime against pykka's ThreadingActor, in the same run.

- tells/s: a burst of tells to a set of actors, timed until the last is handled;
- ask round trip: sequential asks from one caller thread;
- memory per idle pooled actor: tracemalloc over many idle actors (their
  objects, mailbox and registry entry), and the time to start and stop them.

Rounds alternate between the two runtimes; figures are medians over rounds.
"""

import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import attrs
import pykka

from agenthost.actors.pool import PooledRuntime
from agenthost.actors.runtime import Actor, live_actors, stop_all, use_runtime


class _Counter:
    """The shared part of both actors: count tells, answer asks."""

    def __init__(self) -> None:
        self.count = 0

    def on_receive(self, message: object) -> object:
        if message is None:
            self.count += 1
            return None
        return message


class _PooledCounter(_Counter, Actor):
    def __init__(self) -> None:
        Actor.__init__(self)
        _Counter.__init__(self)

    def on_receive(self, message: object) -> object:
        return _Counter.on_receive(self, message)


class _ThreadCounter(_Counter, pykka.ThreadingActor):
    use_daemon_thread = True

    def __init__(self) -> None:
        pykka.ThreadingActor.__init__(self)
        _Counter.__init__(self)

    def on_receive(self, message: object) -> object:
        return _Counter.on_receive(self, message)


class _Idle(Actor):
    pass


@attrs.frozen
class Figure:
    name: str
    pooled: float
    threaded: float
    unit: str
    higher_is_better: bool

    @property
    def ratio(self) -> float:
        """How many times better the pool is (>1: the pool wins)."""
        if self.higher_is_better:
            return self.pooled / self.threaded
        return self.threaded / self.pooled


@attrs.frozen
class Memory:
    actors: int
    bytes_per_actor: float
    start_s: float
    stop_s: float


def _tells_per_s(refs: list[Any], tells: int) -> float:
    started = time.perf_counter()
    for i in range(tells):
        refs[i % len(refs)].tell(None)
    for ref in refs:  # FIFO: once each answers, each handled all its tells
        ref.ask("sync", timeout=60)
    return tells / (time.perf_counter() - started)


def _ask_us(ref: Any, asks: int) -> float:
    started = time.perf_counter()
    for i in range(asks):
        ref.ask(i, timeout=10)
    return (time.perf_counter() - started) / asks * 1e6


def _median_alternating(
    pooled: Callable[[], float], threaded: Callable[[], float], rounds: int
) -> tuple[float, float]:
    a, b = [], []
    for _ in range(rounds):
        a.append(pooled())
        b.append(threaded())
    return statistics.median(a), statistics.median(b)


def run(rounds: int = 5, tells: int = 50_000, asks: int = 3000, actors: int = 100) -> list[Figure]:
    pool = PooledRuntime()
    with use_runtime(pool):
        pooled_one = [_PooledCounter.start()]
        pooled_many = [_PooledCounter.start() for _ in range(actors)]
        threaded_one = [_ThreadCounter.start()]
        threaded_many = [_ThreadCounter.start() for _ in range(actors)]
        _tells_per_s(pooled_many, 2000)  # warm up
        _tells_per_s(threaded_many, 2000)
        figures = []
        for label, p_refs, t_refs in (
            ("tells/s to 1 actor", pooled_one, threaded_one),
            (f"tells/s to {actors} actors", pooled_many, threaded_many),
        ):
            p, t = _median_alternating(
                lambda refs=p_refs: _tells_per_s(refs, tells),  # type: ignore[misc]
                lambda refs=t_refs: _tells_per_s(refs, tells),  # type: ignore[misc]
                rounds,
            )
            figures.append(Figure(label, p, t, "/s", True))
        p, t = _median_alternating(
            lambda: _ask_us(pooled_one[0], asks), lambda: _ask_us(threaded_one[0], asks), rounds
        )
        figures.append(Figure("ask round trip", p, t, "µs", False))
        for ref in threaded_one + threaded_many:
            ref.stop()
        stop_all()
    pool.shutdown()
    return figures


def memory(actors: int = 100_000) -> Memory:
    """Bytes per idle pooled actor, and the time to start and stop `actors` of them."""
    pool = PooledRuntime()
    with use_runtime(pool):
        _Idle.start().proxy().actor_urn.get(timeout=10)  # warm up
        stop_all()
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        refs = [_Idle.start() for _ in range(actors)]
        refs[-1].proxy().actor_urn.get(timeout=60)  # every on_start has run
        gc.collect()
        per_actor = (tracemalloc.get_traced_memory()[0] - before) / actors
        tracemalloc.stop()
        del refs
        stop_all(timeout=60)
        gc.collect()
        started = time.perf_counter()
        for _ in range(actors):
            _Idle.start()
        start_s = time.perf_counter() - started
        started = time.perf_counter()
        stop_all(timeout=120)
        stop_s = time.perf_counter() - started
        assert not live_actors()
    pool.shutdown()
    return Memory(actors, per_actor, start_s, stop_s)
