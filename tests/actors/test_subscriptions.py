import asyncio
import threading
import time
from typing import Any

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
        gate, entered = threading.Event(), threading.Event()

        def hold() -> None:  # every reader is waiting; keep the loop busy during the pushes
            entered.set()
            gate.wait(WAIT_S)

        async def all_waiting() -> bool:
            return all(s._async_waiters for s in subscriptions)

        deadline = time.monotonic() + WAIT_S
        while not asyncio.run_coroutine_threadsafe(all_waiting(), loop).result(WAIT_S):
            assert time.monotonic() < deadline, "the readers never waited"
        loop.call_soon_threadsafe(hold)
        assert entered.wait(WAIT_S)
        wakeups = 0
        original = loop.call_soon_threadsafe

        def counting(*args: Any) -> Any:
            nonlocal wakeups
            wakeups += 1
            return original(*args)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        try:
            for index, subscription in enumerate(subscriptions):
                subscription.push(Lagged(session_id="s", chat_id=str(index), dropped=0))
            gate.set()
            seen = [reader.result(WAIT_S) for reader in readers]
        finally:
            loop.call_soon_threadsafe = original  # type: ignore[method-assign]
        assert [e.chat_id for e in seen if isinstance(e, Lagged)] == [str(i) for i in range(20)]
        assert wakeups == 1
    finally:
        loop_thread.stop()
