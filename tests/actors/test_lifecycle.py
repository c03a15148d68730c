"""Idle release and draft GC (DESIGN.md rule 4), on the fake clock and the
deterministic runner: only a session that is still an unused draft is ever
collected, and every condition is re-checked when the timer fires."""

import asyncio
import concurrent.futures
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenthost.actors import Host, use_runtime
from agenthost.actors.protocol import ChatStatusChanged, IdleTimerFired, SessionActivity
from agenthost.actors.surface import Chat, Session
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.messages.commands import SendMessage
from agenthost.messages.state import ChatStatus
from agenthost.providers import ScriptedProvider
from agenthost.providers.scripted import Gate, Say
from agenthost.store import SqliteStore
from agenthost.testing import DeterministicRunner, FakeClock
from tests.fakes.events import drain_events

GRACE = 30.0


@pytest.fixture
def runner() -> Iterator[DeterministicRunner]:
    with use_runtime(DeterministicRunner()) as running:
        yield running


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def start(db_path: Path, clock: FakeClock) -> Host:
    return Host.start(
        store=SqliteStore(db_path),
        providers={"scripted": ScriptedProvider()},
        clock=clock,
        idle_release_s=GRACE,
        draft_gc_s=GRACE,
    )


def stored(host: Host) -> set[str]:
    return {s.id for s in host.list_sessions()}


def counters(host: Host) -> dict[str, int]:
    return {k: v for k, v in host.counters().items() if k in ("released", "draft_gc_disposed")}


def released_after_a_turn(
    host: Host, runner: DeterministicRunner, clock: FakeClock
) -> tuple[Session, Chat]:
    """A session that ran a turn, then sat idle and unwatched until released."""
    session = host.create_session()
    chat = session.chat()
    assert chat.send("hello").result(timeout=10).state is OutcomeState.COMPLETE
    runner.run()
    clock.advance(GRACE)
    runner.run()
    assert counters(host) == {"released": 1, "draft_gc_disposed": 0}
    return session, chat


