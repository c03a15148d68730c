"""The `agenthost` commands: load, sessions, export, import, serve, chat, store.

How a mistake is said (one line, `agenthost: <what>: <why>`, exit code 2 for
a malformed command line, a bad option value or an unusable store, 1 for the
rest) is server/cli_errors.py's; how --store names a store and how a store's
refusal reads, server/cli_store.py's. `run` is what the `agenthost` script
calls.
"""

import asyncio
import enum
import json
import logging
import socket
import sys
from collections.abc import Sequence
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
import typer
from rich.console import Console
from rich.table import Table

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.state import SessionSummary
from agenthost.providers import loops
from agenthost.server.ahp import Limits
from agenthost.server.cli_errors import (
    USAGE,
    CliError,
    count,
    error_line,
    is_usage_error,
    listen_error,
    one_line_errors,
    options,
    usage_line,
)
from agenthost.server.cli_load import load
from agenthost.server.cli_store import (
    named_store,
    reading,
    refusal,
    refuse_unshared,
    start_host,
)

if TYPE_CHECKING:
    from agenthost.store import StoreReport

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="agenthost: host agent chat sessions."
)

DEFAULT_LIMITS = Limits()
MIB = 1 << 20
DEFAULT_RESIDENT_MB = (
    256  # chat history of idle resident sessions (Host.start's max_resident_bytes)
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
    options.debug = debug
    options.log_level = log_level.value
    configure_logging(log_level.value)
    try:
        loops.kind()
    except ValueError as error:  # a mistaken AGENTHOST_LOOP, refused before anything starts
        print(f"agenthost: {error}", file=sys.stderr)
        raise typer.Exit(code=USAGE) from None


app.command("load")(load)


# -- sessions, export, import, serve ---------------------------------------------------------
def _check_listen(host: str, port: int) -> None:
    """Refuse an address serve could not listen on before a store is made for it
    (the server binds it again moments later)."""
    if port == 0:
        return
    try:
        socket.create_server((host, port)).close()
    except OSError as error:
        raise listen_error(host, port, error) from None


def _providers(manifest: Path | None) -> dict[str, Any] | None:
    if manifest is None:
        return None
    from agenthost.providers import load_manifest

    try:
        return load_manifest(manifest)
    except AgentHostError as error:
        raise CliError("--providers", error.message, code=USAGE) from None


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
    """List a store's sessions, the latest activity first.

    Read only: works beside a running server.
    """
    from agenthost.actors.startup import default_store_path

    if store is None and not default_store_path().exists():  # a new user's: nothing yet
        print("[]" if as_json else f"No sessions yet ({default_store_path()} does not exist).")
        return
    with reading(store) as opened:
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
    table = Table(title=f"{count(len(sessions), 'session')} in {where}")
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
    """Print a session (chats, turns, pending messages) as JSON.

    Read only: works beside a running server (a turn running there is
    exported as it would be restored: ended, abandoned).
    """
    from agenthost.actors.surface import EXPORT_FORMAT
    from agenthost.messages.wire import to_wire

    if not session_id.strip():
        raise CliError(
            "export",
            "the session id is empty: give its id or the start of it (agenthost sessions lists"
            " them)",
            USAGE,
        )

    with reading(store) as opened:
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
    """Add an exported session to a store, and print its id.

    The store must not be in use (stop the server that holds it first).
    """
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
    host = start_host(named_store(store), configured)
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
    allowed_host: list[str] = typer.Option(
        [],
        help="a host name clients reach the server by (repeatable); loopback names and the"
        " --host address are allowed already, any other Host header is refused",
    ),
    max_resident_sessions: int = typer.Option(
        DEFAULT_LIMITS.identity_resident_sessions or 0,
        min=0,
        help="sessions one identity may hold in memory (0: no quota)",
    ),
    session_creations_per_minute: int = typer.Option(
        DEFAULT_LIMITS.identity_session_creations_per_minute or 0,
        min=0,
        help="sessions one identity may create a minute (0: no quota)",
    ),
    header_timeout: float = typer.Option(
        DEFAULT_LIMITS.header_timeout_s,
        min=0.1,
        help="seconds a request's headers may take to arrive",
    ),
    shards: int | None = typer.Option(
        None, min=1, help="run the sessions on N shard processes (Ray; a PostgreSQL --store)"
    ),
    ray_address: str | None = typer.Option(
        None,
        help="with --shards: join this Ray cluster, shards on its nodes (default: a local one)",
    ),
    fronts: int | None = typer.Option(
        None,
        min=1,
        help="with --shards: M AHP front processes on the one port (SO_REUSEPORT; default 1,"
        " this process)",
    ),
    max_message_bytes: int = typer.Option(
        1 << 20, min=1, help="a message's text, UTF-8 (HostLimits.message_bytes)"
    ),
    send_buffer_bytes: int = typer.Option(
        DEFAULT_LIMITS.outbox_bytes, min=1, help="a connection's queued frames before it is cut off"
    ),
    replay_bytes: int = typer.Option(
        DEFAULT_LIMITS.replay_bytes, min=1, help="the reconnect replay buffer"
    ),
    page_bytes: int = typer.Option(DEFAULT_LIMITS.page_bytes, min=1, help="a fetchTurns page"),
    idle_channels: int = typer.Option(
        DEFAULT_LIMITS.idle_channels,
        min=0,
        help="chat channels nobody follows kept open for their grace (past it the longest"
        " idle closes)",
    ),
    resident_history_mb: int = typer.Option(
        DEFAULT_RESIDENT_MB,
        min=0,
        help="MiB of chat history idle sessions may keep in memory before the least recently"
        " used leave it (0: no bound)",
    ),
) -> None:
    """Serve AHP over WebSocket at /ahp and the web page at /.

    Also /healthz and /metrics. Prints the store, the providers and a URL
    that opens the page signed in. With --shards, the sessions live on N
    shard processes that Ray runs (and restarts), and this process routes
    to them (with --fronts M, M front processes on the one port do).
    Limits are in bytes.
    """
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
            code=USAGE,
        )
    if provider not in (None, "scripted"):
        raise typer.BadParameter(
            f"unknown provider {provider!r}: without --providers, only `scripted`",
            param_hint="--provider",
        )
    if ray_address is not None and shards is None:
        raise typer.BadParameter("give --shards N to run shards on it", param_hint="--ray-address")
    if fronts is not None and shards is None:
        raise typer.BadParameter(
            "give --shards N: the fronts route to shards", param_hint="--fronts"
        )
    if shards is not None:
        refuse_unshared(store)
    # Served, nobody reads what the scripted provider was sent: it keeps none.
    configured = _providers(providers) or {"scripted": ScriptedProvider(records=0)}
    chosen = named_store(store)
    _check_listen(host, port)
    if token_file is not None:
        try:
            tokens = read_tokens(token_file)
        except OSError as error:
            why = error.strerror or str(error)
            raise CliError(f"--token-file {token_file}", why, code=USAGE) from None
        except AgentHostError as error:
            raise CliError("--token-file", error.message, code=USAGE) from None
        generated = None
    else:
        generated = new_token()
        tokens = {generated: "local"}
    limits = Limits(
        identity_resident_sessions=max_resident_sessions or None,
        identity_session_creations_per_minute=session_creations_per_minute or None,
        header_timeout_s=header_timeout,
        outbox_bytes=send_buffer_bytes,
        replay_bytes=replay_bytes,
        page_bytes=page_bytes,
        idle_channels=idle_channels,
    )
    config = ServeConfig(
        host=host, port=port, drain_s=drain_s, limits=limits, allowed_hosts=tuple(allowed_host)
    )
    host_limits = HostLimits(message_bytes=max_message_bytes)
    many = shards is not None and (fronts or 1) > 1

    def ready(url: str) -> None:
        print(f"agenthost: serving AHP at {url.replace('http', 'ws', 1)}ahp  (web page: {url})")
        if generated is not None:
            print(f"agenthost: token (identity `local`): {generated}")
            print(f"agenthost: open {url}#token={generated} to chat, signed in")
        else:
            print(f"agenthost: tokens from {token_file}; open {url} and paste yours")
        names = ", ".join(sorted(configured))
        new = " (created now)" if chosen.created else ""  # known once the store opened
        print(f"agenthost: store {chosen.location}{new}; providers: {names}")
        if shards is not None:
            where = ray_address or "a Ray cluster on this machine"
            print(f"agenthost: {shards} shards on {where}")
        if many:
            print(f"agenthost: {fronts} front processes on the one port")
        print("agenthost: Ctrl+C stops it (running turns may finish first)")
        sys.stdout.flush()

    names = tuple(sorted(configured))
    if shards is not None:
        assert store is not None
        from agenthost.server.fronts import serve_sharded

        serve_sharded(
            store,
            providers,
            names,
            (shards, fronts or 1),
            ray_address,
            host_limits,
            config,
            tokens,
            ready,
        )
        return
    running = start_host(
        chosen,
        configured,
        say_created=False,
        limits=host_limits,
        max_resident_bytes=resident_history_mb * MIB or None,
    )
    try:
        loops.run(run_server(running, tokens, config, ready))
    except OSError as error:
        raise listen_error(host, port, error) from None
    finally:
        running.stop()


