import asyncio
import time

import pytest

from agenthost.actors import Host
from agenthost.actors.handles import Subscription
from agenthost.messages import OutcomeState
from agenthost.messages.events import (
    AssistantDelta,
    ChatEvent,
    ChatSnapshot,
    Lagged,
    TurnCompleted,
)
from agenthost.providers.base import ProviderLoop
from agenthost.providers.scripted import Say, ScriptedProvider
from tests.fakes.loops import held

WAIT_S = 10.0


def test_a_subscriber_that_falls_behind_gets_lagged_and_is_closed(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("flood", *(Say(str(i)) for i in range(50)))
    chat = host.create_session().chat()
    slow = chat.subscribe(maxsize=5)
    keeping_up = chat.subscribe()
    assert chat.send("flood").result(timeout=10).state is OutcomeState.COMPLETE
    events = list(slow)  # ends: the subscription was closed
    assert isinstance(events[0], ChatSnapshot)
    assert isinstance(events[-1], Lagged)
    assert len(events) == 6
    assert slow.closed
    seen = []
    while not isinstance(event := keeping_up.next(10), TurnCompleted):
        seen.append(event)
    assert "".join(e.text for e in seen if isinstance(e, AssistantDelta)) == "".join(
        str(i) for i in range(50)
    )


def test_a_closed_subscription_gets_nothing_more_and_the_chat_goes_on(host: Host) -> None:
    chat = host.create_session().chat()
    sub = chat.subscribe()
    assert isinstance(sub.next(10), ChatSnapshot)
    sub.close()
    assert chat.send("after close").result(timeout=10).state is OutcomeState.COMPLETE
    with pytest.raises(StopIteration):
        sub.next(1)


def test_the_snapshot_of_a_late_subscriber_holds_the_finished_turns(host: Host) -> None:
    chat = host.create_session().chat()
    chat.send("one").result(timeout=10)
    late = chat.subscribe()
    snapshot = late.next(10)
    assert isinstance(snapshot, ChatSnapshot)
    assert [t.user_text for t in snapshot.state.turns] == ["one"]
    with pytest.raises(TimeoutError):  # nothing was replayed after the snapshot
        late.next(0.01)


def test_pushes_to_many_subscriptions_read_on_one_loop_wake_it_once() -> None:
    """A chat's burst reaches every reader on the client's loop: one self-pipe
    write for all of them, not one per subscription."""
    loop_thread = ProviderLoop("readers")
    loop = loop_thread.loop
    subscriptions = [Subscription(maxsize=10) for _ in range(20)]
    try:

        async def read(subscription: Subscription) -> ChatEvent:
            events = aiter(subscription)
            try:
                return await anext(events)
            finally:
                await events.aclose()  # type: ignore[attr-defined]  # closed here, not by the loop

        readers = [asyncio.run_coroutine_threadsafe(read(s), loop) for s in subscriptions]

        async def all_waiting() -> bool:
            return all(s._async_waiters for s in subscriptions)

        deadline = time.monotonic() + WAIT_S
        while not asyncio.run_coroutine_threadsafe(all_waiting(), loop).result(WAIT_S):
            assert time.monotonic() < deadline, "the readers never waited"
        with held(loop) as busy:  # the pushes arrive while the loop is busy
            for index, subscription in enumerate(subscriptions):
                subscription.push(Lagged(session_id="s", chat_id=str(index), dropped=0))
            busy.release()
            seen = [reader.result(WAIT_S) for reader in readers]
        assert [e.chat_id for e in seen if isinstance(e, Lagged)] == [str(i) for i in range(20)]
        assert busy.wakeups == 1
    finally:
        loop_thread.stop()


def test_an_async_iterator_dropped_after_one_event_leaves_the_rest_queued() -> None:
    """A server channel reads the snapshot with one iterator and pumps with
    another: what was queued behind the snapshot must reach the second."""
    subscription = Subscription(maxsize=10)
    for index in range(3):
        subscription.push(Lagged(session_id="s", chat_id=str(index), dropped=0))

    async def first_then_rest() -> tuple[ChatEvent, list[ChatEvent]]:
        first = await anext(aiter(subscription))  # this iterator is dropped
        subscription.close()
        return first, [event async for event in subscription]

    first, rest = asyncio.run(first_then_rest())
    assert [e.chat_id for e in (first, *rest) if isinstance(e, Lagged)] == ["0", "1", "2"]
