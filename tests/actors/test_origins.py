"""Where a turn's message came from (queue_policy rule 5), and restored turns
that equal the live ones: the same origins, part ids and tool-call parts after
a restart, an idle release, a fork and an export and import."""

from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from agenthost.actors import Chat, Host, RestartPolicy, use_runtime
from agenthost.messages import OutcomeState
from agenthost.messages.events import ChatSnapshot
from agenthost.messages.reducers import reduce_chat
from agenthost.messages.state import (
    ChatState,
    MarkdownPart,
    OriginKind,
    PendingKind,
    ToolCallPart,
    Turn,
)
from agenthost.providers.scripted import Crash, Gate, Say, ScriptedProvider, ToolCall
from agenthost.store import SqliteStore
from agenthost.testing import DeterministicRunner, FakeClock

IDLE_S = 30.0


def scripted() -> ScriptedProvider:
    return (
        ScriptedProvider(shape="copilot")
        .on("first", Say("a"), Gate("g1"), Say("b"))
        .on("tools", Say("x"), ToolCall("shell", needs_permission=False), Say("y"))
        .on("crash", Say("c"), Gate("g2", reads_steering=False), Crash())
    )


@pytest.fixture
def runner() -> Iterator[DeterministicRunner]:
    with use_runtime(DeterministicRunner()) as running:
        yield running


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def start(path: Path, provider: ScriptedProvider, clock: FakeClock) -> Host:
    return Host.start(
        store=SqliteStore(path),
        providers={"scripted": provider},
        clock=clock,
        idle_release_s=IDLE_S,
        restart_policy=RestartPolicy(backoff_min=0.0, backoff_max=0.0),
    )


class Watch:
    """A subscriber's view of the chat: its snapshot reduced with its events."""

    def __init__(self, chat: Chat) -> None:
        self.sub = chat.subscribe()
        self.state: ChatState | None = None

    def until_idle(self, turns: int) -> None:
        while not (
            self.state is not None
            and len(self.state.turns) >= turns
            and self.state.active_turn is None
        ):
            event = self.sub.next(10)
            if isinstance(event, ChatSnapshot):
                self.state = event.state
            else:
                assert self.state is not None
                self.state = reduce_chat(self.state, event)


def origins(turns: tuple[Turn, ...]) -> list[tuple[str, OriginKind]]:
    return [(t.user_text, t.message.origin.kind) for t in turns]


def every_origin(chat: Chat, provider: ScriptedProvider, runner: DeterministicRunner) -> ChatState:
    """A chat whose turns came every way there is, one with a tool call, and a
    queued message that was steering a provider that crashed."""

    def until(condition: Callable[[], bool]) -> None:
        runner.run(until=condition)

    watch = Watch(chat)
    first = chat.send("first")
    until(lambda: provider.parked_at("g1"))
    later = chat.send("later")  # queued
    chat.steer("nudge")  # copilot: read at the gate, a turn of its own
    until(lambda: provider.steered == 1)
    provider.open("g1")
    assert first.result(timeout=10).state is OutcomeState.COMPLETE
    assert later.result(timeout=10).state is OutcomeState.COMPLETE
    watch.until_idle(turns=3)
    chat.steer("idle steer")  # while idle: simply a send
    watch.until_idle(turns=4)
    set_queued = chat.send("set queued", pending_id="p1")  # set as queued while idle
    assert set_queued.result(timeout=10).state is OutcomeState.COMPLETE
    assert chat.send("tools").result(timeout=10).state is OutcomeState.COMPLETE
    crash = chat.send("crash")
    until(lambda: provider.parked_at("g2"))
    chat.steer("held")
    until(lambda: provider.steered == 2)
    provider.open("g2")
    assert crash.result(timeout=10).state is OutcomeState.ERROR
    runner.run()
    watch.sub.close()
    state = chat.state()
    assert origins(state.turns) == [
        ("first", OriginKind.USER),
        ("nudge", OriginKind.STEERING),
        ("later", OriginKind.QUEUED),
        ("idle steer", OriginKind.STEERING),
        ("set queued", OriginKind.QUEUED),
        ("tools", OriginKind.USER),
        ("crash", OriginKind.USER),
    ]
    [held] = state.queued_messages  # requeued; it waits for a success
    assert (held.text, held.kind, held.message.origin.kind) == (
        "held",
        PendingKind.QUEUED,
        OriginKind.STEERING,
    )
    return state


def test_a_turn_says_which_way_its_message_came(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    provider = scripted()
    host = start(db_path, provider, clock)
    chat = host.create_session().chat()
    state = every_origin(chat, provider, runner)
    [tools] = [t for t in state.turns if t.user_text == "tools"]
    assert [type(p) for p in tools.response_parts] == [MarkdownPart, ToolCallPart]
    assert tools.response_parts[0].id == f"{tools.id}-md1"  # type: ignore[union-attr]
    watch = Watch(chat)
    chat.send("direct").result(timeout=10)  # a success: the requeued steering runs
    watch.until_idle(turns=9)  # "held" ran too (its turn comes from the provider's loop)
    watch.sub.close()
    assert origins(chat.state().turns)[-2:] == [
        ("direct", OriginKind.USER),
        ("held", OriginKind.STEERING),
    ]
    host.stop()


def test_a_restart_restores_turns_and_queue_as_they_were(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    provider = scripted()
    host = start(db_path, provider, clock)
    session = host.create_session()
    live = every_origin(session.chat(), provider, runner)
    host.stop()
    host = start(db_path, provider, clock)
    restored = host.open_session(session.id).chat().state()
    assert restored.turns == live.turns
    assert restored.queued_messages == live.queued_messages
    host.stop()


def test_an_idle_release_restores_turns_and_queue_as_they_were(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    provider = scripted()
    host = start(db_path, provider, clock)
    chat = host.create_session().chat()
    live = every_origin(chat, provider, runner)
    runner.run()  # the session hears its chat is unwatched
    clock.advance(IDLE_S)
    runner.run()
    assert host.counters()["released"] == 1
    restored = chat.state()  # the handle restores it
    assert restored.turns == live.turns
    assert restored.queued_messages == live.queued_messages
    host.stop()


def test_a_fork_keeps_its_turns_origins_and_parts(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    provider = scripted()
    host = start(db_path, provider, clock)
    session = host.create_session()
    live = every_origin(session.chat(), provider, runner)
    fork = session.fork(live.turns[-1].id)
    forked = fork.chat().state()
    host.stop()
    host = start(db_path, provider, clock)
    reopened = host.open_session(fork.id).chat().state()
    for copy in (forked, reopened):
        assert [attrs.evolve(t, id="") for t in copy.turns] == [
            attrs.evolve(t, id="") for t in live.turns
        ]
    host.stop()


def test_an_export_imported_elsewhere_keeps_turns_origins_parts_and_queue(
    tmp_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    provider = scripted()
    host = start(tmp_path / "a.db", provider, clock)
    session = host.create_session()
    live = every_origin(session.chat(), provider, runner)
    data = host.export_session(session.id)
    host.stop()
    host = start(tmp_path / "b.db", provider, clock)
    imported = host.import_session(data).chat().state()
    assert imported.turns == live.turns
    assert imported.queued_messages == live.queued_messages
    host.stop()
    host = start(tmp_path / "b.db", provider, clock)
    reopened = host.open_session(session.id).chat().state()
    assert reopened.turns == live.turns
    assert reopened.queued_messages == live.queued_messages
    host.stop()
