import pytest

from agenthost.actors import Host
from agenthost.messages import OutcomeState
from agenthost.messages.events import AssistantDelta, ChatSnapshot, Lagged, TurnCompleted
from agenthost.providers.scripted import Say, ScriptedProvider


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
