"""Durability under SIGKILL: a host killed at an arbitrary instant restarts with
every turn whose completion it acknowledged, every session it created, and
nothing it did not."""

import os
import signal
import subprocess
import sys
from pathlib import Path

from agenthost.actors import Host
from agenthost.messages import TurnState
from agenthost.providers import ScriptedProvider
from agenthost.testing import FakeClock
from tests.fakes.stores import StoreFactory

CHILD = Path(__file__).with_name("kill_child.py")
ACKS_BEFORE_KILL = 150


def test_a_host_killed_with_sigkill_keeps_every_acknowledged_turn(
    store_factory: StoreFactory,
) -> None:
    child = subprocess.Popen(
        [sys.executable, str(CHILD), store_factory.spec, "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    creates = 0
    sessions: set[str] = set()
    acks: list[tuple[str, str, str, str]] = []
    try:
        assert child.stdout is not None
        for line in child.stdout:
            kind, *rest = line.split()
            if kind == "create":
                creates += 1
            elif kind == "session":
                sessions.add(rest[0])
            elif kind == "ack":
                acks.append((rest[0], rest[1], rest[2], rest[3]))
                if len(acks) >= ACKS_BEFORE_KILL:
                    break
        os.kill(child.pid, signal.SIGKILL)  # mid-flight: other turns are running
    finally:
        child.kill()
        child.wait(timeout=30)
    assert len(acks) >= ACKS_BEFORE_KILL, "the child stopped before it acknowledged enough"

    stored_sessions = {row[0] for row in store_factory.query("SELECT id FROM sessions")}
    turns = {
        row[0]: row[1:]
        for row in store_factory.query(
            "SELECT id, session_id, user_text, assistant_text, state FROM turns"
        )
    }
    assert sessions <= stored_sessions, "a created session was lost"
    assert len(stored_sessions) <= creates, "a session appeared that was never created"
    for session_id, turn_id, text, state in acks:
        assert turns[turn_id] == (session_id, text, f"echo: {text}", state)

    # The store opens again (a SQLite store's lock went with the dead host), and nothing runs.
    host = Host.start(
        store=store_factory(), providers={"scripted": ScriptedProvider()}, clock=FakeClock()
    )
    try:
        for session_id in sorted(sessions)[:3]:
            state = host.open_session(session_id).chat().state()
            assert state.active_turn is None
            assert all(t.state in (TurnState.COMPLETE, TurnState.ERROR) for t in state.turns)
    finally:
        host.stop()
