import pykka
import pytest

from agenthost.actors import use_runtime
from agenthost.actors.runtime import Actor, handles, live_actors, stop_all
from agenthost.testing import DeterministicRunner, FakeClock


class Record:
    def __init__(self, text: str) -> None:
        self.text = text


class Recorder(Actor):
    def __init__(self, log: list[str], name: str) -> None:
        super().__init__()
        self.log = log
        self.name = name

    @handles(Record)
    def _record(self, message: Record) -> str:
        self.log.append(f"{self.name}:{message.text}")
        return message.text.upper()

    def echo(self, value: int) -> int:
        return value


def test_the_test_chooses_which_pending_message_is_delivered_next() -> None:
    log: list[str] = []
    with use_runtime(DeterministicRunner()) as runner:
        a = Recorder.start(log, "a")
        b = Recorder.start(log, "b")
        a.tell(Record("1"))
        b.tell(Record("2"))
        a.tell(Record("3"))
        assert [d.message.text for d in runner.pending()] == ["1", "2", "3"]
        assert runner.deliverable() == [0, 1]  # each actor's oldest message
        runner.deliver(1)
        runner.deliver(0)
        runner.deliver(0)
    assert log == ["b:2", "a:1", "a:3"]


def test_a_mailbox_stays_fifo_on_the_deterministic_runner() -> None:
    with use_runtime(DeterministicRunner()) as runner:
        a = Recorder.start([], "a")
        a.tell(Record("1"))
        a.tell(Record("2"))
        with pytest.raises(ValueError, match="FIFO"):
            runner.deliver(1)


def test_waiting_on_a_future_delivers_until_it_is_set() -> None:
    log: list[str] = []
    with use_runtime(DeterministicRunner()):
        ref = Recorder.start(log, "a")
        ref.tell(Record("first"))
        assert ref.ask(Record("second"), block=False).get(timeout=1) == "SECOND"
    assert log == ["a:first", "a:second"]


def test_pykka_proxies_and_stop_work_on_the_deterministic_runner() -> None:
    with use_runtime(DeterministicRunner()):
        ref = Recorder.start([], "a")
        assert ref.proxy().echo(7).get(timeout=1) == 7
        ref.stop(block=False).get(timeout=1)
        assert not ref.is_alive()
        with pytest.raises(pykka.ActorDeadError):
            ref.tell(Record("late"))


def test_messages_behind_a_stop_are_answered_with_actor_dead() -> None:
    with use_runtime(DeterministicRunner()) as runner:
        ref = Recorder.start([], "a")
        stopped = ref.stop(block=False)
        behind = ref.ask(Record("x"), block=False)
        runner.deliver(0)
        stopped.get(timeout=1)
        with pytest.raises(pykka.ActorDeadError):
            behind.get(timeout=1)


def test_threading_runtime_keeps_pykka_semantics() -> None:
    log: list[str] = []
    ref = Recorder.start(log, "t")
    assert ref.ask(Record("x"), timeout=5) == "X"
    assert ref.proxy().echo(3).get(timeout=5) == 3


def test_stop_all_stops_every_live_actor() -> None:
    refs = [Recorder.start([], str(i)) for i in range(5)]
    stop_all()
    assert all(not ref.is_alive() for ref in refs)
    assert live_actors() == []


def test_fake_clock_fires_due_timers_in_order_and_only_when_advanced() -> None:
    clock = FakeClock()
    fired: list[str] = []
    clock.call_later(2, lambda: fired.append("two"))
    clock.call_later(1, lambda: fired.append("one"))
    cancelled = clock.call_later(1.5, lambda: fired.append("cancelled"))
    cancelled.cancel()
    clock.advance(0.5)
    assert fired == []
    clock.advance(2)
    assert fired == ["one", "two"]
    assert clock.now() == 2.5


def test_fake_clock_fires_timers_scheduled_by_a_timer_within_the_same_advance() -> None:
    clock = FakeClock()
    fired: list[float] = []
    clock.call_later(1, lambda: clock.call_later(1, lambda: fired.append(clock.now())))
    clock.advance(5)
    assert fired == [2.0]
