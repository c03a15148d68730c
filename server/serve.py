"""`agenthost serve`: run an AHP server until SIGTERM or SIGINT.

On a signal it stops accepting connections, lets running turns finish up to
a deadline, flushes the store and exits 0.
"""

import asyncio
import secrets
import signal
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import attrs
import structlog
from aiohttp import web

from agenthost.actors.surface import Host
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.server.ahp import AhpServer, Limits
from agenthost.server.channels import front_seq_base
from agenthost.server.hosts import HostAllowlist

log = structlog.get_logger(__name__)


def fresh_seq_base() -> int:
    """A serve's serverSeq range, one of 65,535 picked at random: a client's
    lastSeenServerSeq from an earlier run of this server (restarted under it)
    lies outside it, but for a 1 in 65,535 chance, and is answered with
    snapshots rather than this run's envelopes, which it never saw."""
    return front_seq_base(secrets.randbelow(65_535) + 1)


@attrs.frozen(kw_only=True)
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = 8765
    drain_s: float = 30.0
    limits: Limits = attrs.field(factory=Limits)
    allowed_hosts: tuple[str, ...] = ()  # names beside loopback and the bound address
    # A sharded server's fronts (shards/fronts.py): each listens on the same
    # port (SO_REUSEPORT) and numbers its serverSeq from a base of its own.
    reuse_port: bool = False
    seq_base: int = attrs.field(factory=fresh_seq_base)


def read_tokens(path: Path) -> dict[str, str]:
    """A token file: one `token identity` per line; `#` starts a comment.

    Raises:
        AgentHostError: INVALID_ARGUMENT naming the line (never the token).
    """
    tokens: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2 or len(parts[0]) < 16:
            raise AgentHostError(
                code=ErrorCode.INVALID_ARGUMENT,
                message=f"{path}:{number}: expected `token identity`, a token of 16+ characters",
            )
        tokens[parts[0]] = parts[1]
    if not tokens:
        raise AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message=f"{path}: no tokens")
    return tokens


def new_token() -> str:
    return secrets.token_urlsafe(32)


def web_dir() -> str | None:
    folder = resources.files("agenthost.server") / "web"
    return str(folder) if folder.is_dir() else None


async def serve(
    host: Host,
    tokens: dict[str, str],
    config: ServeConfig,
    ready: Callable[[str], None] = lambda url: None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve until `stop` is set, or (when no `stop` is given) SIGTERM or SIGINT;
    then drain and return."""
    hosts = HostAllowlist.of(config.host, allowed=config.allowed_hosts)
    server = AhpServer(
        host,
        tokens,
        limits=config.limits,
        static_dir=web_dir(),
        hosts=hosts,
        seq_base=config.seq_base,
    )
    runner = web.AppRunner(
        server.app(),
        handle_signals=False,
        access_log=None,
        # aiohttp closes a connection that has not sent a whole request within
        # this, from its start as between requests: a half-sent request goes.
        keepalive_timeout=config.limits.header_timeout_s,
    )
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port, reuse_port=config.reuse_port or None)
    await site.start()
    if stop is None:
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    bound = runner.addresses[0] if runner.addresses else (config.host, config.port)
    server.listening_on(int(bound[1]))
    ready(f"http://{bound[0]}:{bound[1]}/")
    await stop.wait()
    log.info("server_stopping")
    server.accepting = False  # new connections get 503 from here on
    await server.drained(config.drain_s)
    await server.close_connections()
    await runner.cleanup()
