"""The sharded host offers the in-process surface over shards (here: in this process)."""

from collections.abc import Callable

from agenthost.messages import OutcomeState
from agenthost.messages.events import ChatSnapshot, InputRequested, TurnCompleted, TurnResumed
from agenthost.messages.state import ChatStatus
from agenthost.providers.scripted import AskUser, Reject, Say, ScriptedProvider
from agenthost.shards import ShardedHost
from agenthost.shards.router import rendezvous
from tests.shards.conftest import LocalShards

Start = Callable[..., ShardedHost]


def test_a_turn_through_a_sharded_host_completes_and_is_stored(sharded: Start) -> None:
    host = sharded("a", "b")
    chat = host.create_session().chat()
    events = chat.subscribe()
    outcome = chat.send("hello").result(timeout=10)
    assert outcome.text == "echo: hello"
    assert isinstance(events.next(timeout=10), ChatSnapshot)
    seen = []
    while not isinstance(event := events.next(timeout=10), TurnCompleted):
        seen.append(type(event).__name__)
    assert "TurnStarted" in seen
    assert [t.assistant_text for t in chat.state().turns] == ["echo: hello"]


def test_each_session_is_resident_on_the_shard_its_id_hashes_to(
    sharded: Start, local_shards: LocalShards
) -> None:
    host = sharded("a", "b")
    sessions = [host.create_session() for _ in range(6)]
    for session in sessions:
        session.chat().send("hi").result(timeout=10)
    counts = {
        name: shard.host.counters()["resident"] for name, shard in local_shards.shards.items()
    }
    expected = {name: 0 for name in ("a", "b")}
    for session in sessions:
        expected[rendezvous(session.id, ["a", "b"])] += 1
    assert counts == expected


def test_what_a_turn_asks_is_answered_through_a_sharded_host(
    sharded: Start, local_shards: LocalShards
) -> None:
    """The chat's asking calls (synced input answers, resume, flags) cross to the
    shard as its other commands do."""
    provider = ScriptedProvider()
    provider.on("ask", AskUser("Which?", choices=("red", "blue"), freeform=False), Say("ok"))
    provider.on("busy", Reject("overloaded", resumable=True))
    local_shards.start("a", provider)
    host = sharded("a")
    chat = host.create_session().chat()
    events = chat.subscribe()
    turn = chat.send("ask")
    while not isinstance(event := events.next(timeout=10), InputRequested):
        pass
    chat.set_input_answer(event.request.id, "answer", "blue")
    chat.answer(event.request.id, answers={})
    assert turn.result(timeout=10).state is OutcomeState.COMPLETE
    assert provider.model_inputs[-1] == "blue"
    failed = chat.send("busy").result(timeout=10)
    provider.on("busy", Say("back"))
    chat.resume(failed.turn_id or "")
    while not isinstance(events.next(timeout=10), TurnResumed):
        pass
    while not isinstance(events.next(timeout=10), TurnCompleted):
        pass
    assert chat.state().turns[-1].assistant_text == "back"
    assert int(chat.set_flags(archived=True)) & int(ChatStatus.IS_ARCHIVED)
