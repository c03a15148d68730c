"""The `agenthost` command line.

Every mistake a user can make here ends in one line on stderr, `agenthost:
<what>: <why>`, and a non-zero exit code (2 for a malformed command line or
a bad option value, a store that cannot be opened among them; 1 for the
rest); `agenthost --debug ...` shows the traceback instead. Commands say what
went wrong by raising `CliError` (or typer's `BadParameter` for a bad
option); `@one_line_errors` prints what a command raised, and `run` what the
command line's parsing did.
"""

import asyncio
import enum
import errno
import functools
import json
import logging
import socket
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import structlog
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.state import SessionSummary
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

STORE_HELP = (
    "the store: a SQLite file (a path or sqlite:///path) or"
    " postgresql://user@host/database[?schema=NAME] (default: the user's SQLite file)"
)
TOKEN_FILE_HELP = (
    "a file of `TOKEN IDENTITY` lines: a token of 16 or more characters, a space, and a"
    " name for whoever holds it (each identity sees only its own sessions); `#` starts a"
    " comment. Default: one generated token for the identity `local`"
)


class CliError(Exception):
    """A mistake or a refusal, shown as one line: `agenthost: <what>: <why>`;
    `code` 2 for a bad option value, 1 for the rest."""

    def __init__(self, what: str, why: str = "", code: int = 1) -> None:
        super().__init__(f"{what}: {why}" if why else what)
        self.what = what
        self.why = why
        self.code = code


@attrs.define
class _Options:
    debug: bool = False


_options = _Options()  # the global options of this run (set by main_options)
F = TypeVar("F", bound=Callable[..., Any])


def one_line_errors(command: F) -> F:
    """What the command raises becomes one line on stderr and an exit code
    (with --debug, the traceback); a bad option stays typer's to report."""

    @functools.wraps(command)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as error:
            if _options.debug or _is_usage_error(error):
                raise
            print(f"agenthost: {_error_line(error)}", file=sys.stderr)
            raise typer.Exit(code=error.code if isinstance(error, CliError) else 1) from None

    return guarded  # type: ignore[return-value]


def _error_line(error: Exception) -> str:
    if isinstance(error, CliError):
        return str(error)
    if isinstance(error, AgentHostError):
        return f"{error.code.value}: {error.message}"
    return f"unexpected {type(error).__name__}: {error} (--debug shows the traceback)"


class LogLevel(enum.StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


def configure_logging(level: str) -> None:
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=False),
            # A plain traceback: the default (rich, with every frame's locals) put
            # prompt text in the log and took the server's loop for seconds each.
            structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


def _version() -> str:
    try:
        return version("agenthost")
    except PackageNotFoundError:  # pragma: no cover - run from a tree that was never installed
        return "unknown"


def _show_version(shown: bool) -> None:
    if shown:
        print(f"agenthost {_version()}")
        raise typer.Exit()


@app.callback()
def main_options(
    log_level: LogLevel = typer.Option(LogLevel.warning, help="what to log on stderr"),
    debug: bool = typer.Option(False, "--debug", help="show a traceback with an error"),
    show_version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="print the version"
    ),
) -> None:
    _options.debug = debug
    configure_logging(log_level.value)


@app.command()
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
) -> None:
    """Drive N concurrent chats of T turns through an in-process host, or with
    --url through a running AHP server; report throughput, latency and the
    invariant checks, and exit 1 on a violation.

    In-process it runs on the embedded default: SQLite and the scripted provider.
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
            raise CliError("load", str(error)) from None
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


# -- stores ---------------------------------------------------------------------------------
def _store(spec: str | None, *, create: bool = True) -> "Store":
    """The store a --store value names (not opened): a path, sqlite:///path or
    postgresql://...; the user's SQLite file by default."""
    from agenthost.actors.startup import default_store_path
    from agenthost.store import store_from_spec

    try:
        return store_from_spec(default_store_path() if spec is None else spec, create=create)
    except AgentHostError as error:
        raise _refusal(error) from None


def _refusal(error: AgentHostError, code: int = 2) -> CliError:
    """A store's refusal (`store PATH: what; what to do`) as a CliError: 2, as a
    --store naming no usable store is; 1 for what a check or backup found."""
    return CliError(error.message, code=code)


@contextmanager
def _reading(spec: str | None) -> Iterator["Store"]:
    """The store opened only to read: a SQLite file without its lock, so it
    works beside a server that holds it (PostgreSQL serves many anyway)."""
    from agenthost.store import SqliteStore

    store = _store(spec, create=False)
    if isinstance(store, SqliteStore):
        store = SqliteStore(store.path, read_only=True)
    try:
        store.open()
    except AgentHostError as error:
        raise _refusal(error) from None
    try:
        yield store
    finally:
        store.close()


