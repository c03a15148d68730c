"""The pooled runtime keeps pykka's semantics on a few shared worker threads."""

import contextlib
import os
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pykka
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.pool import PooledRuntime, answer_left, default_workers
from agenthost.actors.pykka_seam import Envelope
from agenthost.actors.runtime import Actor, handles, live_actors, set_debug, stop_all, use_runtime
from agenthost.actors.threads import ThreadingRuntime

WAIT_S = 10.0


class Note:
    def __init__(self, sender: int, seq: int) -> None:
        self.sender = sender
        self.seq = seq


class Boom:
    pass


class Probe(Actor):
    """Records what it receives, which thread ran it, and any overlap of its handlers."""

    def __init__(
        self, name: str = "", events: list[str] | None = None, into: list["Probe"] | None = None
    ) -> None:
        super().__init__()
        if into is not None:
            into.append(self)  # for reading its records once it is stopped or idle
        self.name = name
        self.events = events if events is not None else []
        self.received: list[tuple[int, int]] = []
        self.busy = False
        self.overlaps = 0
        self.threads: set[str] = set()

    def on_start(self) -> None:
        self.events.append(f"start:{threading.current_thread().name}:{len(self.received)}")

    def on_stop(self) -> None:
        self.events.append("stop")

    def on_failure(self, *exc_info: Any) -> None:
        self.events.append("failure")

    @handles(Note)
    def _note(self, message: Note) -> int:
        if self.busy:
            self.overlaps += 1
        self.busy = True
        self.threads.add(threading.current_thread().name)
        total = 0
        for i in range(200):  # a little work, so that an overlap would show
            total += i
        self.received.append((message.sender, message.seq))
        self.busy = False
        return message.seq

    @handles(Boom)
    def _boom(self, message: Boom) -> None:
        raise ValueError("boom")

    def snapshot(self) -> tuple[list[tuple[int, int]], int, set[str]]:
        return list(self.received), self.overlaps, set(self.threads)


