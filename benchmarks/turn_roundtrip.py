"""Turn round trip through the host vs a plain pykka ask round trip.

Both are measured in the same run, in alternating rounds, and reported as
medians over rounds; the figure that matters is the ratio. The provider is
the scripted one with zero latency (one delta per reply); the store is
SQLite in a temporary folder, so each turn pays a real (group) commit.
"""

import statistics
import tempfile
import time
from pathlib import Path

import attrs
import pykka

from agenthost.actors import Host
from agenthost.providers import ScriptedProvider
from agenthost.store import SqliteStore


class _Echo(pykka.ThreadingActor):
    def on_receive(self, message: object) -> object:
        return message


@attrs.frozen
class Result:
    name: str
    per_op_us: float
    ops_per_round: int
    rounds: int


def _rounds(fn, rounds: int, ops: int) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn(ops)
        samples.append((time.perf_counter() - started) / ops)
    return statistics.median(samples) * 1e6


def run(rounds: int = 7, turns: int = 300, asks: int = 3000) -> list[Result]:
    echo = _Echo.start()

    def pykka_asks(n: int) -> None:
        for i in range(n):
            echo.ask(i, timeout=10)

    with tempfile.TemporaryDirectory() as folder:
        host = Host.start(
            store=SqliteStore(Path(folder) / "bench.db"),
            providers={"scripted": ScriptedProvider(echo_deltas=1)},
        )
        chat = host.create_session().chat()

        def host_turns(n: int) -> None:
            for i in range(n):
                chat.send(f"turn {i}").result(timeout=10)

        host_turns(20)  # warm up
        pykka_asks(200)
        ask_us = _rounds(pykka_asks, rounds, asks)
        turn_us = _rounds(host_turns, rounds, turns)
        host.stop()
    echo.stop()
    return [
        Result("plain pykka ask round trip (baseline)", ask_us, asks, rounds),
        Result("agenthost turn round trip (send -> committed outcome)", turn_us, turns, rounds),
    ]