def _start_host(
    store: "Store",
    providers: dict[str, Any] | None = None,
    *,
    say_created: bool = True,
    limits: Any = None,
) -> Any:
    """A host on the store; a store it cannot open is one line. A store made
    new is said on stderr (unless the caller says it)."""
    from agenthost.actors import Host

    try:
        host = Host.start(store=store, providers=providers, limits=limits)
    except AgentHostError as error:
        if error.code is ErrorCode.STORE_ERROR and "in use" in error.message:
            raise CliError(
                f"store {store.location}",
                "in use by another agenthost process (a running `agenthost serve`?):"
                " stop it, or name another store with --store",
                code=2,
            ) from None
        raise _refusal(error) from None
    except (OSError, sqlite3.Error) as error:
        why = getattr(error, "strerror", None) or str(error)
        raise CliError(f"store {store.location}", f"cannot open it: {why}", code=2) from None
    if store.created and say_created:
        print(f"agenthost: created a new store at {store.location}", file=sys.stderr)
    return host


def _listen_error(host: str, port: int, error: OSError) -> CliError:
    if error.errno == errno.EADDRINUSE:
        why = "the address is in use (another server? --port 0 takes any free port)"
    else:
        why = error.strerror or str(error)
    return CliError(f"cannot listen on {host}:{port}", why)


def _check_listen(host: str, port: int) -> None:
    """Refuse an address serve could not listen on before a store is made for it
    (the server binds it again moments later)."""
    if port == 0:
        return
    try:
        socket.create_server((host, port)).close()
    except OSError as error:
        raise _listen_error(host, port, error) from None


def _providers(manifest: Path | None) -> dict[str, Any] | None:
    if manifest is None:
        return None
    from agenthost.providers import load_manifest

    try:
        return load_manifest(manifest)
    except AgentHostError as error:
        raise CliError("--providers", error.message, code=2) from None


def _resolve(sessions: Sequence[SessionSummary], wanted: str, path: str) -> str:
    """The one session whose id is `wanted` or starts with it."""
    ids = [s.id for s in sessions]
    matches = [i for i in ids if i == wanted] or [i for i in ids if i.startswith(wanted)]
    if not matches:
        raise CliError(wanted, f"no session in {path} has this id or starts with it")
    if len(matches) > 1:
        listed = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise CliError(wanted, f"{len(matches)} sessions start with it: {listed}")
    return matches[0]


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M") if ms else ""


@app.command("sessions")
@one_line_errors
def list_sessions(
    store: str | None = typer.Option(None, help=STORE_HELP),
    as_json: bool = typer.Option(False, "--json", help="print them as JSON"),
) -> None:
    """List a store's sessions, the latest activity first (read only: works beside a server)."""
    from agenthost.actors.startup import default_store_path

    if store is None and not default_store_path().exists():  # a new user's: nothing yet
        print("[]" if as_json else f"No sessions yet ({default_store_path()} does not exist).")
        return
    with _reading(store) as opened:
        sessions = sorted(opened.list_sessions(), key=lambda s: -s.modified_at)
        where = opened.location
    if as_json:
        rows = [
            {
                "id": s.id,
                "title": s.title,
                "provider": s.provider,
                "status": _flags(s),
                "turns": s.turn_count,
                "lastActivity": s.modified_at,
            }
            for s in sessions
        ]
        print(json.dumps(rows, indent=2))
        return
    if not sessions:
        print(f"No sessions in {where}.")
        return
    table = Table(title=f"{_count(len(sessions), 'session')} in {where}")
    table.add_column("id", no_wrap=True)
    table.add_column("title")
    table.add_column("status")
    table.add_column("turns", justify="right")
    table.add_column("last activity", no_wrap=True)
    for s in sessions:
        table.add_row(s.id, s.title, _flags(s), str(s.turn_count), _when(s.modified_at))
    console = Console()
    (console if console.is_terminal else Console(width=160)).print(table)


def _flags(summary: SessionSummary) -> str:
    return "archived" if summary.archived else "unread" if summary.unread else "read"