@pytest.fixture
def switch_often() -> Iterator[None]:
    """Make the interpreter switch threads very often, so that interleavings show."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


@pytest.fixture
def pool() -> Iterator[PooledRuntime]:
    runtime = PooledRuntime(workers=4)
    with use_runtime(runtime):
        yield runtime
        stop_all()
    runtime.shutdown()


def test_each_mailbox_is_fifo_and_handlers_never_overlap_under_many_senders(
    pool: PooledRuntime, switch_often: None
) -> None:
    actors = [Probe.start(str(i)) for i in range(4)]
    senders, per_sender = 8, 300
    barrier = threading.Barrier(senders)

    def send(sender: int) -> None:
        barrier.wait(timeout=WAIT_S)
        for seq in range(per_sender):
            actors[seq % len(actors)].tell(Note(sender, seq))

    threads = [threading.Thread(target=send, args=(s,)) for s in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert not any(thread.is_alive() for thread in threads)

    for index, ref in enumerate(actors):
        received, overlaps, _ = ref.proxy().snapshot().get(timeout=WAIT_S)
        assert overlaps == 0
        for sender in range(senders):
            seqs = [seq for s, seq in received if s == sender]
            assert seqs == list(range(index, per_sender, len(actors)))


def test_the_pool_runs_actors_on_its_shared_workers(pool: PooledRuntime) -> None:
    events: list[str] = []
    ref = Probe.start("a", events)
    assert ref.ask(Note(0, 1), timeout=WAIT_S) == 1
    _, _, threads = ref.proxy().snapshot().get(timeout=WAIT_S)
    assert all(name.startswith("agenthost-pool-") for name in threads)
    assert events[0].startswith("start:agenthost-pool-")


def test_ask_tell_and_proxies_work_on_the_pool(pool: PooledRuntime) -> None:
    ref = Probe.start("a")
    ref.tell(Note(0, 1))
    assert ref.ask(Note(0, 2), timeout=WAIT_S) == 2
    proxy = ref.proxy()
    assert proxy.name.get(timeout=WAIT_S) == "a"
    proxy.name = "b"
    assert proxy.name.get(timeout=WAIT_S) == "b"
    assert proxy.snapshot().get(timeout=WAIT_S)[0] == [(0, 1), (0, 2)]


def test_an_exception_in_an_ask_goes_to_the_asker_and_the_actor_lives_on(
    pool: PooledRuntime,
) -> None:
    events: list[str] = []
    ref = Probe.start("a", events)
    with pytest.raises(ValueError, match="boom"):
        ref.ask(Boom(), timeout=WAIT_S)
    assert ref.ask(Note(0, 3), timeout=WAIT_S) == 3
    assert "failure" not in events


def test_on_start_runs_before_the_first_message_and_on_stop_at_the_end(
    pool: PooledRuntime,
) -> None:
    events: list[str] = []
    ref = Probe.start("a", events)
    ref.tell(Note(0, 1))
    assert ref.stop(block=True, timeout=WAIT_S)
    assert events[0].startswith("start:") and events[0].endswith(":0")  # nothing received yet
    assert events[1:] == ["stop"]
    assert not ref.is_alive()
    assert ref not in live_actors()


def test_a_failing_tell_calls_on_failure_stops_the_actor_and_later_asks_die(
    pool: PooledRuntime,
) -> None:
    events: list[str] = []
    ref = Probe.start("a", events)
    ref.tell(Boom())
    behind = ref.ask(Note(0, 1), block=False)
    with pytest.raises(pykka.ActorDeadError):
        behind.get(timeout=WAIT_S)
    assert events[1:] == ["failure"]
    assert ref not in live_actors()


def test_a_stopped_actor_refuses_tells_and_asks(pool: PooledRuntime) -> None:
    ref = Probe.start("a")
    ref.stop(block=True, timeout=WAIT_S)
    with pytest.raises(pykka.ActorDeadError):
        ref.tell(Note(0, 1))
    with pytest.raises(pykka.ActorDeadError):
        ref.ask(Note(0, 2), timeout=WAIT_S)


class Stopper(Actor):
    """On Go, queues its own stop and then asks behind it (both wait behind this handler)."""

    def __init__(self, behind: list[Any]) -> None:
        super().__init__()
        self.behind = behind

    def go(self) -> None:
        self.behind.append(self.actor_ref.stop(block=False))
        self.behind.append(self.actor_ref.ask(Note(0, 1), block=False))
        self.behind.append(self.actor_ref.ask(Note(0, 2), block=False))


def test_asks_queued_behind_a_stop_are_answered_with_actor_dead(pool: PooledRuntime) -> None:
    behind: list[Any] = []
    ref = Stopper.start(behind)
    ref.proxy().go().get(timeout=WAIT_S)
    stopped, first, second = behind
    assert stopped.get(timeout=WAIT_S) is True
    for future in (first, second):
        with pytest.raises(pykka.ActorDeadError):
            future.get(timeout=WAIT_S)


class Blocker(Actor):
    def wait_on_unset_future(self, timeout: float) -> None:
        RuntimeFuture().get(timeout=timeout)

    def read_a_set_future(self) -> int:
        future = RuntimeFuture()
        future.set(5)
        return int(future.get(timeout=WAIT_S))


def test_a_blocking_get_on_a_pool_worker_raises_in_debug_mode(pool: PooledRuntime) -> None:
    ref = Blocker.start()
    with pytest.raises(RuntimeError, match="never block"):
        ref.proxy().wait_on_unset_future(WAIT_S).get(timeout=WAIT_S)
    assert ref.proxy().read_a_set_future().get(timeout=WAIT_S) == 5  # a get that cannot block


def test_a_blocking_get_off_the_pool_is_allowed_in_debug_mode() -> None:
    with pytest.raises(pykka.Timeout):
        RuntimeFuture().get(timeout=0.01)


def test_without_debug_a_blocking_get_on_the_pool_just_waits(pool: PooledRuntime) -> None:
    ref = Blocker.start()
    set_debug(False)
    try:
        with pytest.raises(pykka.Timeout):
            ref.proxy().wait_on_unset_future(0.01).get(timeout=WAIT_S)
    finally:
        set_debug(True)


class Flood(Actor):
    """On the trigger, tells itself `n` messages and `other` one, then records its turns."""

    def __init__(self, order: list[str], name: str) -> None:
        super().__init__()
        self.order = order
        self.name = name

    def trigger(self, n: int, other: Any) -> None:
        self.order.append(f"{self.name}:trigger")
        for i in range(n):
            self.actor_ref.proxy().mark(i)
        other.proxy().mark(0)

    def mark(self, i: int) -> None:
        self.order.append(f"{self.name}:{i}")


def test_a_busy_actor_yields_its_worker_after_a_batch() -> None:
    order: list[str] = []
    runtime = PooledRuntime(workers=1, batch=2)
    with use_runtime(runtime):
        a = Flood.start(order, "a")
        b = Flood.start(order, "b")
        a.proxy().trigger(10, b).get(timeout=WAIT_S)
        assert a.proxy().mark(99).get(timeout=WAIT_S) is None
        stop_all()
    runtime.shutdown()
    # a's turn is the trigger and one more message; then b, whose mail came after.
    assert order[:4] == ["a:trigger", "a:0", "b:0", "a:1"]
    assert order[-1] == "a:99"


class Idle(Actor):
    pass


def test_starting_and_stopping_many_actors_leaves_the_registry_empty(
    pool: PooledRuntime,
) -> None:
    count = 20_000  # 100k takes ~5 s on two shared cores; `python -m benchmarks` runs 100k
    refs = [Idle.start() for _ in range(count)]
    assert len(live_actors()) == count
    stop_all(timeout=60)
    assert live_actors() == []
    assert not any(ref.is_alive() for ref in refs)


def test_the_pool_can_be_shut_down_and_started_again() -> None:
    runtime = PooledRuntime(workers=2)
    with use_runtime(runtime):
        assert Probe.start().ask(Note(0, 1), timeout=WAIT_S) == 1
        stop_all()
        workers = list(runtime._threads)
        runtime.shutdown()
        assert workers and not any(worker.is_alive() for worker in workers)
        assert Probe.start().ask(Note(0, 2), timeout=WAIT_S) == 2
        stop_all()
    runtime.shutdown()


# -- random tells, asks and stops: FIFO and exactly-once ------------------------------------------
operation = st.tuples(st.sampled_from(["tell", "ask", "stop"]), st.integers(0, 2))


def random_operations(test: Callable[..., None]) -> Callable[..., None]:
    """The test gets `operations`: (kind, which of three actors), in the order sent."""
    examples = settings(
        max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    return examples(given(st.lists(operation, max_size=40))(test))


@random_operations
def test_random_tells_asks_and_stops_deliver_each_message_once_in_order(
    pool: PooledRuntime, operations: list[tuple[str, int]]
) -> None:
    probes: list[Probe] = []
    actors = [Probe.start(str(i), into=probes) for i in range(3)]
    expected: list[list[tuple[int, int]]] = [[] for _ in actors]
    stopped = [False] * len(actors)
    asks: list[tuple[Any, int, bool]] = []  # future, seq, answered (sent before the stop)
    stops: list[Any] = []
    for seq, (kind, index) in enumerate(operations):
        ref = actors[index]
        if kind == "stop":
            if not stopped[index]:
                stops.append(ref.stop(block=False))
                stopped[index] = True
            continue
        if kind == "tell":
            try:
                ref.tell(Note(index, seq))
            except pykka.ActorDeadError:
                assert stopped[index]
        else:
            asks.append((ref.ask(Note(index, seq), block=False), seq, not stopped[index]))
        if not stopped[index]:
            expected[index].append((index, seq))

    for future, seq, answered in asks:
        if answered:
            assert future.get(timeout=WAIT_S) == seq
        else:
            with pytest.raises(pykka.ActorDeadError):
                future.get(timeout=WAIT_S)
    for future in stops:
        assert future.get(timeout=WAIT_S) is True
    for index, ref in enumerate(actors):
        if not stopped[index]:  # (a stopped one handled all it will: its stop was answered)
            ref.proxy().snapshot().get(timeout=WAIT_S)  # everything sent before is handled
        assert probes[index].received == expected[index]
        assert probes[index].overlaps == 0
    stop_all()


def test_the_stopped_flag_can_be_waited_on_like_pykkas_event(pool: PooledRuntime) -> None:
    ref = Probe.start()
    assert ref.actor_stopped.wait(0.01) is False
    waiter_saw: list[bool] = []
    waiter = threading.Thread(target=lambda: waiter_saw.append(ref.actor_stopped.wait(WAIT_S)))
    waiter.start()
    ref.stop(block=False)
    waiter.join(WAIT_S)
    assert waiter_saw == [True]
    assert ref.actor_stopped.is_set()


# -- the runtime's future keeps pykka's future behaviour --------------------------------------
def test_every_thread_waiting_on_a_future_gets_its_value() -> None:
    future = RuntimeFuture()
    seen: list[int] = []
    waiters = [
        threading.Thread(target=lambda: seen.append(future.get(timeout=WAIT_S))) for _ in range(4)
    ]
    for waiter in waiters:
        waiter.start()
    future.set(7)
    for waiter in waiters:
        waiter.join(WAIT_S)
    assert seen == [7, 7, 7, 7]
    assert future.get(timeout=0) == 7


def test_a_future_is_set_once_and_raises_what_it_was_set_with() -> None:
    future = RuntimeFuture()
    try:
        raise KeyError("gone")
    except KeyError:
        future.set_exception()
    with pytest.raises(queue.Full):
        future.set(1)
    with pytest.raises(KeyError, match="gone"):
        future.get(timeout=WAIT_S)


def test_done_callbacks_run_once_whether_added_before_or_after_the_value() -> None:
    future = RuntimeFuture()
    calls: list[str] = []
    future.add_done_callback(lambda f: calls.append(f"before:{f.get(timeout=0)}"))
    future.set("v")
    future.add_done_callback(lambda f: calls.append(f"after:{f.get(timeout=0)}"))
    assert calls == ["before:v", "after:v"]


def test_pykkas_future_combinators_work_on_the_runtimes_future(pool: PooledRuntime) -> None:
    refs = [Probe.start(str(i)) for i in range(3)]
    futures = [ref.ask(Note(0, i), block=False) for i, ref in enumerate(refs)]
    assert pykka.get_all(futures, timeout=WAIT_S) == [0, 1, 2]
    assert futures[2].map(lambda value: value * 10).get(timeout=WAIT_S) == 20
    assert refs[0].ask(Note(0, 5), block=False).join(futures[1]).get(timeout=WAIT_S) == [5, 1]


class Work:
    pass


class Hold:
    pass


class Sink(Actor):
    """Records the batches a Holder flushes to it."""

    def __init__(self, got: threading.Event | None = None) -> None:
        super().__init__()
        self.batches: list[tuple[str, ...]] = []
        self.got = got or threading.Event()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, tuple):
            self.batches.append(message)
            self.got.set()
            return None
        return list(self.batches)


class Holder(Actor):
    """Holds back a note per message and sends them together on flush. Its
    on_start waits for `opened`, so the test queues a whole turn's mail first;
    a Hold waits for `released`, so the turn goes on while the test looks."""

    def __init__(self, sink: Any, opened: threading.Event, released: threading.Event) -> None:
        super().__init__()
        self.sink = sink
        self.opened = opened
        self.released = released
        self.held: list[str] = []

    def on_start(self) -> None:
        assert self.opened.wait(WAIT_S)

    def flush(self) -> None:
        if self.held:
            Actor.send(self.sink, tuple(self.held))
            self.held = []

    @handles(Note)
    def _note(self, message: Note) -> None:
        self.held.append(f"note {message.seq}")

    @handles(Work)
    def _work(self, message: Work) -> str:
        self.held.append("work")
        return "done"

    @handles(Hold)
    def _hold(self, message: Hold) -> None:
        assert self.released.wait(WAIT_S)


def test_what_one_turn_of_messages_holds_back_leaves_in_one_flush(pool: PooledRuntime) -> None:
    opened, released, got = threading.Event(), threading.Event(), threading.Event()
    sink = Sink.start(got)
    holder = Holder.start(sink, opened, released)
    for seq in range(3):
        holder.tell(Note(0, seq))
    opened.set()  # the three notes are one turn (the batch is 64)
    assert got.wait(WAIT_S)
    assert sink.ask("batches", timeout=WAIT_S) == [("note 0", "note 1", "note 2")]


def test_a_reply_never_overtakes_what_its_handler_held_back(pool: PooledRuntime) -> None:
    """The turn goes on (Hold) after the ask's reply: the reply must still come
    after the handler's note reached the sink."""
    opened, released = threading.Event(), threading.Event()
    sink = Sink.start()
    holder = Holder.start(sink, opened, released)
    reply = holder.ask(Work(), block=False)
    holder.tell(Hold())
    opened.set()
    try:
        assert reply.get(timeout=WAIT_S) == "done"
        assert sink.ask("batches", timeout=WAIT_S) == [("work",)]
    finally:
        released.set()


