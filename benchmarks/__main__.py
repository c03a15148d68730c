"""`python -m benchmarks` (tox -e bench): benchmarks, as ratios to their baselines.

`python -m benchmarks` runs the turn round trip; `python -m benchmarks peers
[--chats 100,1000,5000]` the workload against peers and the store (benchmarks/peers.py);
`python -m benchmarks sessions [--sessions 100000]` the RSS of resident idle sessions;
`python -m benchmarks turn-cpu [--ahp]` CPU per turn against a baseline commit and the
asyncio floor (benchmarks/turn_cpu.py).
`python -m benchmarks stores [--postgres URL]` PostgreSQL against SQLite (benchmarks/stores.py).
`python -m benchmarks shards [--chats 2000 --turns 5]` one shard against two, in process and
over AHP, and a shard killed during load (benchmarks/shards.py; `pip install .[scale]`).
`python -m benchmarks soak [--minutes 20] [--users 300] [--out FOLDER]` users arriving and
leaving through a real `agenthost serve`, sampled over time (benchmarks/soak.py).
"""

import json
import logging
import sys

import structlog
from rich.console import Console
from rich.table import Table

from benchmarks import peers, pool, sessions, soak, stores, turn_cpu, turn_roundtrip


def main() -> None:
    if sys.argv[1:2] == ["peers"]:
        peers.main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["turn-cpu"]:
        turn_cpu.main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["sessions"]:
        sessions.main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["stores"]:
        stores.main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["shards"]:
        from benchmarks import shards  # imports ray's parts only when run

        shards.main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["soak"]:
        soak.main(sys.argv[2:])
        return
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    console = Console()
    results = turn_roundtrip.run()
    baseline = results[0].per_op_us
    table = Table(title="turn round trip (medians of rounds, same run)")
    for column in ("benchmark", "per op", "ratio to baseline"):
        table.add_column(column, justify="left" if column == "benchmark" else "right")
    for result in results:
        table.add_row(
            result.name, f"{result.per_op_us:,.1f} µs", f"{result.per_op_us / baseline:,.1f}x"
        )
    console.print(table)

    figures = pool.run()
    table = Table(title="pooled runtime vs pykka ThreadingActor (medians of rounds, same run)")
    for column in ("benchmark", "pooled", "pykka threads", "pool advantage"):
        table.add_column(column, justify="left" if column == "benchmark" else "right")
    for figure in figures:
        table.add_row(
            figure.name,
            f"{figure.pooled:,.1f} {figure.unit}",
            f"{figure.threaded:,.1f} {figure.unit}",
            f"{figure.ratio:,.2f}x",
        )
    console.print(table)

    memory = pool.memory()
    console.print(
        f"idle pooled actors: {memory.bytes_per_actor:,.0f} B each (tracemalloc, "
        f"{memory.actors:,} actors); start {memory.start_s:.2f} s, stop {memory.stop_s:.2f} s"
    )
    resident = sessions.run()
    console.print(
        f"resident idle sessions: {resident.bytes_per_session:,.0f} B each (RSS growth over "
        f"{resident.sessions:,} sessions after one turn, "
        f"{resident.actors_per_session:.0f} actors each)"
    )
    if "--json" in sys.argv:
        print(
            json.dumps(
                {
                    "turn_roundtrip": [
                        {"name": r.name, "per_op_us": r.per_op_us, "ratio": r.per_op_us / baseline}
                        for r in results
                    ],
                    "pool": [
                        {
                            "name": f.name,
                            "pooled": f.pooled,
                            "threaded": f.threaded,
                            "unit": f.unit,
                            "ratio": f.ratio,
                        }
                        for f in figures
                    ],
                    "resident_session_bytes": resident.bytes_per_session,
                    "pool_memory": {
                        "actors": memory.actors,
                        "bytes_per_actor": memory.bytes_per_actor,
                        "start_s": memory.start_s,
                        "stop_s": memory.stop_s,
                    },
                }
            )
        )


if __name__ == "__main__":
    main()
