"""`agenthost serve --shards N --fronts M`: M AHP front processes on one port.

One front process terminates every WebSocket and costs about a millisecond of
CPU a turn over AHP, so it caps a sharded server near a thousand turns a
second whatever the shards. With `--fronts M` the serve process starts the
shards on Ray, then M front processes, each a ShardedHost over the same
shards (found by name on the same Ray cluster, the same secret) and an
AhpServer, and supervises them.

Belongs here: what a front process is started with (`FrontSpec`), its main
(`run_front`), the serverSeq range a front start takes (`front_seq_base`),
and the parent's side (`serve_fronts`: hold the port, start, supervise and
stop the fronts).

Invariants:
1. Every front listens on the same address with SO_REUSEPORT: the kernel
   hands each new connection to one front's own accept queue (a hash of the
   connection's addresses), so no process carries every connection and a
   front that dies takes only its own connections with it (its clients
   reconnect and land on a live front). Chosen over one accepting process
   handing sockets over (SCM_RIGHTS): that process would be one more every
   connection depends on, and a hand-over protocol of our own to get right.
2. The parent holds the port from before the first front starts until the
   last one stopped: bound with SO_REUSEPORT and never listening, it takes
   no connection; so `--port 0` names one port for every front, and a front
   started again gets the same one.
3. Each front start numbers serverSeq in a range of its own, from the store's
   count of front starts (`front_seq_base`): a reconnect whose
   lastSeenServerSeq another front (or an earlier start) gave is below this
   front's base or above its seq, and gets snapshots, never a replay of this
   front's envelopes (server/channels.py, Sequencer).
4. A front is what `serve` is with one: the same address (loopback by
   default), tokens, Host and Origin allowlist, limits; SIGTERM drains it as
   serve does. The parent, on SIGTERM or SIGINT, sends each front SIGTERM,
   waits for it (its drain, then a margin), and then stops the shards.
5. A front that dies while the server runs is started again (a new start: a
   new serverSeq range); one that dies before it ever served stops the
   server with its exit code said (a start that cannot work fails at once).
   A front whose serve process died (even by SIGKILL) gets SIGTERM (Linux's
   parent-death signal) and drains: none serves on unsupervised.
"""

import asyncio
import contextlib
import multiprocessing
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import attrs
import structlog

from agenthost.providers import loops
from agenthost.server.channels import front_seq_base
from agenthost.server.serve import ServeConfig

log = structlog.get_logger(__name__)

FRONT_COUNTER = "ahp-fronts"
"""The shards table's row that counts front starts (store/postgres.py, count_start)."""
FRONT_START_S = 120.0
STOP_MARGIN_S = 15.0
RESTART_DELAY_S = 1.0
RESTART_MAX_DELAY_S = 30.0


def count_front_start(store: str) -> int:
    """This front start's number, counted in the shared store."""
    from agenthost.store.postgres import PostgresStore

    return PostgresStore(store, create=False).count_start(FRONT_COUNTER)


@attrs.frozen(kw_only=True)
class FrontSpec:
    """What a front process starts with (plain data: it crosses to a spawned process)."""

    config: ServeConfig
    tokens: Mapping[str, str]
    store: str
    ray_address: str
    shard_names: Mapping[str, str]  # shard id -> its Ray actor's name
    secret: bytes
    provider_names: tuple[str, ...]
    host_limits: Any = None
    log_level: str = "warning"


@attrs.frozen
class FrontReady:
    """A front's word to the parent that it serves."""

    pid: int
    seq_base: int


def run_front(spec: FrontSpec, ready: Connection) -> None:
    """A front process's main: join the shards, serve until SIGTERM, drain, stop."""
    from agenthost.server.cli import configure_logging
    from agenthost.server.serve import serve
    from agenthost.shards import ShardedHost
    from agenthost.shards.ray_shards import join_shards

    configure_logging(spec.log_level)
    _stop_with_parent()
    base = front_seq_base(count_front_start(spec.store))
    locates = join_shards(spec.ray_address, spec.shard_names)
    host = ShardedHost.connect(
        locates, spec.secret, spec.provider_names, limits=spec.host_limits, timeout=FRONT_START_S
    )
    config = attrs.evolve(spec.config, reuse_port=True, seq_base=base)
    log.info("front_starting", seq_base=base)
    try:
        loops.run(
            serve(
                host,
                dict(spec.tokens),
                config,
                lambda url: ready.send(FrontReady(os.getpid(), base)),
            )
        )
    finally:
        host.stop()
        ready.close()