class Keeper(Actor):
    """Holds back the seq of each Note it handles; its flush sends them on."""

    def __init__(self, index: int, sink: Any) -> None:
        super().__init__()
        self.index = index
        self.sink = sink
        self.held: list[int] = []

    def flush(self) -> None:
        if self.held:
            Actor.send(self.sink, (self.index, tuple(self.held)))
            self.held = []

    @handles(Note)
    def _note(self, message: Note) -> int:
        self.held.append(message.seq)
        return message.seq


class Ledger(Actor):
    """What each Keeper flushed, in arrival order."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[int, list[int]] = {}

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, tuple):
            index, seqs = message
            self.seen.setdefault(index, []).extend(seqs)
            return None
        return {index: list(seqs) for index, seqs in self.seen.items()}


@random_operations
def test_what_actors_hold_back_arrives_once_in_order_and_before_their_replies(
    pool: PooledRuntime, operations: list[tuple[str, int]]
) -> None:
    ledger = Ledger.start()
    keepers = [Keeper.start(i, ledger) for i in range(3)]
    expected: list[list[int]] = [[] for _ in keepers]
    stopped = [False] * len(keepers)
    stops: list[Any] = []
    for seq, (kind, index) in enumerate(operations):
        ref = keepers[index]
        if kind == "stop":
            if not stopped[index]:
                stops.append(ref.stop(block=False))
                stopped[index] = True
        elif kind == "tell":
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(Note(index, seq))
            if not stopped[index]:
                expected[index].append(seq)
        elif not stopped[index]:
            assert ref.ask(Note(index, seq), timeout=WAIT_S) == seq
            expected[index].append(seq)
            # the reply came after the note left: the ledger (FIFO) has it by now
            assert seq in ledger.ask("seen", timeout=WAIT_S).get(index, [])
    for future in stops:
        assert future.get(timeout=WAIT_S) is True
    for index, ref in enumerate(keepers):
        if not stopped[index]:
            ref.stop(timeout=WAIT_S)  # its last turn's flush leaves before the stop's reply
    assert ledger.ask("seen", timeout=WAIT_S) == {
        index: seqs for index, seqs in enumerate(expected) if seqs
    }
    stop_all()


class OwnThread(Actor):
    own_runtime = ThreadingRuntime()

    @handles(Note)
    def _note(self, message: Note) -> int:
        return message.seq


def test_an_ask_that_lands_after_an_own_thread_actors_teardown_is_answered() -> None:
    """A sender checks the actor is alive, the actor stops and its teardown
    drains the inbox, then the sender's ask lands: it is answered at once."""
    ref = OwnThread.start()
    late: RuntimeFuture = RuntimeFuture()
    ref.stop(timeout=WAIT_S)  # stopped, its inbox drained
    ref.actor_inbox.put(Envelope(Note(0, 1), reply_to=late))  # the ask that passed the check
    with pytest.raises(pykka.ActorDeadError):
        late.get(timeout=0)  # answered during the put itself


class _EmptiedBehindTeardown(queue.SimpleQueue):  # type: ignore[type-arg]
    """Empty, but its first empty() answers as it did just before a late sender
    took the last message (and answered it)."""

    __slots__ = ("_asked",)

    def __init__(self) -> None:
        self._asked = False

    def empty(self) -> bool:
        first, self._asked = not self._asked, True
        return not first


def test_an_own_thread_actors_teardown_never_waits_on_an_inbox_a_sender_emptied() -> None:
    """Teardown saw a message left, but a late sender answered it first: the
    teardown must not block on the empty inbox (its thread would hang)."""
    actor = OwnThread()
    teardown = threading.Thread(
        target=answer_left, args=(actor, _EmptiedBehindTeardown()), daemon=True
    )
    teardown.start()
    teardown.join(WAIT_S)
    assert not teardown.is_alive()


def test_the_default_pool_stops_at_two_workers_under_a_gil(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the first, workers under a GIL only take it from each other."""
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(sys, "_is_gil_enabled", lambda: True, raising=False)
    assert default_workers() == 2 and PooledRuntime().workers == 2
    monkeypatch.setattr(sys, "_is_gil_enabled", lambda: False, raising=False)
    assert default_workers() == 16
