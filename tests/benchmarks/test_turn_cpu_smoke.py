"""Smoke test of benchmarks/turn_cpu.py's over-AHP path: this tree's server starts
as the benchmark starts it (counts and a live socket, never timings)."""

import socket
from pathlib import Path

from benchmarks import turn_cpu


def test_the_benchmark_serves_this_tree_on_a_loopback_port(tmp_path: Path) -> None:
    with turn_cpu.serving(turn_cpu.System("current"), tmp_path) as (url, token, pid):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), 5):
            pass
        assert token and pid > 0
    assert (tmp_path / "current" / "agenthost.db").exists()
