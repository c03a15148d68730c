"""ProviderLoop and LoopCalls: work handed to a provider's event loop from other threads."""

import asyncio
import concurrent.futures
import gc
import threading
import weakref
from collections.abc import Iterator

import pytest

from agenthost.messages.provider import Idle, ReplyDelta
from agenthost.providers.base import LoopCalls, ProviderLoop
from tests.fakes.loops import held

WAIT_S = 10.0


@pytest.fixture
def provider_loop() -> Iterator[ProviderLoop]:
    loop = ProviderLoop("test")
    yield loop
    loop.stop()


def test_calls_from_many_threads_each_run_once_in_each_threads_order(
    provider_loop: ProviderLoop,
) -> None:
    calls = LoopCalls(provider_loop.loop)
    ran: list[tuple[int, int]] = []
    senders, per_sender = 6, 200
    barrier = threading.Barrier(senders)
    done = threading.Event()

    def record(sender: int, seq: int) -> None:
        ran.append((sender, seq))
        if len(ran) == senders * per_sender:
            done.set()

    def send(sender: int) -> None:
        barrier.wait(WAIT_S)
        for seq in range(per_sender):
            calls.call(record, sender, seq)

    threads = [threading.Thread(target=send, args=(s,)) for s in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert done.wait(WAIT_S)
    assert len(ran) == senders * per_sender
    for sender in range(senders):
        assert [seq for s, seq in ran if s == sender] == list(range(per_sender))


def test_a_burst_of_calls_wakes_the_loop_once(provider_loop: ProviderLoop) -> None:
    finished = threading.Event()
    calls = LoopCalls(provider_loop.loop)
    ran: list[int] = []
    with held(provider_loop.loop) as loop:  # the burst arrives while the loop is busy
        for i in range(100):
            calls.call(ran.append, i)
        calls.call(finished.set)
        loop.release()
        assert finished.wait(WAIT_S)
    assert ran == list(range(100))
    assert loop.wakeups == 1


def test_submit_returns_the_coroutines_result_or_exception(provider_loop: ProviderLoop) -> None:
    async def answer() -> int:
        return 42

    async def fail() -> None:
        raise ValueError("no")

    assert provider_loop.submit(answer()).result(WAIT_S) == 42
    with pytest.raises(ValueError, match="no"):
        provider_loop.submit(fail()).result(WAIT_S)


def test_cancelling_a_submitted_future_cancels_its_task(provider_loop: ProviderLoop) -> None:
    started = threading.Event()
    cancelled = threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    future = provider_loop.submit(forever())
    assert started.wait(WAIT_S)
    assert future.cancel()
    assert cancelled.wait(WAIT_S)


def test_a_task_cancelled_on_the_loop_cancels_its_future(provider_loop: ProviderLoop) -> None:
    async def cancel_self() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.Event().wait()  # the pending cancel lands here

    future = provider_loop.submit(cancel_self())
    with pytest.raises(concurrent.futures.CancelledError):
        future.result(WAIT_S)


def test_submit_after_stop_fails_without_running_the_coroutine() -> None:
    loop = ProviderLoop("stopped")
    loop.stop()
    ran: list[bool] = []

    async def work() -> None:
        ran.append(True)

    with pytest.raises(RuntimeError, match="stopped"):
        loop.submit(work()).result(WAIT_S)
    assert ran == []


def test_events_emitted_in_one_pass_of_the_loop_are_delivered_together_in_order(
    provider_loop: ProviderLoop,
) -> None:
    delivered: list[tuple[object, ...]] = []
    done = threading.Event()

    def deliver(events: tuple[object, ...]) -> None:
        delivered.append(events)
        if len(delivered) == 2:
            done.set()

    burst = provider_loop.burst(deliver)

    async def reply() -> None:
        for text in "abc":
            burst.emit(ReplyDelta(turn_id="t", text=text))
        for _ in range(3):  # a burst waits two passes (a call's result may ride it)
            await asyncio.sleep(0)  # allowed-sleep: a yield to the next loop pass, not a wait
        burst.emit(Idle(turn_id="t"))

    provider_loop.submit(reply()).result(WAIT_S)
    assert done.wait(WAIT_S)
    assert [[getattr(e, "text", "idle") for e in events] for events in delivered] == [
        ["a", "b", "c"],
        ["idle"],
    ]


def test_an_event_emitted_off_the_loop_keeps_its_place_behind_earlier_ones(
    provider_loop: ProviderLoop,
) -> None:
    delivered: list[object] = []
    done = threading.Event()

    def deliver(events: tuple[object, ...]) -> None:
        delivered.extend(events)
        if len(delivered) == 2:
            done.set()

    burst = provider_loop.burst(deliver)
    provider_loop.loop.call_soon_threadsafe(burst.emit, ReplyDelta(turn_id="t", text="first"))
    burst.emit(Idle(turn_id="t"))  # from this thread: it hops to the loop first
    assert done.wait(WAIT_S)
    assert [type(e) for e in delivered] == [ReplyDelta, Idle]


def test_flush_delivers_at_once_on_the_loop_and_is_a_no_op_elsewhere(
    provider_loop: ProviderLoop,
) -> None:
    delivered: list[tuple[object, ...]] = []
    burst = provider_loop.burst(delivered.append)

    async def emit_and_flush() -> int:
        burst.emit(Idle(turn_id="t"))
        burst.flush()
        return len(delivered)

    assert provider_loop.submit(emit_and_flush()).result(WAIT_S) == 1
    burst.flush()  # off the loop, nothing waiting: nothing happens
    assert len(delivered) == 1


def test_a_loops_shared_calls_go_with_the_loop() -> None:
    """`LoopCalls.of` keeps a loop's calls for as long as the loop lives, and no longer."""

    async def use() -> None:
        LoopCalls.of(asyncio.get_running_loop()).call(lambda: None)

    loop = asyncio.new_event_loop()
    loop.run_until_complete(use())
    loop.close()
    gone = weakref.ref(loop)
    del loop
    gc.collect()
    assert gone() is None
