"""Failure paths and races an independent review found; each test is the
review's reproduction, made an assertion."""

import asyncio
import sqlite3
from pathlib import Path

import pytest

from agenthost.actors import Host, RestartPolicy, use_runtime
from agenthost.actors.protocol import (
    CancelActiveTurn,
    CloseConnection,
    ConnectionReady,
    EndTurn,
    OpenConnection,
)
from agenthost.actors.runtime import Actor, handles
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.messages.commands import CancelTurn, GetDiagnostics, SteerMessage
from agenthost.messages.provider import SteerAnswered, UserMessageEcho
from agenthost.providers.scripted import Crash, Gate, Say, ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.store.records import SaveTurnEnded
from agenthost.testing import DeterministicRunner, FakeClock
from tests.fakes.runner import delivered, from_provider

IMMEDIATE = RestartPolicy(intensity=10, backoff_min=0.0, backoff_max=0.0)


def start(db_path: Path, provider: ScriptedProvider, store: SqliteStore | None = None) -> Host:
    return Host.start(
        store=store or SqliteStore(db_path),
        providers={"scripted": provider},
        clock=FakeClock(),
        restart_policy=IMMEDIATE,
    )


def test_a_resume_that_fails_after_a_crash_is_retried_and_the_chat_goes_on(db_path: Path) -> None:
    provider = ScriptedProvider().on("boom", Say("x"), Crash())
    with start(db_path, provider) as host:
        chat = host.create_session().chat()
        provider.fail_resume(code=-32000, message="transport closed")
        assert chat.send("boom").result(timeout=10).state is OutcomeState.ERROR
        assert chat.send("hello").result(timeout=10).state is OutcomeState.COMPLETE


def test_a_done_callback_on_a_closed_event_loop_does_not_kill_the_chat(db_path: Path) -> None:
    provider = ScriptedProvider().on("slow", Say("a"), Gate("g"), Say("b"))
    with start(db_path, provider) as host:
        chat = host.create_session().chat()

        async def impatient() -> None:
            handle = await chat.aio.send("slow")
            with pytest.raises((TimeoutError, asyncio.TimeoutError)):
                await handle.outcome(timeout=0.01)

        asyncio.run(impatient())  # the loop is closed; its callback stays on the ticket
        queued = chat.send("next")
        provider.open("g")
        assert queued.result(timeout=10).state is OutcomeState.COMPLETE


class DiskFull(SqliteStore):
    def apply(self, op: object) -> None:
        if isinstance(op, SaveTurnEnded) and op.assistant_text == "echo: lost":
            raise sqlite3.OperationalError("database or disk is full")
        super().apply(op)  # type: ignore[arg-type]


def test_a_turn_end_the_store_could_not_write_is_never_acknowledged(db_path: Path) -> None:
    with start(db_path, ScriptedProvider(), store=DiskFull(db_path)) as host:
        chat = host.create_session().chat()
        with pytest.raises(AgentHostError) as caught:
            chat.send("lost").result(timeout=10)
        assert caught.value.code is ErrorCode.STORE_ERROR
        assert chat.send("kept").result(timeout=10).state is OutcomeState.COMPLETE


class Owner(Actor):
    def __init__(self) -> None:
        super().__init__()
        self.ready: list[ConnectionReady] = []

    @handles(ConnectionReady)
    def _ready(self, message: ConnectionReady) -> None:
        self.ready.append(message)


def test_a_stale_close_from_an_old_owner_leaves_the_new_owners_connection_open(
    db_path: Path,
) -> None:
    with use_runtime(DeterministicRunner()) as runner:
        host = start(db_path, ScriptedProvider())
        supervisor = host.services.supervisor
        old, new = Owner.start(), Owner.start()
        for owner in (old, new):
            supervisor.tell(
                OpenConnection(
                    session_id="s",
                    chat_id="c",
                    provider="scripted",
                    owner=owner,
                    steering=owner,
                    resume=False,
                )
            )
        runner.run(until=lambda: bool(new.proxy().ready.get()))
        supervisor.tell(CloseConnection(session_id="s", chat_id="c", owner=old))
        runner.run()
        [ready] = new.proxy().ready.get()
        assert ready.ref.is_alive()
        host.stop()


