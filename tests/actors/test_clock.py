"""SystemClock: real-time timers on one thread."""

import threading
from pathlib import Path

from agenthost.actors import SystemClock

WAIT_S = 5.0


def test_a_sooner_timer_wakes_the_clock_sleeping_on_a_later_one() -> None:
    clock = SystemClock()
    fired = threading.Event()
    later = clock.call_later(60, lambda: None)
    clock.call_later(0.01, fired.set)
    assert fired.wait(WAIT_S)
    later.cancel()


def test_a_later_timer_leaves_a_sooner_one_due_on_time() -> None:
    clock = SystemClock()
    fired = threading.Event()
    clock.call_later(0.01, fired.set)
    later = clock.call_later(60, lambda: None)
    assert fired.wait(WAIT_S)
    later.cancel()


def test_timers_fire_in_due_order_and_cancelled_ones_never() -> None:
    clock = SystemClock()
    order: list[str] = []
    done = threading.Event()
    # The clock's thread waits at a gate while the timers are set, so a test
    # thread descheduled between two calls cannot let one fire before the next
    # is set; once open, whatever is due fires in due order.
    gate, at_gate = threading.Event(), threading.Event()
    clock.call_later(0, lambda: (at_gate.set(), gate.wait(WAIT_S)))
    assert at_gate.wait(WAIT_S)
    clock.call_later(0.03, lambda: (order.append("third"), done.set()))
    clock.call_later(0.01, lambda: order.append("first"))
    clock.call_later(0.02, lambda: order.append("second")).cancel()
    clock.call_later(0.02, lambda: order.append("second"))
    gate.set()
    assert done.wait(WAIT_S)
    assert order == ["first", "second", "third"]


def test_a_stopped_clock_ends_its_thread_and_fires_nothing_more() -> None:
    clock = SystemClock()
    fired = threading.Event()
    clock.call_later(0.01, fired.set)
    assert fired.wait(WAIT_S)
    late = threading.Event()
    clock.call_later(0.01, late.set)
    clock.stop()
    clock.call_later(0, late.set)
    assert not any(t.name == "agenthost-clock" and t.is_alive() for t in _threads_of(clock))
    assert not late.is_set()


def _threads_of(clock: SystemClock) -> list[threading.Thread]:
    return [] if clock._thread is None else [clock._thread]


def test_a_host_stops_the_clock_it_made_and_leaves_one_it_was_given(db_path: Path) -> None:
    from agenthost.actors import Host
    from agenthost.store import SqliteStore

    host = Host.start(store=SqliteStore(db_path))
    made = host.services.clock
    assert isinstance(made, SystemClock)
    made.call_later(3600, lambda: None)  # a pending timer: the clock's thread runs
    assert made._thread is not None and made._thread.is_alive()
    host.stop()
    assert not made._thread.is_alive()
    given = SystemClock()
    host = Host.start(store=SqliteStore(db_path), clock=given)
    host.create_session()
    host.stop()
    fired = threading.Event()
    given.call_later(0, fired.set)
    assert fired.wait(WAIT_S), "a clock the host was given keeps working"