@app.command()
@one_line_errors
def chat(
    url: str = typer.Option(
        "ws://127.0.0.1:8765/ahp",
        help="the server's AHP WebSocket URL, or the http:// URL `agenthost serve` printed",
    ),
    token: str | None = typer.Option(
        None,
        envvar="AGENTHOST_TOKEN",
        show_default=False,
        help="the bearer token (or AGENTHOST_TOKEN, or the #token= of the URL serve printed;"
        " asked for on a terminal when absent)",
    ),
    session: str | None = typer.Option(
        None, "--open", help="open this session (its id, or the start of it); default: a new one"
    ),
) -> None:
    """Chat with an AHP server from the terminal.

    /help lists the commands.
    """
    from agenthost.server.chat_terminal import chat_address, run_chat

    try:
        address = chat_address(url)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--url") from None
    if session is not None and not session.strip():
        raise CliError("--open", "the session id is empty: give its id or the start of it", USAGE)
    token = token or address.token
    if not token:
        if not sys.stdin.isatty():
            raise CliError(
                "--token",
                "needed: give --token TOKEN or set AGENTHOST_TOKEN (stdin is not a terminal,"
                " so it cannot be asked for)",
                USAGE,
            )
        token = typer.prompt("Token", hide_input=True)
    code = asyncio.run(run_chat(address.url, token, session))
    if code:
        raise typer.Exit(code=code)


