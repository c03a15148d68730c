"""`agenthost load`: drive N concurrent chats of T turns through one host.

Runs on the embedded default (SQLite in a temporary or given folder, the
scripted provider), shows progress, and ends with the figures and the
invariant checks: no turn left active, every turn stored, no message lost.
All chats wait on one asyncio loop (agenthost.actors.aio), so the driver
costs no thread per chat.
"""

import asyncio
import gc
import resource
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from agenthost.actors import aio
from agenthost.actors.surface import Chat, Host
from agenthost.messages.commands import OutcomeState
from agenthost.providers.scripted import ScriptedProvider, echo_reply
from agenthost.store import SqliteStore

TURN_TIMEOUT_S = 120.0
GC_THRESHOLDS = (10_000, 10, 100)
"""The collector's thresholds for a process holding thousands of chats.

With CPython's defaults (700, 10, 10) the in-flight turns of thousands of
chats live long enough to reach the oldest generation, and full collections
(each walking every actor's state, with the GIL held) took two thirds of a
5,000-chat run on the 2-core machine; with these they take about a quarter."""


def tune_gc() -> None:
    """Set GC_THRESHOLDS: for a process that is the host (the CLI's), not for a library."""
    gc.set_threshold(*GC_THRESHOLDS)


@attrs.frozen(kw_only=True)
class LoadConfig:
    chats: int = 10
    turns: int = 5
    deltas: int = 10
    delta_ms: float = 0.0
    think_ms: float = 0.0
    shape: str = "copilot"
    store_dir: Path | None = None


@attrs.frozen(kw_only=True)
class LoadReport:
    chats: int
    turns_requested: int
    turns_completed: int
    seconds: float
    turns_per_s: float
    latency_ms_p50: float
    latency_ms_p95: float
    latency_ms_p99: float
    host_overhead_ms_p50: float
    host_overhead_ms_p99: float
    peak_rss_mb: float
    violations: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.violations


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, round(q) - 1))]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def prompt_for(chat_index: int, turn_index: int) -> str:
    return f"chat {chat_index} turn {turn_index}"


async def _drive(
    host: Host,
    config: LoadConfig,
    latencies: list[float],
    outcomes: dict[tuple[int, int], Any],
    progress: Callable[[], None],
) -> list[str]:
    sessions = await asyncio.gather(*(aio.create_session(host) for _ in range(config.chats)))
    chats: list[Chat] = await asyncio.gather(*(aio.chat(s) for s in sessions))

    async def run_chat(index: int, chat: Chat) -> None:
        for turn in range(config.turns):
            if turn and config.think_ms:
                await asyncio.sleep(config.think_ms / 1000)
            started = time.perf_counter()
            ticket = await aio.send(chat, prompt_for(index, turn), timeout=TURN_TIMEOUT_S)
            outcome = await aio.outcome(ticket, timeout=TURN_TIMEOUT_S)
            latencies.append(time.perf_counter() - started)
            outcomes[(index, turn)] = outcome
            progress()

    await asyncio.gather(*(run_chat(i, chat) for i, chat in enumerate(chats)))
    return [s.id for s in sessions]


def check_invariants(
    db_path: Path, session_ids: list[str], config: LoadConfig, outcomes: dict[tuple[int, int], Any]
) -> list[str]:
    """Read the store as another process would, after the host stopped."""
    violations: list[str] = []
    bad = [key for key, o in outcomes.items() if o.state is not OutcomeState.COMPLETE]
    if bad:
        violations.append(
            f"{len(bad)} turns did not complete (first: chat {bad[0][0]} turn {bad[0][1]})"
        )
    with sqlite3.connect(db_path) as db:
        for index, session_id in enumerate(session_ids):
            rows = db.execute(
                "SELECT user_text, assistant_text, state FROM turns WHERE session_id = ?"
                " ORDER BY seq",
                (session_id,),
            ).fetchall()
            expected = [
                (prompt_for(index, t), echo_reply(prompt_for(index, t)), "complete")
                for t in range(config.turns)
            ]
            if any(state is None for _, _, state in rows):
                violations.append(f"chat {index}: a turn was left active")
            if len(rows) != config.turns:
                violations.append(f"chat {index}: {len(rows)} turns stored, {config.turns} sent")
            elif rows != expected:
                violations.append(f"chat {index}: stored turns differ from what was sent")
            pending = db.execute(
                "SELECT COUNT(*) FROM pending_messages WHERE session_id = ?", (session_id,)
            ).fetchone()[0]
            if pending:
                violations.append(f"chat {index}: {pending} messages left pending")
    return violations


def run_load(config: LoadConfig, progress: Callable[[], None] = lambda: None) -> LoadReport:
    with tempfile.TemporaryDirectory(prefix="agenthost-load-") as scratch:
        folder = config.store_dir or Path(scratch)
        db_path = folder / f"load-{int(time.time() * 1000)}.db"
        provider = ScriptedProvider(
            shape=config.shape,  # type: ignore[arg-type]
            echo_deltas=config.deltas,
            delta_s=config.delta_ms / 1000,
        )
        host = Host.start(store=SqliteStore(db_path), providers={"scripted": provider})
        latencies: list[float] = []
        outcomes: dict[tuple[int, int], Any] = {}
        started = time.perf_counter()
        try:
            session_ids = asyncio.run(_drive(host, config, latencies, outcomes, progress))
        finally:
            host.stop(timeout=60)
        seconds = time.perf_counter() - started
        violations = check_invariants(db_path, session_ids, config, outcomes)
    scripted_s = max(config.deltas - 1, 0) * config.delta_ms / 1000
    overhead = [max(0.0, latency - scripted_s) * 1000 for latency in latencies]
    millis = [latency * 1000 for latency in latencies]
    return LoadReport(
        chats=config.chats,
        turns_requested=config.chats * config.turns,
        turns_completed=sum(1 for o in outcomes.values() if o.state is OutcomeState.COMPLETE),
        seconds=seconds,
        turns_per_s=len(latencies) / seconds if seconds else 0.0,
        latency_ms_p50=percentile(millis, 50),
        latency_ms_p95=percentile(millis, 95),
        latency_ms_p99=percentile(millis, 99),
        host_overhead_ms_p50=percentile(overhead, 50),
        host_overhead_ms_p99=percentile(overhead, 99),
        peak_rss_mb=peak_rss_mb(),
        violations=tuple(violations),
    )
