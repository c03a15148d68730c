"""`agenthost load`: the command, its option checks and its report table.

The runs themselves are server/load.py's and server/load_remote.py's; this
module turns the command line into a `LoadConfig`, refuses what cannot run
(one line, as every command does: a store it cannot use exits 2), shows the
progress bar and prints the report (a table, or `--json`). `cli.py`
registers `load`.
"""

import json
import time
from pathlib import Path

import attrs
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agenthost.providers import loops
from agenthost.server.cli_errors import USAGE, CliError, count, one_line_errors
from agenthost.server.cli_store import named_store, refusal, refuse_unshared, say_created_store
from agenthost.server.load import (
    CHATS_PER_CONNECTION,
    MAX_CONNECTIONS,
    SERVER_RATE,
    TURN_TIMEOUT_S,
    LoadConfig,
    LoadError,
    LoadReport,
    StoreRefused,
    run_load,
)
from agenthost.server.load_remote import load_remote


@one_line_errors
def load(
    chats: int = typer.Option(10, min=1, help="concurrent chats"),
    turns: int = typer.Option(5, min=1, help="turns per chat"),
    deltas: int = typer.Option(
        10, min=1, help="streamed deltas per reply (with --url: what the server's provider sends)"
    ),
    delta_ms: float = typer.Option(
        0.0, min=0, help="milliseconds between deltas (with --url: the server provider's pacing)"
    ),
    think_ms: float = typer.Option(
        0.0, min=0, help="milliseconds a user thinks between turns (first turns spread over one)"
    ),
    shape: str = typer.Option("copilot", help="scripted provider shape: copilot, claude or codex"),
    store: str | None = typer.Option(
        None,
        help="the store: a SQLite file or a folder for a new one, sqlite:///path or"
        " postgresql://... (default: a new file in a temporary folder)",
    ),
    turn_timeout: float = typer.Option(
        TURN_TIMEOUT_S, min=0.001, help="seconds a turn may take before it counts as lost"
    ),
    url: str | None = typer.Option(
        None, help="drive a running AHP server (ws://host:port/ahp) instead of an in-process host"
    ),
    token: str | None = typer.Option(
        None, envvar="AGENTHOST_TOKEN", help="the server's bearer token (or AGENTHOST_TOKEN)"
    ),
    connections: int | None = typer.Option(
        None,
        min=1,
        help=f"WebSockets to spread the chats over (default: {MAX_CONNECTIONS}, "
        f"or one per {CHATS_PER_CONNECTION} chats beyond that)",
    ),
    rate: float = typer.Option(
        SERVER_RATE * 0.9,
        min=1,
        help="messages per second per WebSocket; keep it below the server's limit",
    ),
    as_json: bool = typer.Option(False, "--json", help="print the report as one JSON object"),
    shards: int | None = typer.Option(
        None,
        min=1,
        help="in process through a sharded host of N shards (Ray; a PostgreSQL --store)",
    ),
    ray_address: str | None = typer.Option(
        None, help="with --shards: join this Ray cluster (default: start one on this machine)"
    ),
) -> None:
    """Drive N concurrent chats of T turns and check every turn.

    In-process it runs on the embedded default, SQLite and the scripted
    provider (with --shards: a sharded host over Ray, on the PostgreSQL
    --store); with --url it drives a running AHP server. It reports
    throughput, latency and the invariant checks, and exits 1 on a violation.
    """
    if shape not in ("copilot", "claude", "codex"):
        raise typer.BadParameter(
            f"unknown shape {shape!r}: use copilot, claude or codex", param_hint="--shape"
        )
    if url is not None:
        if not url.startswith(("ws://", "wss://")):
            raise typer.BadParameter("use ws://host:port/ahp", param_hint="--url")
        if not token:
            raise typer.BadParameter("a token is needed with --url", param_hint="--token")
        if store is not None:
            raise typer.BadParameter("the server keeps its own store", param_hint="--store")
        if shards is not None:
            raise typer.BadParameter("the server runs its own shards", param_hint="--shards")
    elif store is not None:
        _check_load_store(store)
    if ray_address is not None and shards is None:
        raise typer.BadParameter("give --shards N to run shards on it", param_hint="--ray-address")
    if shards is not None:
        refuse_unshared(store)
    config = LoadConfig(
        chats=chats,
        turns=turns,
        deltas=deltas,
        delta_ms=delta_ms,
        think_ms=think_ms,
        shape=shape,
        store=store,
        turn_timeout_s=turn_timeout,
        url=url,
        token=token,
        connections=connections,
        rate=rate,
        shards=shards,
        ray_address=ray_address,
    )
    console = Console(stderr=True)
    with Progress(
        TextColumn("turns"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=as_json or not console.is_terminal,
    ) as progress:
        task = progress.add_task("turns", total=chats * turns)
        done = [0, 0.0]  # turns ended, when the bar last moved

        def advance() -> None:  # the bar moves at most 20 times a second: it costs a lock
            done[0] += 1
            now = time.monotonic()
            if now - done[1] >= 0.05 or done[0] == chats * turns:
                done[1] = now
                progress.update(task, completed=done[0])

        try:
            if url is None:
                report = run_load(config, progress=advance)
            else:
                report = loops.run(load_remote(config, progress=advance))
        except StoreRefused as error:
            raise refusal(error.error) from None
        except LoadError as error:
            raise CliError("load", str(error)) from None
    if report.store_created and report.store is not None:
        say_created_store(report.store)
    if as_json:
        print(json.dumps({**attrs.asdict(report), "ok": report.ok}, indent=2))
    else:
        print_report(report, shape if url is None else url)
    if not report.ok:
        raise typer.Exit(code=1)


def _check_load_store(store: str) -> None:
    """Refuse a --store load cannot use before the run: a folder load would make
    a file in is fine; a file needs an existing folder."""
    if Path(store).is_dir():
        return
    if store.endswith(("/", "\\")):
        raise CliError(
            f"store {store}", "no such folder: create it first (load makes a new file in it)", USAGE
        )
    named_store(store)


def print_report(report: LoadReport, target: str) -> None:
    remote = report.mode == "remote"
    per_chat = report.turns_requested // max(report.chats, 1)
    table = Table(
        title=f"agenthost load ({report.mode}): {count(report.chats, 'chat')} x "
        f"{count(per_chat, 'turn')} ({target})"
    )
    table.add_column("measure")
    table.add_column("value", justify="right", overflow="fold")  # a store's path, whole
    table.add_row("turns completed", f"{report.turns_completed} / {report.turns_requested}")
    table.add_row("turns/s", f"{report.turns_per_s:,.0f}")

    def trio(values: tuple[float, float, float]) -> str:
        return " / ".join(f"{v:.1f}" for v in values) + " ms"

    table.add_row(
        "turn latency p50 / p95 / p99",
        trio((report.latency_ms_p50, report.latency_ms_p95, report.latency_ms_p99)),
    )
    table.add_row(
        "server + network overhead p50 / p95 / p99" if remote else "host overhead p50 / p95 / p99",
        trio(
            (report.host_overhead_ms_p50, report.host_overhead_ms_p95, report.host_overhead_ms_p99)
        ),
    )
    if report.bytes_per_idle_session is not None:
        table.add_row(
            "bytes per resident idle session",
            f"{report.bytes_per_idle_session:,.0f} ({report.resident_sessions} resident)",
        )
    if report.connections is not None:
        table.add_row(
            "WebSockets / frames received", f"{report.connections} / {report.frames_received:,}"
        )
    table.add_row(
        "peak RSS (this process)" if remote else "peak RSS", f"{report.peak_rss_mb:,.0f} MB"
    )
    table.add_row("wall time (turns)", f"{report.seconds:.2f} s")
    if not remote:
        table.add_row("store", report.store or "a temporary file (removed after the run)")
    table.add_row("invariants", "ok" if report.ok else "[red]" + "; ".join(report.violations))
    Console().print(table)
