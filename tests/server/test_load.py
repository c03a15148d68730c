import json
import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from agenthost.messages import OutcomeState, TurnOutcome
from agenthost.server.cli import app
from agenthost.server.load import LoadConfig, check_invariants, percentile


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


def test_the_invariant_checks_catch_a_lost_turn(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE turns (session_id, seq, user_text, assistant_text, state)")
        conn.execute("CREATE TABLE pending_messages (session_id)")
        conn.execute(
            "INSERT INTO turns VALUES ('s', 0, 'chat 0 turn 0', 'echo: chat 0 turn 0', 'complete')"
        )
    config = LoadConfig(chats=1, turns=2)
    done = TurnOutcome(state=OutcomeState.COMPLETE)
    violations = check_invariants(db, ["s"], config, {(0, 0): done, (0, 1): done})
    assert violations == ["chat 0: 1 turns stored, 2 sent"]


def test_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.5
    assert percentile(values, 99) > percentile(values, 95) > percentile(values, 50)
    assert percentile([], 99) == 0.0
