"""`agenthost load`: drive N concurrent chats of T turns, and check what came out.

Two drivers share one per-chat loop (`run_chat`), one set of invariant checks
(`check_invariants`) and one report (`build_report`):

- in-process (`run_load`): one host on the scripted provider and a new SQLite
  file in a temporary or given folder, or the store given (--store); all chats
  wait on one asyncio loop (agenthost.actors.aio), so the driver costs no
  thread per chat.
  The store is read afterwards as another process would.
- remote (server/load_remote.py): a running AHP server (`agenthost serve`)
  over a bounded number of WebSockets, each carrying many chats.

The invariants: every turn the driver started completed (within the per-turn
timeout); no turn is left active; every prompt is stored, in order, as a
complete turn answered `echo: <prompt>`; nothing is left pending. Over the wire
also: every started turn got exactly one terminal action, and the streamed
deltas add up to the stored reply.

Host overhead is a turn's latency minus the scripted provider's own pacing
((deltas - 1) x delta_ms). Remotely the driver cannot see the server's
provider: it takes the pacing from --deltas/--delta-ms as a statement about
the server, and the overhead then also holds the WebSocket round trip and the
AHP layer.
"""

import asyncio
import gc
import math
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import attrs

from agenthost.actors.aio import AsyncChat
from agenthost.actors.surface import Host
from agenthost.messages.errors import AgentHostError
from agenthost.providers import loops
from agenthost.providers.scripted import ScriptedProvider, echo_reply
from agenthost.store import store_from_spec

TURN_TIMEOUT_S = 120.0
RESIDENT_S = 24 * 3600.0
"""The load host's idle release: sessions stay resident through a run, so the
bytes per resident idle session are measured on resident sessions."""
MAX_CONNECTIONS = 50
CHATS_PER_CONNECTION = 200
"""Below the server's default of 256 subscriptions per connection."""
SERVER_RATE = 200.0
SERVER_BURST = 400
"""The server's default per-connection limits (server.ahp.Limits): the remote
driver paces itself below them, since a dispatch over the limit is dropped."""
PAGE = 1000
MAX_LISTED = 20
TERMINAL_ACTIONS = {
    "chat/turnComplete": "complete",
    "chat/turnCancelled": "cancelled",
    "chat/error": "error",
}


class LoadError(Exception):
    """The run could not start or set its chats up (not an invariant violation)."""


class StoreRefused(LoadError):
    """The run's store could not be opened: `error` is the store's own refusal."""

    def __init__(self, error: AgentHostError) -> None:
        super().__init__(error.message)
        self.error = error


@attrs.frozen(kw_only=True)
class LoadConfig:
    chats: int = 10
    turns: int = 5
    deltas: int = 10
    delta_ms: float = 0.0
    think_ms: float = 0.0
    shape: str = "copilot"
    store: str | None = None
    """A --store value: a SQLite file, a folder (for a new file in it) or a
    postgresql:// URL; None: a new file in a temporary folder."""
    turn_timeout_s: float = TURN_TIMEOUT_S
    url: str | None = None
    token: str | None = attrs.field(default=None, repr=False)
    connections: int | None = None
    rate: float = SERVER_RATE * 0.9
    burst: int = int(SERVER_BURST * 0.9)
    shards: int | None = None
    """In process through a sharded host of this many shards (Ray), on --store."""
    ray_address: str | None = None

    @property
    def scripted_s(self) -> float:
        """The scripted provider's own time per turn: the gaps between its deltas."""
        return max(self.deltas - 1, 0) * self.delta_ms / 1000

    def connection_count(self) -> int:
        if self.connections is not None:
            return min(self.connections, self.chats)
        return min(self.chats, max(MAX_CONNECTIONS, math.ceil(self.chats / CHATS_PER_CONNECTION)))


@attrs.frozen(kw_only=True)
class LoadReport:
    mode: str  # "in-process" or "remote"
    chats: int
    turns_requested: int
    turns_completed: int
    seconds: float
    turns_per_s: float
    latency_ms_p50: float
    latency_ms_p95: float
    latency_ms_p99: float
    host_overhead_ms_p50: float
    host_overhead_ms_p95: float
    host_overhead_ms_p99: float
    peak_rss_mb: float
    bytes_per_idle_session: float | None = None
    resident_sessions: int | None = None
    connections: int | None = None
    frames_received: int | None = None
    store: str | None = None
    """Where the in-process run's store is; None: a temporary file, removed after
    the run (or, remotely, the server's own)."""
    store_created: bool = False
    violations: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.violations


@attrs.define
class ChatRecord:
    """What one chat did and what came back; filled by a driver, judged by check_invariants."""

    index: int
    prompts: list[str] = attrs.field(factory=list)
    outcomes: list[str] = attrs.field(factory=list)
    stored: list[tuple[str, str | None, str | None]] = attrs.field(factory=list)
    active: bool = False
    pending: int = 0
    wire: list[str] = attrs.field(factory=list)


