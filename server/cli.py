"""The `agenthost` command line."""

import asyncio
import json
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import attrs
import structlog
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agenthost.server.load import (
    CHATS_PER_CONNECTION,
    MAX_CONNECTIONS,
    SERVER_RATE,
    TURN_TIMEOUT_S,
    LoadConfig,
    LoadError,
    LoadReport,
    load_remote,
    run_load,
)

if TYPE_CHECKING:
    from agenthost.store import Store, StoreReport

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="agenthost: host agent chat sessions."
)


def configure_logging(level: str) -> None:
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


@app.callback()
def main_options(
    log_level: str = typer.Option("warning", help="debug, info, warning or error"),
) -> None:
    configure_logging(log_level)


@app.command()
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
) -> None:
    """Drive N concurrent chats of T turns through an in-process host, or with
    --url through a running AHP server; report throughput, latency and the
    invariant checks, and exit 1 on a violation.

    In-process it runs on the embedded default: SQLite and the scripted provider.
    """
    if shape not in ("copilot", "claude", "codex"):
        raise typer.BadParameter(f"unknown shape {shape!r}: use copilot, claude or codex")
    if url is not None:
        if not url.startswith(("ws://", "wss://")):
            raise typer.BadParameter("use ws://host:port/ahp", param_hint="--url")
        if not token:
            raise typer.BadParameter("a token is needed with --url", param_hint="--token")
        if store is not None:
            raise typer.BadParameter("the server keeps its own store", param_hint="--store")
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
                report = asyncio.run(load_remote(config, progress=advance))
        except LoadError as error:
            console.print(f"[red]agenthost load: {error}")
            raise typer.Exit(code=1) from None
    if as_json:
        print(json.dumps({**attrs.asdict(report), "ok": report.ok}, indent=2))
    else:
        print_report(report, shape if url is None else url)
    if not report.ok:
        raise typer.Exit(code=1)


def print_report(report: LoadReport, target: str) -> None:
    remote = report.mode == "remote"
    table = Table(
        title=f"agenthost load ({report.mode}): {report.chats} chats x "
        f"{report.turns_requested // max(report.chats, 1)} turns ({target})"
    )
    table.add_column("measure")
    table.add_column("value", justify="right")
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
    table.add_row("invariants", "ok" if report.ok else "[red]" + "; ".join(report.violations))
    Console().print(table)


STORE_HELP = (
    "the store: a SQLite file (a path or sqlite:///path) or"
    " postgresql://user@host/database[?schema=NAME] (default: the user's SQLite file)"
)


def _fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"agenthost: {message}", err=True)
    raise typer.Exit(code=code)


def _store(spec: str | None, *, create: bool = True) -> "Store":
    """The store a --store value names (not opened); a bad value ends the command."""
    from agenthost.actors.surface import default_store_path
    from agenthost.messages.errors import AgentHostError
    from agenthost.store import store_from_spec

    try:
        return store_from_spec(default_store_path() if spec is None else spec, create=create)
    except AgentHostError as error:
        _fail(error.message)


def _start_host(store: "Store", **options: Any) -> Any:
    """A host on the store; a store it cannot open ends the command in one line."""
    from agenthost.actors import Host
    from agenthost.messages.errors import AgentHostError

    try:
        host = Host.start(store=store, **options)
    except AgentHostError as error:
        _fail(error.message)
    if store.created:
        typer.echo(f"agenthost: created a new store at {store.location}", err=True)
    return host


def _open_host(store: str | None, *, create: bool = True) -> Any:
    return _start_host(_store(store, create=create))


@app.command("export")
def export_session(
    session_id: str,
    store: str | None = typer.Option(None, help=STORE_HELP),
) -> None:
    """Print a session (chats, turns, pending messages) as JSON."""
    host = _open_host(store, create=False)
    try:
        print(json.dumps(host.export_session(session_id), indent=2))
    finally:
        host.stop()