def test_an_unused_draft_is_collected_after_its_last_subscriber_leaves(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    host = start(db_path, clock)
    session = host.create_session()
    session.chat().subscribe().close()
    runner.run()
    clock.advance(GRACE - 1)
    runner.run()
    assert session.id in stored(host)
    clock.advance(1)
    runner.run()
    assert stored(host) == set()
    assert counters(host)["draft_gc_disposed"] == 1
    with pytest.raises(AgentHostError) as caught:
        host.open_session(session.id)
    assert caught.value.code is ErrorCode.NOT_FOUND
    host.stop()


def test_a_session_that_ran_a_turn_is_released_never_collected_and_comes_back(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    host = start(db_path, clock)
    session, chat = released_after_a_turn(host, runner, clock)
    assert session.id in stored(host)
    # The handles still work: the session is restored from the store.
    assert chat.send("again").result(timeout=10).state is OutcomeState.COMPLETE
    assert [t.user_text for t in chat.state().turns] == ["hello", "again"]
    host.stop()


def test_the_asyncio_calls_restore_a_released_session_too(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    host = start(db_path, clock)
    session, chat = released_after_a_turn(host, runner, clock)

    async def client() -> list[str]:
        achat, asession = chat.aio, session.aio
        with pytest.raises(AgentHostError) as caught:
            await achat.send(b"not text")  # type: ignore[arg-type]
        assert caught.value.code is ErrorCode.INVALID_ARGUMENT
        outcome = await (await achat.send("again"))
        other = await asession.chat()
        summary = await asession.summary()
        assert other.id == chat.id and summary.id == session.id
        return [outcome.state.value, outcome.text]

    # The client awaits on a loop of its own; this thread delivers the messages.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        done = pool.submit(asyncio.run, client())
        runner.run(until=done.done, timeout=10)
        assert done.result() == ["complete", "echo: again"]
    assert [t.user_text for t in chat.state().turns] == ["hello", "again"]
    host.stop()


def test_a_subscribe_its_caller_gave_up_on_never_keeps_the_session_watched(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    host = start(db_path, clock)
    chat = host.create_session().chat()
    assert chat.send("hello").result(timeout=10).state is OutcomeState.COMPLETE
    runner.run()

    async def give_up() -> None:
        # The call runs until it waits on the Attach (sent: nobody delivers it
        # here); the deadline, already passed, then cancels it.
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0):
                await chat.aio.subscribe()

    asyncio.run(give_up())
    runner.run()  # the chat gets the Attach after its caller left
    clock.advance(GRACE)
    runner.run()
    assert counters(host)["released"] == 1
    host.stop()


def test_a_restored_session_is_never_collected(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    host = start(db_path, clock)
    session_id = host.create_session().id
    host.stop()
    host = start(db_path, clock)
    host.open_session(session_id)
    runner.run()
    clock.advance(GRACE)
    runner.run()
    assert counters(host) == {"released": 1, "draft_gc_disposed": 0}
    assert session_id in stored(host)
    host.stop()


def test_a_subscriber_arriving_cancels_the_timer(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    host = start(db_path, clock)
    session = host.create_session()
    runner.run()
    clock.advance(GRACE - 10)
    sub = session.chat().subscribe()
    runner.run()
    clock.advance(GRACE)
    runner.run()
    assert session.id in stored(host) and counters(host)["draft_gc_disposed"] == 0
    sub.close()
    runner.run()
    clock.advance(GRACE)
    runner.run()
    assert stored(host) == set()  # still an unused draft: collected once unwatched
    host.stop()


def test_turns_tell_the_host_nothing_and_arm_no_timer(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    """The session's idle timer is armed once and re-armed only when it fires early:
    turns cost no message to the host and no timer, and the idle period still
    runs from the end of the last turn."""
    host = start(db_path, clock)
    chat = host.create_session().chat()
    runner.run()
    timers = len(clock._timers._heap)
    for text in ("one", "two", "three"):
        chat.send(text).result(timeout=10)
        runner.run()
        clock.advance(GRACE / 2)  # each turn ends before the period is up
        runner.run()
    assert not any(isinstance(d.message, SessionActivity) for d in runner.history)
    assert len(clock._timers._heap) <= timers + 1
    assert counters(host)["released"] == 0
    clock.advance(GRACE / 2)  # a whole period after the last turn's end
    runner.run()
    assert counters(host)["released"] == 1
    host.stop()


def test_with_a_bound_on_residents_the_host_hears_idle_and_busy(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    host = Host.start(
        store=SqliteStore(db_path),
        providers={"scripted": ScriptedProvider()},
        clock=clock,
        max_resident=10,
    )
    chat = host.create_session().chat()
    chat.send("one").result(timeout=10)
    runner.run()
    reports = [d.message for d in runner.history if isinstance(d.message, SessionActivity)]
    assert [(r.active, r.unused_draft) for r in reports][-2:] == [(True, False), (False, False)]
    host.stop()


def test_gc_rechecks_every_condition_when_its_timer_fires(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    host = start(db_path, clock)
    session = host.create_session()
    chat = session.chat()
    runner.run()  # unwatched and unused: the GC timer is armed
    # A send reaches the chat's mailbox; the timer fires and the session asks to go
    # before the chat has even handled the send: only the chat's re-check saves it.
    chat._ref.tell(SendMessage(text="just in time"))
    clock.advance(GRACE)
    fired = next(i for i, d in enumerate(runner.pending()) if isinstance(d.message, IdleTimerFired))
    runner.deliver(fired)
    runner.run()
    drain_events(chat.subscribe(), turns=1)  # the turn, running on the provider's thread
    state = chat.state()
    assert [(t.user_text, t.state.value) for t in state.turns] == [("just in time", "complete")]
    assert session.id in stored(host)
    assert counters(host)["draft_gc_disposed"] == 0
    host.stop()


@pytest.mark.parametrize("how", ["fork", "truncate", "import"])
def test_no_gc_after_fork_truncate_or_import(
    how: str, db_path: Path, tmp_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    host = start(db_path, clock)
    source = host.create_session()
    chat = source.chat()
    turn_id = chat.send("used").result(timeout=10).turn_id
    assert turn_id is not None
    if how == "fork":
        subject = source.fork(turn_id)
    elif how == "truncate":
        chat.truncate(None)  # empty again, but never a draft again
        subject = source
    else:
        exported = host.export_session(source.id)
        other = start(tmp_path / "other.db", clock)
        subject = other.import_session(exported)
        host.stop()
        host = other
    runner.run()
    clock.advance(GRACE)
    runner.run()
    assert subject.id in stored(host)
    assert counters(host)["draft_gc_disposed"] == 0
    host.stop()


def test_max_resident_releases_the_least_recently_used_idle_sessions(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    host = Host.start(
        store=SqliteStore(db_path),
        providers={"scripted": ScriptedProvider()},
        clock=clock,
        max_resident=2,
    )
    sessions = [host.create_session() for _ in range(3)]
    for session in sessions:
        session.chat().send("used").result(timeout=10)
        runner.run()
        assert host.counters()["resident"] <= 2
    assert host.counters()["released"] >= 1
    assert {s.id for s in host.list_sessions()} == {s.id for s in sessions}  # rows stay
    assert sessions[0].chat().send("again").result(timeout=10).state is OutcomeState.COMPLETE
    host.stop()


def test_max_resident_bytes_releases_the_least_recently_used_idle_sessions_past_it(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    """A bound in bytes on the idle sessions' history (a turn of a 10,000-character
    message and its echo weighs about 20,000): past it the least recently used
    leave memory, however few sessions there are."""
    host = Host.start(
        store=SqliteStore(db_path),
        providers={"scripted": ScriptedProvider()},
        clock=clock,
        max_resident_bytes=50_000,
    )
    left: list[str] = []
    host.on_session_left(lambda session_id, why: left.append(session_id))
    sessions = [host.create_session() for _ in range(4)]
    for n, session in enumerate(sessions[:2]):
        session.chat().send(f"{n}" + "x" * 10_000).result(timeout=10)
        runner.run()
    assert left == []  # about 40,000: within the bound
    sessions[0].chat().send("a short one").result(timeout=10)  # used again: now the newest
    runner.run()
    sessions[2].chat().send("2" + "x" * 10_000).result(timeout=10)
    runner.run()
    assert left == [sessions[1].id]  # the least recently used of those past the bound
    assert {s.id for s in host.list_sessions()} == {s.id for s in sessions}  # rows stay
    assert sessions[1].chat().send("again").result(timeout=10).state is OutcomeState.COMPLETE
    host.stop()


def test_counters_show_restarts_and_resume_fallbacks(
    db_path: Path, runner: DeterministicRunner
) -> None:
    from agenthost.providers.scripted import Crash

    provider = ScriptedProvider().on("boom", Crash())
    host = Host.start(
        store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
    )
    session = host.create_session()
    session.chat().send("boom").result(timeout=10)
    host.stop()
    provider.fail_resume(code=-32603, message="Session not found: x")
    host = Host.start(
        store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
    )
    host.open_session(session.id)
    counts = host.counters()
    assert counts["resume_fallbacks"] == 1
    assert counts["provider_restarts"] == 0
    host.stop()


@pytest.mark.parametrize("used", [False, True], ids=["draft", "used"])
def test_a_send_accepted_while_the_session_decides_to_go_keeps_it(
    used: bool, db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    """The timer fired and the session is about to go, but the chat accepted a
    send first: the chat vetoes, nothing is deleted, the turn runs."""
    host = start(db_path, clock)
    session = host.create_session()
    chat = session.chat()
    if used:
        chat.send("first").result(timeout=10)
    runner.run()
    clock.advance(GRACE)
    assert any(isinstance(d.message, IdleTimerFired) for d in runner.pending())
    accepted = chat._ref.ask(SendMessage(text="my important message"), block=False)
    runner.deliver(
        next(i for i in runner.deliverable() if runner.pending()[i].actor == "ChatActor")
    )
    ticket = accepted.get(timeout=10)
    runner.run()
    assert ticket.outcome.get(timeout=10).state is OutcomeState.COMPLETE
    assert session.id in stored(host)
    assert counters(host) == {"released": 0, "draft_gc_disposed": 0}
    host.stop()


def test_a_held_queued_message_with_a_waiting_handle_keeps_its_session_in_memory(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    from agenthost.providers.scripted import Gate, Reject

    provider = ScriptedProvider().on("boom", Gate("g"), Reject("no"))
    host = Host.start(store=SqliteStore(db_path), providers={"scripted": provider}, clock=clock)
    chat = host.create_session().chat()
    failing = chat.send("boom")
    queued = chat.send("queued")
    runner.run(until=lambda: provider.parked_at("g"))
    provider.open("g")
    assert failing.result(timeout=10).state is OutcomeState.ERROR  # the queue is held now
    runner.run()
    clock.advance(GRACE)
    runner.run()
    assert counters(host)["released"] == 0
    assert not queued.done()  # its handle still waits, and can still be answered
    assert chat.send("ok").result(timeout=10).state is OutcomeState.COMPLETE
    assert queued.result(timeout=10).state is OutcomeState.COMPLETE
    host.stop()


def test_a_turn_longer_than_the_idle_period_keeps_its_session_and_it_goes_a_period_after(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    """Chats do not tell the session of each turn: the release asks them. A chat
    busy when asked refuses; asked again, it says since when it is idle, and the
    session goes a whole period after the turn's end, not earlier and not late."""
    provider = ScriptedProvider().on("long", Gate("g"), Say("done"))
    host = Host.start(
        store=SqliteStore(db_path),
        providers={"scripted": provider},
        clock=clock,
        idle_release_s=GRACE,
        draft_gc_s=GRACE,
    )
    chat = host.create_session().chat()
    handle = chat.send("long")
    runner.run(until=lambda: provider.parked_at("g"))
    clock.advance(GRACE * 2)  # the timer fires during the turn: the chat says busy
    runner.run()
    assert counters(host)["released"] == 0
    provider.open("g")
    runner.run(until=handle.done)
    runner.run()
    clock.advance(GRACE - 1)
    runner.run()
    assert counters(host)["released"] == 0
    clock.advance(1)
    runner.run()
    assert counters(host)["released"] == 1
    host.stop()


def test_a_summary_shows_a_running_turn_though_chats_report_only_once_asked(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    provider = ScriptedProvider().on("long", Gate("g"), Say("done"))
    host = Host.start(store=SqliteStore(db_path), providers={"scripted": provider}, clock=clock)
    session = host.create_session()
    chat = session.chat()
    chat.send("warm up").result(timeout=10)
    runner.run()
    handle = chat.send("long")
    runner.run(until=lambda: provider.parked_at("g"))
    before = len(runner.history)
    runner.run()
    assert not any(isinstance(d.message, ChatStatusChanged) for d in runner.history[before:])
    summary = session.summary()  # asks the chats, then answers
    assert summary.status is ChatStatus.IN_PROGRESS and summary.turn_count == 1
    provider.open("g")
    runner.run(until=handle.done)
    runner.run()
    summary = session.summary()  # the chats now report every change
    assert summary.status is ChatStatus.IDLE and summary.turn_count == 2


def test_a_session_is_not_released_before_its_creation_is_answered(
    db_path: Path, clock: FakeClock
) -> None:
    """A bound on resident sessions releases idle ones at once; a session still
    being created was released before its row was committed, and its creator
    was told it is gone."""
    host = Host.start(
        store=SqliteStore(db_path),
        providers={"scripted": ScriptedProvider()},
        clock=clock,
        max_resident=0,
    )
    try:
        for _ in range(5):
            session = host.create_session()
            session.set_config({"k": "v"})
            assert session.chat().send("hi").result(timeout=10).state is OutcomeState.COMPLETE
    finally:
        host.stop()


def test_whoever_watches_hears_every_session_that_leaves_memory_and_why(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    from agenthost.actors import Departure

    host = start(db_path, clock)
    heard: list[tuple[str, Departure]] = []
    unwatch = host.on_session_left(lambda session_id, why: heard.append((session_id, why)))
    released, _ = released_after_a_turn(host, runner, clock)
    draft = host.create_session()
    draft.chat().subscribe().close()
    runner.run()
    clock.advance(GRACE)
    runner.run()
    disposed = host.create_session()
    disposed.dispose()
    runner.run()
    assert heard == [
        (released.id, Departure.RELEASED),
        (draft.id, Departure.COLLECTED),
        (disposed.id, Departure.DISPOSED),
    ]
    unwatch()
    host.create_session().dispose()
    runner.run()
    assert len(heard) == 3
    host.stop()


def test_an_idle_period_shorter_than_the_draft_period_is_honoured_once_the_draft_is_used(
    db_path: Path, runner: DeterministicRunner, clock: FakeClock
) -> None:
    """The lazy timer was armed for the draft's period while the session was an
    unused draft; once used, it leaves after `idle_release_s`, not `draft_gc_s`."""
    host = Host.start(
        store=SqliteStore(db_path),
        providers={"scripted": ScriptedProvider()},
        clock=clock,
        idle_release_s=10.0,
        draft_gc_s=1_000.0,
    )
    session = host.create_session()
    chat = session.chat()
    runner.run()  # an unused draft, idle: its timer is armed for draft_gc_s
    assert chat.send("used").result(timeout=10).state is OutcomeState.COMPLETE
    runner.run()
    clock.advance(9.0)
    runner.run()
    assert counters(host)["released"] == 0
    clock.advance(1.0)  # idle_release_s after the turn's end
    runner.run()
    assert counters(host) == {"released": 1, "draft_gc_disposed": 0}
    assert session.id in stored(host)
    host.stop()