def test_a_cancel_that_names_the_turn_a_steering_turn_took_over_cancels_that_one(
    db_path: Path,
) -> None:
    provider = ScriptedProvider().on("first", Say("a"), Gate("g"), Say("b"), Gate("h"), Say("c"))
    with use_runtime(DeterministicRunner()) as runner:
        host = start(db_path, provider)
        chat = host.create_session().chat()
        first = chat.send("first")
        runner.run(until=lambda: provider.parked_at("g"))
        chat.steer("steer!")
        runner.run(until=delivered(runner, from_provider(SteerAnswered)))
        provider.open("g")

        is_echo = from_provider(UserMessageEcho, lambda e: e.text == "steer!")

        runner.run(
            until=lambda: (
                any(is_echo(d.message) for d in runner.pending()) and provider.parked_at("h")
            ),
            choose=lambda pending, ok: next(
                (i for i in ok if not is_echo(pending[i].message)), None
            ),
        )
        chat._ref.tell(CancelTurn())  # the chat still sees the first turn running
        runner.run(
            until=delivered(runner, lambda m: isinstance(m, CancelActiveTurn)),
            choose=lambda pending, ok: next(
                (i for i in ok if pending[i].actor == "ChatActor"), ok[0] if ok else None
            ),
        )
        runner.run()
        assert first.result(timeout=10).state is OutcomeState.COMPLETE
        state = chat.state()
        assert state.active_turn is None
        assert [(t.user_text, t.state.value) for t in state.turns] == [
            ("first", "complete"),
            ("steer!", "cancelled"),
        ]
        host.stop()


def test_diagnostics_asked_of_a_dead_connection_are_still_answered(db_path: Path) -> None:
    provider = ScriptedProvider().on("x", Say("a"), Gate("g"), Crash())
    with use_runtime(DeterministicRunner()) as runner:
        host = start(db_path, provider)
        chat = host.create_session().chat()
        turn = chat.send("x")
        runner.run(until=lambda: provider.parked_at("g"))
        provider.open("g")

        def not_supervisor(pending, ok):  # type: ignore[no-untyped-def]
            return next((i for i in ok if pending[i].actor != "SupervisorActor"), None)

        runner.run(
            until=lambda: any(d.actor == "SupervisorActor" for d in runner.pending()),
            choose=not_supervisor,
        )
        runner.run(choose=not_supervisor)
        answer = chat._ref.ask(GetDiagnostics(), block=False)
        runner.run(choose=not_supervisor)
        runner.run()
        assert turn.result(timeout=10).state is OutcomeState.ERROR
        inner = answer.get(timeout=10)
        while hasattr(inner, "get"):
            inner = inner.get(timeout=10)
        host.stop()


def test_steering_sent_after_a_cancel_is_not_dropped_as_cancelled(db_path: Path) -> None:
    provider = ScriptedProvider().on("first", Say("a"), Gate("g"), Say("b"))
    with use_runtime(DeterministicRunner()) as runner:
        host = start(db_path, provider)
        chat = host.create_session().chat()
        first = chat.send("first")
        runner.run(until=lambda: provider.parked_at("g"))
        chat.steer("s1")
        runner.run(until=delivered(runner, from_provider(SteerAnswered)))
        chat._ref.tell(CancelTurn())

        def not_drain(pending, ok):  # type: ignore[no-untyped-def]
            return next((i for i in ok if pending[i].actor != "QueueDrainActor"), None)

        runner.run(until=delivered(runner, lambda m: isinstance(m, EndTurn)), choose=not_drain)
        runner.run(choose=not_drain)
        later = chat._ref.ask(SteerMessage(text="s2 after the cancel"), block=False)
        runner.run(until=lambda: later.done(), choose=not_drain)
        # The provider runs it as its own turn: it was not meant for the cancelled one.
        runner.run(until=lambda: "s2 after the cancel" in provider.model_inputs)
        runner.run(until=lambda: len(chat.state().turns) == 2)
        assert first.result(timeout=10).state is OutcomeState.CANCELLED
        assert [t.user_text for t in chat.state().turns] == ["first", "s2 after the cancel"]
        assert "s1" not in provider.model_inputs
        host.stop()


def test_one_failed_write_is_undone_alone_not_with_its_batch(db_path: Path) -> None:
    """A dispose and two sends land in one batch; the send on the disposed
    session fails its write; the other session's turn is still stored."""
    from agenthost.messages.commands import DisposeSession, SendMessage

    with use_runtime(DeterministicRunner()) as runner:
        host = start(db_path, ScriptedProvider())
        a, b = host.create_session(), host.create_session()
        chat_a, chat_b = a.chat(), b.chat()
        chat_a.send("a1").result(timeout=10)
        chat_b.send("b1").result(timeout=10)
        runner.run()
        disposed = host.services.host.ask(DisposeSession(session_id=a.id), block=False)
        chat_a._ref.ask(SendMessage(text="a2 racing the dispose"), block=False)
        other = chat_b._ref.ask(SendMessage(text="b2"), block=False)
        for actor in ("HostActor", "ChatActor", "ChatActor"):
            runner.deliver(
                next(i for i in runner.deliverable() if runner.pending()[i].actor == actor)
            )
        runner.run()
        disposed.get(timeout=10).get(timeout=10)
        assert other.get(timeout=10).outcome.get(timeout=10).state is OutcomeState.COMPLETE
        runner.run()
        host.stop()
    import sqlite3 as sql

    with sql.connect(db_path) as db:
        assert [r[0] for r in db.execute("SELECT id FROM sessions")] == [b.id]
        turns = db.execute("SELECT user_text FROM turns WHERE session_id = ?", (b.id,)).fetchall()
        assert [t[0] for t in turns] == ["b1", "b2"]
