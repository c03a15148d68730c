"""Smoke tests of benchmarks/peers.py at a tiny size: counts, never timings."""

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from benchmarks import peers, peers_store

SYSTEMS = [
    pytest.param(
        system,
        marks=pytest.mark.skipif(
            system == "autogen" and not peers.autogen_installed(),
            reason="autogen-core is a bench-only dependency (pip install .[bench])",
        ),
    )
    for system in peers.SYSTEMS
]


@pytest.mark.parametrize("system", SYSTEMS)
def test_every_chat_streams_every_turn_to_its_subscriber(system: str) -> None:
    tally = peers.run_workload(system, 3)
    assert tally.turns == 3 * peers.TURNS
    assert tally.deltas == 3 * peers.TURNS * peers.DELTAS


def test_every_prompt_is_echoed_in_exactly_ten_deltas() -> None:
    for chat, turn in [(0, 0), (9_999, 2), (99_999_999, 99_999)]:
        chunks = peers.reply_chunks(peers.prompt(chat, turn))
        assert len(chunks) == peers.DELTAS
        assert "".join(chunks) == f"echo: {peers.prompt(chat, turn)}"


@pytest.mark.parametrize("way", list(peers_store.STORE_WAYS.values()))
def test_every_store_way_writes_every_row(tmp_path: Path, way: Any) -> None:
    ops = peers_store._turn_ops(50)
    way(tmp_path, ops)
    with sqlite3.connect(tmp_path / "store.db") as db:
        stored = db.execute("SELECT id, seq FROM turns ORDER BY seq").fetchall()
    assert stored == [(op.turn_id, op.seq) for op in ops]


def test_a_child_process_reports_its_measurement() -> None:
    outcome = peers.measure_in_child("asyncio", 3, rounds=1, budget_s=60)
    assert outcome.problem == ""
    assert outcome.result is not None
    assert outcome.result["chats"] == 3 and outcome.result["rounds"] == 1


def test_a_size_estimated_over_the_budget_is_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[tuple[str, int]] = []

    def fake_child(system: str, chats: int, rounds: int, budget_s: float) -> peers.Outcome:
        ran.append((system, chats))
        if chats > 100:
            return peers.Outcome(system, chats, problem="too slow (over 60 s)")
        slow = system == "pykka"
        return peers.Outcome(system, chats, result={"round_s": 10.0 if slow else 1})

    monkeypatch.setattr(peers, "measure_in_child", fake_child)
    outcomes = peers.compare([100, 1000, 5000], ["asyncio", "pykka"], rounds=1, budget_s=60)
    assert ran == [("asyncio", 100), ("pykka", 100), ("asyncio", 1000)]
    problems = {(o.system, o.chats): o.problem for o in outcomes}
    assert problems[("pykka", 1000)] == "too slow (est. 100 s)"
    assert problems[("asyncio", 5000)] == "not run: too slow (over 60 s) at 1,000"
    assert problems[("pykka", 5000)] == "not run: too slow (est. 100 s) at 1,000"


def test_a_size_whose_threads_would_not_fit_is_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers, "thread_headroom", lambda: 20_000)
    result = peers.measure("pykka", 10_000, rounds=1, budget_s=60)
    assert result["problem"].startswith("cannot start (~3")  # three threads a chat


def test_a_peer_may_take_at_most_half_of_the_free_pids() -> None:
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert 0 < peers.thread_headroom() < pid_max // 2