class ChatTarget(Protocol):
    async def turn(self, prompt: str) -> str:
        """Run one turn; its outcome: complete, cancelled, error, rejected or lost.

        Raises:
            TimeoutError: not ended within the run's per-turn timeout.
        """
        ...


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, round(q) - 1))]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss() -> int | None:
    """This process's resident set now, in bytes (Linux); None elsewhere."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def prompt_for(chat_index: int, turn_index: int) -> str:
    return f"chat {chat_index} turn {turn_index}"


async def run_chat(
    target: ChatTarget,
    record: ChatRecord,
    config: LoadConfig,
    latencies: list[float],
    progress: Callable[[], None],
) -> None:
    """One chat's turns, one after another; both drivers run this.

    With a think time the chats' first turns are spread evenly over one think
    time, as users arrive: the offered load is then steady (about chats /
    (think time + turn time)) rather than every chat's first turn at once.
    A turn that does not end within the timeout (or ends otherwise than
    complete) ends the chat's run: later prompts would only queue behind it."""
    for turn in range(config.turns):
        if config.think_ms:
            share = 1.0 if turn else record.index / config.chats
            await asyncio.sleep(share * config.think_ms / 1000)
        prompt = prompt_for(record.index, turn)
        record.prompts.append(prompt)
        started = time.perf_counter()
        try:
            outcome = await target.turn(prompt)  # each target keeps the per-turn timeout
        except TimeoutError:
            outcome = "timeout"
        record.outcomes.append(outcome)
        progress()
        if outcome != "complete":
            return
        latencies.append(time.perf_counter() - started)


def check_invariants(records: list[ChatRecord], config: LoadConfig) -> list[str]:
    """The run's violations, from what the chats did and what was stored."""
    violations: list[str] = []
    failed = [(r.index, t, o) for r in records for t, o in enumerate(r.outcomes) if o != "complete"]
    unsent = sum(config.turns - len(r.prompts) for r in records)
    if failed:
        index, turn, outcome = failed[0]
        violations.append(
            f"{len(failed)} turns did not complete (first: chat {index} turn {turn}: {outcome})"
        )
    if unsent:
        violations.append(f"{unsent} turns were never sent (their chat stopped at a failed turn)")
    per_chat: list[str] = []
    for record in records:
        expected = [(p, echo_reply(p), "complete") for p in record.prompts]
        if record.active or any(state is None for _, _, state in record.stored):
            per_chat.append(f"chat {record.index}: a turn was left active")
        if len(record.stored) != len(record.prompts):
            per_chat.append(
                f"chat {record.index}: {len(record.stored)} turns stored,"
                f" {len(record.prompts)} sent"
            )
        elif record.stored != expected:
            per_chat.append(f"chat {record.index}: stored turns differ from what was sent")
        if record.pending:
            per_chat.append(f"chat {record.index}: {record.pending} messages left pending")
        per_chat.extend(f"chat {record.index}: {problem}" for problem in record.wire)
    violations.extend(per_chat[:MAX_LISTED])
    if len(per_chat) > MAX_LISTED:
        violations.append(f"... and {len(per_chat) - MAX_LISTED} more")
    return violations


def build_report(
    config: LoadConfig,
    mode: str,
    records: list[ChatRecord],
    latencies: list[float],
    seconds: float,
    **extra: Any,
) -> LoadReport:
    millis = [latency * 1000 for latency in latencies]
    overhead = [max(0.0, latency - config.scripted_s) * 1000 for latency in latencies]
    completed = sum(r.outcomes.count("complete") for r in records)
    return LoadReport(
        mode=mode,
        chats=config.chats,
        turns_requested=config.chats * config.turns,
        turns_completed=completed,
        seconds=seconds,
        turns_per_s=completed / seconds if seconds else 0.0,
        latency_ms_p50=percentile(millis, 50),
        latency_ms_p95=percentile(millis, 95),
        latency_ms_p99=percentile(millis, 99),
        host_overhead_ms_p50=percentile(overhead, 50),
        host_overhead_ms_p95=percentile(overhead, 95),
        host_overhead_ms_p99=percentile(overhead, 99),
        peak_rss_mb=peak_rss_mb(),
        violations=tuple(check_invariants(records, config)),
        **extra,
    )


# -- in-process ------------------------------------------------------------------------------
class LocalChat:
    """A chat of the in-process host, driven through its asyncio surface."""

    def __init__(self, chat: AsyncChat, timeout: float) -> None:
        self.chat = chat
        self.timeout = timeout

    async def turn(self, prompt: str) -> str:
        try:
            handle = await self.chat.send(prompt, timeout=self.timeout)
            outcome = await handle.outcome(timeout=self.timeout)
        except AgentHostError:  # the call failed (a sharded host's shard died under it)
            return "lost"
        return str(outcome.state.value)