@app.command("export")
@one_line_errors
def export_session(
    session_id: str = typer.Argument(..., metavar="SESSION", help="its id, or the start of it"),
    store: str | None = typer.Option(None, help=STORE_HELP),
) -> None:
    """Print a session (chats, turns, pending messages) as JSON. Read only: works
    beside a running server (a turn running there is exported as it would be
    restored: ended, abandoned)."""
    from agenthost.actors.surface import EXPORT_FORMAT
    from agenthost.messages.wire import to_wire

    with _reading(store) as opened:
        found = _resolve(opened.list_sessions(), session_id, opened.location)
        record = opened.load_session(found)
    print(json.dumps({"agenthost": EXPORT_FORMAT, "session": to_wire(record)}, indent=2))


@app.command("import")
@one_line_errors
def import_session(
    path: Path = typer.Argument(..., metavar="FILE", help="what `agenthost export` printed"),
    store: str | None = typer.Option(None, help=STORE_HELP),
    providers: Path | None = typer.Option(
        None, help="the providers.toml that names the session's provider, if not `scripted`"
    ),
) -> None:
    """Add an exported session to a store; prints its id. The store must not be
    in use (stop the server that holds it first)."""
    from agenthost.actors.surface import EXPORT_FORMAT

    try:
        data = json.loads(path.read_text())
    except OSError as error:
        raise CliError(str(path), error.strerror or str(error)) from None
    except ValueError as error:
        raise CliError(str(path), f"not JSON ({error})") from None
    if not isinstance(data, dict) or data.get("agenthost") != EXPORT_FORMAT:
        raise CliError(str(path), "not a session that `agenthost export` printed")
    configured = _providers(providers)
    wanted = (data.get("session") or {}).get("provider")
    if wanted not in (configured or {"scripted": None}):  # before a store is made for it
        raise CliError(
            str(path),
            f"its session's provider {wanted!r} is not configured: pass the manifest that"
            " names it (--providers providers.toml)",
        )
    host = _start_host(_store(store), configured)
    try:
        print(host.import_session(data).id)
    except AgentHostError as error:
        if error.code is ErrorCode.PROVIDER_UNAVAILABLE:
            raise CliError(
                str(path),
                f"{error.message}: pass the manifest that names it (--providers providers.toml)",
            ) from None
        raise CliError(str(path), error.message) from None
    finally:
        host.stop()


@app.command()
@one_line_errors
def serve(
    host: str = typer.Option("127.0.0.1", help="address to listen on (loopback by default)"),
    port: int = typer.Option(8765, min=0, max=65535, help="port (0: any free one)"),
    store: str | None = typer.Option(None, help=STORE_HELP),
    providers: Path | None = typer.Option(
        None, help="a providers.toml manifest of named providers (default: the scripted one)"
    ),
    provider: str | None = typer.Option(
        None, help="the built-in provider to serve without a manifest: scripted"
    ),
    token_file: Path | None = typer.Option(None, help=TOKEN_FILE_HELP),
    drain_s: float = typer.Option(30.0, min=0, help="how long running turns may finish on stop"),
    max_message_bytes: int = typer.Option(
        1 << 20, min=1, help="a message's text, UTF-8 (HostLimits.message_bytes)"
    ),
    send_buffer_bytes: int = typer.Option(
        64 << 20, min=1, help="a connection's queued frames before it is cut off"
    ),
    replay_bytes: int = typer.Option(32 << 20, min=1, help="the reconnect replay buffer"),
    page_bytes: int = typer.Option(8 << 20, min=1, help="a fetchTurns page"),
) -> None:
    """Serve the Agent Host Protocol over WebSocket at /ahp, the web page at /
    (and /healthz, /metrics). Prints the store, the providers and a URL that
    opens the page signed in. Limits are in bytes."""
    from agenthost.actors import HostLimits
    from agenthost.providers import ScriptedProvider
    from agenthost.server.ahp import Limits
    from agenthost.server.serve import ServeConfig, new_token, read_tokens
    from agenthost.server.serve import serve as run_server

    if providers is not None and provider is not None:
        raise CliError(
            "--provider and --providers",
            "give one: a manifest names its own providers (--providers), or"
            " --provider picks the built-in one",
            code=2,
        )
    if provider not in (None, "scripted"):
        raise typer.BadParameter(
            f"unknown provider {provider!r}: without --providers, only `scripted`",
            param_hint="--provider",
        )
    configured = _providers(providers) or {"scripted": ScriptedProvider()}
    chosen = _store(store)
    _check_listen(host, port)
    if token_file is not None:
        try:
            tokens = read_tokens(token_file)
        except OSError as error:
            why = error.strerror or str(error)
            raise CliError(f"--token-file {token_file}", why, code=2) from None
        except AgentHostError as error:
            raise CliError("--token-file", error.message, code=2) from None
        generated = None
    else:
        generated = new_token()
        tokens = {generated: "local"}
    running = _start_host(
        chosen, configured, say_created=False, limits=HostLimits(message_bytes=max_message_bytes)
    )
    limits = Limits(
        outbox_bytes=send_buffer_bytes, replay_bytes=replay_bytes, page_bytes=page_bytes
    )
    config = ServeConfig(host=host, port=port, drain_s=drain_s, limits=limits)
    new = " (created now)" if chosen.created else ""

    def ready(url: str) -> None:
        print(f"agenthost: serving AHP at {url.replace('http', 'ws', 1)}ahp  (web page: {url})")
        if generated is not None:
            print(f"agenthost: token (identity `local`): {generated}")
            print(f"agenthost: open {url}#token={generated} to chat, signed in")
        else:
            print(f"agenthost: tokens from {token_file}; open {url} and paste yours")
        names = ", ".join(sorted(configured))
        print(f"agenthost: store {chosen.location}{new}; providers: {names}")
        print("agenthost: Ctrl+C stops it (running turns may finish first)")
        sys.stdout.flush()

    try:
        asyncio.run(run_server(running, tokens, config, ready))
    except OSError as error:
        raise _listen_error(host, port, error) from None
    finally:
        running.stop()