@app.command("import")
def import_session(
    path: Path,
    store: str | None = typer.Option(None, help=STORE_HELP),
) -> None:
    """Add an exported session to a store; prints its id."""
    data = json.loads(path.read_text())
    host = _open_host(store)
    try:
        print(host.import_session(data).id)
    finally:
        host.stop()


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="address to listen on (loopback by default)"),
    port: int = typer.Option(8765, min=0, max=65535, help="port (0: any free one)"),
    store: str | None = typer.Option(None, help=STORE_HELP),
    providers: Path | None = typer.Option(
        None, help="a providers.toml manifest of named providers (default: the scripted one)"
    ),
    provider: str = typer.Option("scripted", help="the provider when no manifest is given"),
    token_file: Path | None = typer.Option(
        None, help="lines of `token identity`; default: a generated token for `local`"
    ),
    drain_s: float = typer.Option(30.0, min=0, help="how long running turns may finish on stop"),
) -> None:
    """Serve the Agent Host Protocol over WebSocket at /ahp (and /, /healthz, /metrics)."""
    import asyncio

    from agenthost.messages.errors import AgentHostError
    from agenthost.providers import ScriptedProvider, load_manifest
    from agenthost.server.serve import ServeConfig, new_token, read_tokens
    from agenthost.server.serve import serve as run_server

    if providers is not None:
        try:
            configured = load_manifest(providers)
        except AgentHostError as error:
            raise typer.BadParameter(error.message, param_hint="--providers") from None
    elif provider == "scripted":
        configured = {"scripted": ScriptedProvider()}
    else:
        raise typer.BadParameter(
            "without --providers, only the scripted provider", param_hint="--provider"
        )
    chosen = _store(store)
    if token_file is not None:
        try:
            tokens = read_tokens(token_file)
        except AgentHostError as error:
            raise typer.BadParameter(error.message, param_hint="--token-file") from None
        generated = None
    else:
        generated = new_token()
        tokens = {generated: "local"}
    running = _start_host(chosen, providers=configured)

    def ready(url: str) -> None:
        print(f"agenthost: serving AHP at {url.replace('http', 'ws', 1)}ahp  (web page: {url})")
        if generated is not None:
            print(f"agenthost: token (identity `local`): {generated}")
        sys.stdout.flush()

    try:
        asyncio.run(
            run_server(running, tokens, ServeConfig(host=host, port=port, drain_s=drain_s), ready)
        )
    finally:
        running.stop()


@app.command()
def chat(
    url: str = typer.Option("ws://127.0.0.1:8765/ahp", help="the server's AHP WebSocket URL"),
    token: str = typer.Option(
        ...,
        envvar="AGENTHOST_TOKEN",
        prompt=True,
        hide_input=True,
        help="the bearer token (or AGENTHOST_TOKEN; asked for when absent)",
    ),
    session: str | None = typer.Option(
        None, "--open", help="open this session (its id, or the start of it); default: a new one"
    ),
) -> None:
    """Chat with an AHP server from the terminal: /help lists the commands."""
    import asyncio

    from agenthost.server.chat_client import run_chat

    code = asyncio.run(run_chat(url, token, session))
    if code:
        raise typer.Exit(code=code)


store_app = typer.Typer(no_args_is_help=True, help="Check a store, or back it up.")
app.add_typer(store_app, name="store")


def _describe(report: "StoreReport") -> str:
    schema = f"schema {report.schema_version}"
    if report.schema_version < report.known_version:
        schema += f" (migrated to {report.known_version} when a host opens it)"
    size = "" if report.size_bytes is None else f", {report.size_bytes / 1e6:,.1f} MB"
    return f"{_count(report.sessions, 'session')}, {_count(report.turns, 'turn')}, {schema}{size}"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


@store_app.command("check")
def store_check(
    store: str = typer.Argument(..., help="a SQLite file (path or sqlite:///path) or a URL"),
) -> None:
    """Check a store without changing it (a host may be using it): SQLite's
    integrity check, that it is agenthost's, and its schema version. Exit 1 if
    it is damaged, with what to do."""
    from agenthost.messages.errors import AgentHostError

    try:
        report = _store(store, create=False).check()
    except AgentHostError as error:
        _fail(error.message, code=1)
    print(f"{report.location}: ok: {_describe(report)}")


@store_app.command("backup")
def store_backup(
    store: str = typer.Argument(..., help="a SQLite file (path or sqlite:///path)"),
    dest: Path = typer.Argument(..., help="the new file (or a folder for one of the same name)"),
) -> None:
    """Copy a SQLite store with SQLite's online backup: a consistent copy even
    while a host writes to it. The copy is checked before it takes its name."""
    from agenthost.messages.errors import AgentHostError

    try:
        report = _store(store, create=False).backup(dest)
    except AgentHostError as error:
        _fail(error.message, code=1)
    print(f"{report.location}: backed up: {_describe(report)}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
