"""The store beside the peers (`python -m benchmarks peers`): the same turn
rows written three ways, as rows/s against raw sqlite3 inserts in one
transaction on the same schema and pragmas: SqliteStore ops committed in
batches as the StoreActor does, and the StoreActor itself (group commit, every
write acked after its commit). Rounds alternate; each figure is a median."""

import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from agenthost.store import SqliteStore, Store
from agenthost.store.records import SaveTurnStarted
from benchmarks import stores


def _turn_ops(rows: int) -> list[SaveTurnStarted]:
    return stores.turn_ops(rows)


def _opened_store(folder: Path) -> Store:
    return stores.with_session(SqliteStore(folder / "store.db"))


def raw_inserts(folder: Path, ops: list[SaveTurnStarted]) -> float:
    """Plain sqlite3 on the same schema and pragmas: one INSERT a row, one transaction."""
    _opened_store(folder).close()
    db = sqlite3.connect(folder / "store.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    started = time.perf_counter()
    db.execute("BEGIN")
    for op in ops:
        db.execute(
            "INSERT INTO turns (id, chat_id, session_id, seq, user_text, started_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (op.turn_id, op.chat_id, op.session_id, op.seq, op.user_text, op.started_at),
        )
    db.execute("COMMIT")
    seconds = time.perf_counter() - started
    db.close()
    return seconds


def store_batches(folder: Path, ops: list[SaveTurnStarted]) -> float:
    """SqliteStore.apply per op, a commit every MAX_BATCH ops, as the StoreActor does."""
    return stores.batches(_opened_store(folder), ops)


def store_actor(folder: Path, ops: list[SaveTurnStarted]) -> float:
    """The StoreActor: a Write a row, acked after its group commit; until the last ack."""
    store = _opened_store(folder)
    store.close()
    store.open()
    return stores.group_commit(store, ops)


STORE_WAYS: dict[str, Callable[[Path, list[SaveTurnStarted]], float]] = {
    "raw sqlite3, one transaction (baseline)": raw_inserts,
    "SqliteStore ops, committed in batches": store_batches,
    "StoreActor group commit (acked writes)": store_actor,
}


def compare_store(rows: int = 20_000, rounds: int = 5) -> dict[str, float]:
    """rows/s for each way, the median of rounds, in alternating rounds."""
    ops = _turn_ops(rows)
    samples: dict[str, list[float]] = {name: [] for name in STORE_WAYS}
    for _ in range(rounds):
        for name, way in STORE_WAYS.items():
            with tempfile.TemporaryDirectory(prefix="agenthost-store-bench-") as folder:
                samples[name].append(rows / way(Path(folder), ops))
    return {name: statistics.median(rates) for name, rates in samples.items()}


def print_store(rates: dict[str, float], rows: int, console: Console) -> None:
    baseline = next(iter(rates.values()))
    table = Table(title=f"store: {rows:,} turn rows (rows/s: median of rounds)")
    for column in ("way", "rows/s", "ratio to raw"):
        table.add_column(column, justify="left" if column == "way" else "right")
    for name, rate in rates.items():
        table.add_row(name, f"{rate:,.0f}", f"{rate / baseline:.2f}x")
    console.print(table)
