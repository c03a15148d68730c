import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agenthost.providers.scripted import Gate, ScriptedProvider
from agenthost.server.cli import app
from agenthost.server.load import ChatRecord, LoadConfig, check_invariants, percentile, run_load


def test_load_runs_chats_concurrently_and_reports_json(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "load",
            "--chats",
            "8",
            "--turns",
            "3",
            "--deltas",
            "4",
            "--json",
            "--store",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["turns_completed"] == report["turns_requested"] == 24
    assert report["turns_per_s"] > 0
    assert report["latency_ms_p50"] <= report["latency_ms_p99"]
    assert report["host_overhead_ms_p50"] <= report["host_overhead_ms_p95"]
    assert report["resident_sessions"] == 8
    assert report["bytes_per_idle_session"] is None or report["bytes_per_idle_session"] >= 0


def test_load_prints_a_table_for_people(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["load", "--chats", "2", "--turns", "2", "--store", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "turns/s" in result.stdout and "invariants" in result.stdout


def test_bad_options_are_clear_errors() -> None:
    result = CliRunner().invoke(app, ["load", "--chats", "0"])
    assert result.exit_code != 0
    result = CliRunner().invoke(app, ["load", "--shape", "gpt"])
    assert result.exit_code != 0 and "unknown shape" in result.output


def test_the_invariant_checks_catch_a_lost_turn() -> None:
    record = ChatRecord(
        index=0,
        prompts=["chat 0 turn 0", "chat 0 turn 1"],
        outcomes=["complete", "complete"],
        stored=[("chat 0 turn 0", "echo: chat 0 turn 0", "complete")],
    )
    violations = check_invariants([record], LoadConfig(chats=1, turns=2))
    assert violations == ["chat 0: 1 turns stored, 2 sent"]


def test_the_invariant_checks_catch_a_turn_left_active_and_a_double_end() -> None:
    record = ChatRecord(
        index=3,
        prompts=["chat 3 turn 0"],
        outcomes=["timeout"],
        active=True,
        wire=["turn t1 got 2 terminal actions"],
    )
    violations = check_invariants([record], LoadConfig(chats=1, turns=2))
    assert violations == [
        "1 turns did not complete (first: chat 3 turn 0: timeout)",
        "1 turns were never sent (their chat stopped at a failed turn)",
        "chat 3: a turn was left active",
        "chat 3: 0 turns stored, 1 sent",
        "chat 3: turn t1 got 2 terminal actions",
    ]


def test_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.5
    assert percentile(values, 99) > percentile(values, 95) > percentile(values, 50)
    assert percentile([], 99) == 0.0


def test_an_in_process_turn_that_never_ends_is_a_violation(tmp_path: Path) -> None:
    provider = ScriptedProvider(echo_deltas=2).on("chat 1 turn 0", Gate("never"))
    config = LoadConfig(chats=2, turns=2, store=str(tmp_path), turn_timeout_s=2.0)
    report = run_load(config, provider=provider)
    assert report.turns_completed == 2
    assert report.violations[0] == "1 turns did not complete (first: chat 1 turn 0: timeout)"
    assert "chat 1: a turn was left active" in report.violations  # as the store shows it
    assert not any(v.startswith("chat 0") for v in report.violations)


def test_every_load_prompt_is_answered_in_the_deltas_its_pacing_assumes() -> None:
    """Host overhead is latency minus (deltas - 1) * delta_ms: each reply must have
    exactly `deltas` chunks, whatever the prompt's length, or the overhead is off."""
    from agenthost.providers.scripted import Pause, Say, _echo_steps
    from agenthost.server.load import prompt_for

    config = LoadConfig(chats=12_000, turns=3, deltas=10, delta_ms=20.0)
    for chat, turn in ((0, 0), (9, 2), (11_999, 2)):
        steps = _echo_steps(prompt_for(chat, turn), config.deltas, config.delta_ms / 1000)
        assert sum(isinstance(s, Say) for s in steps) == config.deltas
        assert sum(s.seconds for s in steps if isinstance(s, Pause)) == config.scripted_s


def test_first_turns_are_spread_over_one_think_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from agenthost.server import load

    waits: list[int] = []

    async def sleep(seconds: float) -> None:  # records the think times, waits for none
        waits.append(round(seconds * 1000))

    class Target:
        async def turn(self, prompt: str) -> str:
            return "complete"

    async def drive() -> None:
        config = LoadConfig(chats=4, turns=2, think_ms=200.0)
        for index in range(4):
            await load.run_chat(Target(), ChatRecord(index=index), config, [], lambda: None)

    monkeypatch.setattr(load.asyncio, "sleep", sleep)
    asyncio.run(drive())
    # a steady arrival (0, 50, 100, 150 ms in), then the whole think time between turns
    assert waits == [0, 200, 50, 200, 100, 200, 150, 200]