@app.command()
@one_line_errors
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
    from agenthost.server.chat_terminal import run_chat

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
@one_line_errors
def store_check(
    store: str = typer.Argument(..., help="a SQLite file (path or sqlite:///path) or a URL"),
) -> None:
    """Check a store without changing it (a host may be using it): SQLite's
    integrity check, that it is agenthost's, and its schema version. Exit 1 if
    it is damaged, with what to do."""
    try:
        report = _store(store, create=False).check()
    except AgentHostError as error:
        raise _refusal(error, code=1) from None
    print(f"{report.location}: ok: {_describe(report)}")


@store_app.command("backup")
@one_line_errors
def store_backup(
    store: str = typer.Argument(..., help="a SQLite file (path or sqlite:///path)"),
    dest: Path = typer.Argument(..., help="the new file (or a folder for one of the same name)"),
) -> None:
    """Copy a SQLite store with SQLite's online backup: a consistent copy even
    while a host writes to it. The copy is checked before it takes its name."""
    try:
        report = _store(store, create=False).backup(dest)
    except AgentHostError as error:
        raise _refusal(error, code=1) from None
    print(f"{report.location}: backed up: {_describe(report)}")


# -- errors as one line -----------------------------------------------------------------------
def _is_usage_error(error: Exception) -> bool:
    """A malformed command line: click's UsageError (typer >= 0.29 carries its own copy)."""
    return isinstance(getattr(error, "exit_code", None), int) and callable(
        getattr(error, "format_message", None)
    )


def _usage_line(error: Exception) -> str:
    """A malformed command line as `<what>: <why>`."""
    message = str(getattr(error, "message", "") or "").removeprefix("Value error, ").rstrip(".")
    param = getattr(error, "param", None)
    context = getattr(error, "ctx", None)
    where = context.command_path if context is not None else "agenthost"
    command = where.removeprefix("agenthost").strip() or "usage"
    if type(error).__name__ == "MissingParameter" and param is not None:
        opts = getattr(param, "opts", None) or [getattr(param, "name", "") or ""]
        if getattr(param, "param_type_name", "") == "argument":
            name = f"argument {getattr(param, 'metavar', None) or opts[0].upper()}"
        else:
            name = f"option {opts[0]}"
        return f"{command}: missing {name} (see {where} --help)"
    hint = getattr(error, "param_hint", None)
    if hint is None and param is not None:
        hint = (getattr(param, "opts", None) or [getattr(param, "name", "")])[0]
    if hint is not None:
        what = " / ".join(hint) if isinstance(hint, (list, tuple)) else str(hint)
        return f"{what.strip(chr(39))}: {message}"
    return f"{command}: {message} (see {where} --help)"


def run(argv: Sequence[str]) -> int:
    """Run the command line; returns the exit code. Errors are one line on stderr."""
    args = list(argv)
    debug = "--debug" in args

    def say(line: str) -> None:
        print(f"agenthost: {line}", file=sys.stderr)

    try:
        command = typer.main.get_command(app)
        result = command.main(args=args, prog_name="agenthost", standalone_mode=False)
    except typer.Abort:
        say("stopped")
        return 1
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except Exception as error:
        if debug:
            raise
        if _is_usage_error(error):
            say(_usage_line(error))
            return int(getattr(error, "exit_code", 2))
        say(_error_line(error))
        return 1
    return result if isinstance(result, int) else 0


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
