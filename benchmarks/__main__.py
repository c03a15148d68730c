"""`python -m benchmarks` (tox -e bench): benchmarks, as ratios to their baselines.

`python -m benchmarks` runs the turn round trip; `python -m benchmarks peers
[--chats 100,1000,5000]` the workload against peers and the store (benchmarks/peers.py).
"""

import json
import logging
import sys

import structlog
from rich.console import Console
from rich.table import Table

from benchmarks import peers, turn_roundtrip


def main() -> None:
    if sys.argv[1:2] == ["peers"]:
        peers.main(sys.argv[2:])
        return
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    results = turn_roundtrip.run()
    baseline = results[0].per_op_us
    table = Table(title="turn round trip (medians of rounds, same run)")
    for column in ("benchmark", "per op", "ratio to baseline"):
        table.add_column(column, justify="left" if column == "benchmark" else "right")
    for result in results:
        table.add_row(
            result.name, f"{result.per_op_us:,.1f} µs", f"{result.per_op_us / baseline:,.1f}x"
        )
    Console().print(table)
    if "--json" in sys.argv:
        print(
            json.dumps(
                [
                    {"name": r.name, "per_op_us": r.per_op_us, "ratio": r.per_op_us / baseline}
                    for r in results
                ]
            )
        )


if __name__ == "__main__":
    main()