def _stop_with_parent() -> None:
    """(Linux) SIGTERM this front when the serve process dies, even by SIGKILL:
    it drains and stops rather than serve on without its supervisor."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_pdeathsig, signal.SIGTERM) != 0:
        log.warning("front_parent_watch_failed", errno=ctypes.get_errno())


def hold_port(host: str, port: int) -> socket.socket:
    """Bind (never listen) the fronts' address with SO_REUSEPORT (invariant 2).

    Raises:
        OSError: the address cannot be bound (in use without SO_REUSEPORT).
    """
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        # SO_REUSEADDR as aiohttp's own listeners: a port whose last connections
        # wait out TIME_WAIT binds again at once
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    return sock


class FrontFailed(Exception):
    """A front stopped before it served."""


@attrs.define(eq=False)
class _Front:
    index: int
    process: Any  # multiprocessing's SpawnProcess
    pipe: Connection  # its FrontReady comes on it
    ready: FrontReady | None = None


class Fronts:
    """The parent's fronts (its event loop's thread only)."""

    def __init__(self, spec: FrontSpec, count: int) -> None:
        self.spec = spec
        self.count = count
        self._context = multiprocessing.get_context("spawn")
        self.fronts: list[_Front] = []
        self.stopping = False
        self.restarts = 0
        self._watching: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Start every front and wait until each serves.

        Raises:
            FrontFailed: one stopped first (its exit code said).
        """
        self.fronts = [self._spawn(n) for n in range(self.count)]
        try:
            await asyncio.gather(*(self._ready(front) for front in self.fronts))
        except BaseException:
            await self.stop()
            raise
        for front in self.fronts:
            self._watch(front)

    def _spawn(self, index: int) -> _Front:
        mine, theirs = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=run_front, args=(self.spec, theirs), name=f"agenthost-front-{index}"
        )
        process.start()
        theirs.close()
        return _Front(index, process, mine)

    async def _ready(self, front: _Front) -> None:
        arrived = await asyncio.to_thread(_receive, front.pipe, FRONT_START_S)
        if arrived is None:
            await asyncio.to_thread(front.process.join, 10.0)  # it closed its pipe: ending
            code = front.process.exitcode
            raise FrontFailed(
                f"front {front.index} stopped before it served (exit code {code}); run with"
                " --log-level info to see why"
                if code is not None
                else f"front {front.index} did not serve within {FRONT_START_S:.0f} s"
            )
        front.ready = arrived
        log.info("front_ready", front=front.index, pid=arrived.pid, seq_base=arrived.seq_base)

    def _watch(self, front: _Front) -> None:
        task = asyncio.get_running_loop().create_task(self._supervise(front))
        self._watching.add(task)
        task.add_done_callback(self._watching.discard)

    async def _supervise(self, front: _Front) -> None:
        """Start a front again when it dies while the server runs (invariant 5)."""
        await _exited(front.process)
        delay = RESTART_DELAY_S
        while not self.stopping:
            await asyncio.to_thread(front.process.join, 5.0)  # reaped: its exit code
            log.warning("front_died", front=front.index, exit_code=front.process.exitcode)
            await asyncio.sleep(delay)
            if self.stopping:
                return
            again = self._spawn(front.index)
            self.fronts[front.index] = again
            self.restarts += 1
            try:
                await self._ready(again)
                delay = RESTART_DELAY_S
            except FrontFailed as failed:  # again, later: a start that fails waits longer
                log.error("front_restart_failed", front=front.index, error=str(failed))
                delay = min(delay * 2, RESTART_MAX_DELAY_S)
            front = again
            await _exited(front.process)

    async def stop(self, drain_s: float = 0.0) -> None:
        """SIGTERM to each front; wait for its drain and a margin; then SIGKILL."""
        self.stopping = True
        for task in list(self._watching):
            task.cancel()
        for front in self.fronts:
            if front.process.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(front.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + drain_s + STOP_MARGIN_S
        for front in self.fronts:
            await asyncio.to_thread(front.process.join, max(deadline - time.monotonic(), 0.1))
            if front.process.is_alive():
                log.warning("front_killed", front=front.index)
                front.process.kill()
                await asyncio.to_thread(front.process.join, 5.0)


def _receive(pipe: Connection, timeout: float) -> FrontReady | None:
    try:
        if pipe.poll(timeout):
            arrived = pipe.recv()
            return arrived if isinstance(arrived, FrontReady) else None
    except (EOFError, OSError):
        pass
    return None


async def _exited(process: Any) -> None:
    """Wait until the process has exited (its sentinel becomes readable)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not done.done():
            done.set_result(None)

    loop.add_reader(process.sentinel, readable)
    try:
        await done
    finally:
        loop.remove_reader(process.sentinel)


async def serve_fronts(
    spec: FrontSpec,
    count: int,
    ready: Callable[[str], None] = lambda url: None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve with `count` front processes until `stop` is set (or SIGTERM or
    SIGINT); then stop them, drained. The caller stops the shards after.

    Raises:
        FrontFailed: a front stopped before it served.
        OSError: the address cannot be bound.
    """
    held = hold_port(spec.config.host, spec.config.port)
    try:
        port = int(held.getsockname()[1])
        spec = attrs.evolve(spec, config=attrs.evolve(spec.config, port=port))
        fronts = Fronts(spec, count)
        await fronts.start()
        if stop is None:
            stop = asyncio.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        shown = f"[{spec.config.host}]" if ":" in spec.config.host else spec.config.host
        ready(f"http://{shown}:{port}/")
        await stop.wait()
        log.info("fronts_stopping", fronts=count)
        await fronts.stop(spec.config.drain_s)
    finally:
        held.close()


def serve_sharded(
    store: str,
    manifest: Path | None,
    provider_names: tuple[str, ...],
    counts: tuple[int, int],
    ray_address: str | None,
    host_limits: Any,
    config: ServeConfig,
    tokens: Mapping[str, str],
    ready: Callable[[str], None],
) -> None:
    """`serve --shards N [--fronts M]` (counts: N, M): the shards on Ray, and one
    front in this process (M = 1) or M front processes; each front's serverSeq
    in a range of its own. Returns once stopped (fronts first, then shards).

    Raises:
        CliError: one line, for a start that cannot work.
    """
    from agenthost.server.cli_errors import CliError, listen_error, options
    from agenthost.server.cli_store import start_ray_shards, start_shards
    from agenthost.server.serve import serve

    shards, count = counts
    if count == 1:
        running = start_shards(store, manifest, provider_names, shards, ray_address, host_limits)
        try:
            config = attrs.evolve(config, seq_base=front_seq_base(count_front_start(store)))
            loops.run(serve(running, dict(tokens), config, ready))
        except OSError as error:
            raise listen_error(config.host, config.port, error) from None
        finally:
            running.stop()
        return
    ray_shards = start_ray_shards(store, manifest, provider_names, shards, ray_address, host_limits)
    spec = FrontSpec(
        config=config,
        tokens=dict(tokens),
        store=store,
        ray_address=ray_shards.address,
        shard_names=dict(ray_shards.names),
        secret=ray_shards.secret,
        provider_names=provider_names,
        host_limits=host_limits,
        log_level=options.log_level,
    )
    try:
        loops.run(serve_fronts(spec, count, ready))
    except OSError as error:
        raise listen_error(config.host, config.port, error) from None
    except FrontFailed as failed:
        raise CliError("--fronts", str(failed)) from None
    finally:
        ray_shards.stop()
