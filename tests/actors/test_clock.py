"""SystemClock: real-time timers on one thread."""

import threading

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
    clock.call_later(0.03, lambda: (order.append("third"), done.set()))
    clock.call_later(0.01, lambda: order.append("first"))
    clock.call_later(0.02, lambda: order.append("second")).cancel()
    clock.call_later(0.02, lambda: order.append("second"))
    assert done.wait(WAIT_S)
    assert order == ["first", "second", "third"]