store_app = typer.Typer(no_args_is_help=True, help="Check a store, or back it up.")
app.add_typer(store_app, name="store")


def _describe(report: "StoreReport") -> str:
    schema = f"schema {report.schema_version}"
    if report.schema_version < report.known_version:
        schema += f" (migrated to {report.known_version} when a host opens it)"
    size = "" if report.size_bytes is None else f", {report.size_bytes / 1e6:,.1f} MB"
    return f"{count(report.sessions, 'session')}, {count(report.turns, 'turn')}, {schema}{size}"


@store_app.command("check")
@one_line_errors
def store_check(
    store: str = typer.Argument(..., help="a SQLite file (path or sqlite:///path) or a URL"),
) -> None:
    """Check a store without changing it; exit 1 if it is damaged.

    SQLite's integrity check, that it is agenthost's, and its schema version;
    a host may be using it. A damaged store is said with what to do.
    """
    try:
        report = named_store(store, create=False).check()
    except AgentHostError as error:
        raise refusal(error, code=1) from None
    print(f"{report.location}: ok: {_describe(report)}")


@store_app.command("backup")
@one_line_errors
def store_backup(
    store: str = typer.Argument(..., help="a SQLite file (path or sqlite:///path)"),
    dest: Path = typer.Argument(..., help="the new file (or a folder for one of the same name)"),
) -> None:
    """Copy a SQLite store with SQLite's online backup.

    A consistent copy even while a host writes to it; the copy is checked
    before it takes its name.
    """
    try:
        report = named_store(store, create=False).backup(dest)
    except AgentHostError as error:
        raise refusal(error, code=1) from None
    print(f"{report.location}: backed up: {_describe(report)}")


# -- the command line ---------------------------------------------------------------------
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
        if debug and not is_usage_error(error):  # a malformed command line is one line anyway
            raise
        if is_usage_error(error):
            say(usage_line(error))
            return int(getattr(error, "exit_code", USAGE))
        say(error_line(error))
        return 1
    return result if isinstance(result, int) else 0


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