@attrs.define
class _LocalRun:
    session_ids: list[str]
    seconds: float
    bytes_per_idle_session: float | None
    resident: int


async def _drive_local(
    host: Host,
    config: LoadConfig,
    records: list[ChatRecord],
    latencies: list[float],
    progress: Callable[[], None],
) -> _LocalRun:
    gc.collect()
    before = current_rss()
    ahost = host.aio
    # all at once, so each waits behind the others: the turn's timeout, not a call's
    wait = config.turn_timeout_s
    creating = (ahost.create_session(timeout=wait) for _ in range(config.chats))
    sessions = await asyncio.gather(*creating)
    chats: list[AsyncChat] = await asyncio.gather(*(s.chat(timeout=wait) for s in sessions))
    targets = [LocalChat(chat, config.turn_timeout_s) for chat in chats]
    started = time.perf_counter()
    pairs = zip(targets, records, strict=True)
    await asyncio.gather(*(run_chat(t, r, config, latencies, progress) for t, r in pairs))
    seconds = time.perf_counter() - started
    # Every session is resident (idle release is RESIDENT_S away) and idle now.
    gc.collect()
    after = current_rss()
    counters = await ahost.counters()
    resident = counters.get("resident", 0)
    per_session = None
    if before is not None and after is not None and resident:
        per_session = max(0, after - before) / resident
    return _LocalRun([s.id for s in sessions], seconds, per_session, resident)


def store_of(config: LoadConfig, scratch: Path) -> str | Path:
    """The store a run writes: the one given, or a new file in the folder given
    (a temporary one by default)."""
    if config.store is None or Path(config.store).is_dir():
        folder = Path(config.store) if config.store else scratch
        return folder / f"load-{int(time.time() * 1000)}.db"
    return config.store


def read_store(spec: str | Path, session_ids: list[str], records: list[ChatRecord]) -> None:
    """Fill the records from the store, read as another process would after the host stopped."""
    store = store_from_spec(spec, create=False)
    store.open()
    try:
        for record, session_id in zip(records, session_ids, strict=True):
            record.stored = [(u, a, state) for u, a, state in store.turn_states(session_id)]
            record.pending = store.pending_count(session_id)
    finally:
        store.close()


def run_load(
    config: LoadConfig,
    progress: Callable[[], None] = lambda: None,
    provider: ScriptedProvider | None = None,
) -> LoadReport:
    """The in-process run. Bytes per resident idle session: the growth of this
    process's resident set from before the sessions were created to after
    their last turns ended (each after a full collection), divided by the
    sessions then resident. It includes the driver's own per-chat records and
    allocator slack the turns left behind, so it is an upper bound."""
    with tempfile.TemporaryDirectory(prefix="agenthost-load-") as scratch:
        spec = store_of(config, Path(scratch))
        provider = provider or ScriptedProvider(
            shape=config.shape,  # type: ignore[arg-type]
            echo_deltas=config.deltas,
            delta_s=config.delta_ms / 1000,
        )
        try:
            if config.shards is not None:
                host = start_shards(config, str(spec))
                location, created = str(spec), False
            else:
                store = store_from_spec(spec)
                host = Host.start(
                    store=store, providers={"scripted": provider}, idle_release_s=RESIDENT_S
                )
                location, created = store.location, store.created
        except AgentHostError as error:
            raise StoreRefused(error) from None
        records = [ChatRecord(index=i) for i in range(config.chats)]
        latencies: list[float] = []
        try:
            run = loops.run(_drive_local(host, config, records, latencies, progress))
        finally:
            host.stop(timeout=60)
        read_store(spec, run.session_ids, records)
    return build_report(
        config,
        "in-process",
        records,
        latencies,
        run.seconds,
        bytes_per_idle_session=run.bytes_per_idle_session,
        resident_sessions=run.resident,
        store=None if config.store is None else location,
        store_created=created,
    )


def start_shards(config: LoadConfig, spec: str) -> Host:
    """A sharded host of `config.shards` shards on Ray over the store `spec`, each
    serving the scripted provider as the run asks.

    Raises:
        AgentHostError: a store the shards cannot share (SQLite), or no Ray.
    """
    from agenthost.shards import ShardOptions, scripted_providers
    from agenthost.shards.ray_shards import start_sharded
    from agenthost.shards.serving import check_shared_store

    check_shared_store(spec)
    options = ShardOptions(
        store=spec,
        providers=scripted_providers(config.deltas, config.delta_ms, config.shape),
        idle_release_s=RESIDENT_S,
    )
    assert config.shards is not None
    return start_sharded(options, config.shards, ray_address=config.ray_address)
