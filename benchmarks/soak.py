"""A soak: users arriving and leaving through a real `agenthost serve`, for minutes.

`python -m benchmarks soak [--minutes 20] [--users 300] [--out FOLDER] [--port P]`
starts `agenthost serve` on loopback (a new SQLite store, the scripted provider
at 10 deltas x 50 ms, ten identities) and drives it with simulated users, each
a loop of: connect and initialize (a new clientId each time), call
`listSessions` (as a sidebar would), reopen one of its own latest sessions
(while it has fewer than 12 turns) or create one, subscribe to its chat, run
1-5 paced turns of ~100 KB messages, sometimes queueing a
message, steering, dispatching a second turn while one runs (it is queued
under its id), cancelling, or dropping the connection mid-turn; then leave
and come back later.

Every `--sample-s` (10 s) it samples the server: turns/s (turnComplete the
clients saw), RSS, open files, threads, its live sessions, connections and
chat channels (/metrics), and the latencies of listSessions, subscribe and a
turn (p50/p95 of the window). After the load it keeps sampling while the
server goes idle (`--idle-s`), then reads the store back: every turn a client
saw complete must be there, complete. It prints a table and the verdicts, and
writes soak.png (matplotlib, the `bench` extra) into `--out` (a new temporary
folder by default; never into the tree).

Verdicts (issue 19): turns/s in the last part of the load at least 0.9x the
first after warm-up; RSS grew less than 100 MB over the load's second half
(its level: the median of the last tenth of the load against the median of
the tenth from its half on, so one sample's swing is not taken for growth;
the second half's peak is printed beside it);
idle RSS within 150 MB of the server's start; no turn a client saw complete
lost. `--minutes 1` is the short mode a test runs.
"""

import argparse
import asyncio
import contextlib
import json
import os
import random
import secrets
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import attrs

from agenthost.server.load_remote import AhpConnection, ConnectionLost, RemoteError

IDENTITIES = 10
DELTAS = 10
DELTA_S = 0.05
TURN_WAIT_S = 60.0
CALL_WAIT_S = 30.0
RATE, BURST = 150.0, 300  # below the server's per-connection limits (200/s, 400)
GROWTH_LIMIT_MB = 100.0
IDLE_LIMIT_MB = 150.0
KEPT_THROUGHPUT = 0.9
CALLS = ("listSessions", "subscribe", "turn")
MINE = 5  # a user returns to one of its latest five sessions...
LONG = 12  # ...while it has fewer than twelve turns


@attrs.frozen(kw_only=True)
class SoakConfig:
    minutes: float = 20.0
    users: int = 300
    sample_s: float = 10.0
    idle_s: float = 120.0
    message_bytes: int = 100_000
    port: int = 0
    out: Path | None = None
    seed: int = 1


@attrs.define
class Sample:
    """One look at the server: process figures and what the window saw."""

    t: float
    rss_mb: float
    fds: int
    threads: int
    cpu_s: float
    gauges: dict[str, float]
    turns: int
    latencies: dict[str, tuple[float, float]]  # call -> (p50, p95) in ms
    load: bool

    def turns_per_s(self, window_s: float) -> float:
        return self.turns / window_s


@attrs.define
class Tally:
    """What the users saw, shared by all of them (one asyncio loop)."""

    completed: set[tuple[str, str]] = attrs.field(factory=set)  # (chat id, turn id)
    window_turns: int = 0
    window_calls: dict[str, list[float]] = attrs.field(factory=lambda: {c: [] for c in CALLS})
    outcomes: Counter[str] = attrs.field(factory=Counter)
    cancels: Counter[str] = attrs.field(factory=Counter)
    errors: Counter[str] = attrs.field(factory=Counter)

    def took(self, call: str, started: float) -> None:
        self.window_calls[call].append((time.monotonic() - started) * 1000)


class SoakChat:
    """A chat a user follows on its connection: which of its turns ended how."""

    def __init__(self, chat_id: str, tally: Tally) -> None:
        self.chat_id = chat_id
        self.tally = tally
        self.ended: dict[str, asyncio.Future[str]] = {}
        self.from_queued: dict[str, str] = {}  # queued message id -> the turn it became

    def ending(self, turn_id: str) -> "asyncio.Future[str]":
        if turn_id not in self.ended:
            self.ended[turn_id] = asyncio.get_running_loop().create_future()
        return self.ended[turn_id]

    def on_action(self, params: dict[str, Any]) -> None:
        action = params.get("action") or {}
        kind = action.get("type")
        turn_id = str(action.get("turnId"))
        reason = params.get("rejectionReason")
        if reason is not None:
            if kind == "chat/turnCancelled":
                self.tally.cancels[_reason_kind(reason)] += 1
            elif kind == "chat/turnStarted":
                self._end(turn_id, "rejected")
            return
        if kind == "chat/turnStarted" and action.get("queuedMessageId"):
            self.from_queued[str(action["queuedMessageId"])] = turn_id
        elif kind == "chat/turnComplete":
            self.tally.completed.add((self.chat_id, turn_id))
            self.tally.window_turns += 1
            self._end(turn_id, "complete")
        elif kind == "chat/turnCancelled":
            if params.get("origin"):
                self.tally.cancels["cancelled"] += 1
            self._end(turn_id, "cancelled")
        elif kind == "chat/error":
            self._end(turn_id, "error")

    def _end(self, turn_id: str, how: str) -> None:
        future = self.ending(turn_id)
        if not future.done():
            future.set_result(how)

    def connection_lost(self) -> None:
        for future in self.ended.values():
            if not future.done():
                future.set_result("lost")


def _reason_kind(reason: str) -> str:
    """A cancel's rejectionReason, without the ids in it."""
    for kind in ("already ended", "is not running", "neither running nor queued"):
        if kind in reason:
            return f"refused: {kind}"
    return f"refused: {reason[:40]}"


class User:
    """One simulated user: arrives, chats, leaves, comes back."""

    def __init__(self, number: int, url: str, token: str, config: SoakConfig, tally: Tally) -> None:
        self.number = number
        self.url = url
        self.token = token
        self.config = config
        self.tally = tally
        self.random = random.Random(config.seed * 100_003 + number)
        self.visits = 0
        self.mine: list[str] = []  # the sessions it created, latest last (its sidebar's top)
        filler = "lorem ipsum dolor sit amet " * (config.message_bytes // 27 + 1)
        self.filler = filler[: config.message_bytes]

    def text(self) -> str:
        return f"user {self.number} {uuid.uuid4().hex} " + self.filler

    async def run(self, http: aiohttp.ClientSession, until: float) -> None:
        await asyncio.sleep(self.random.uniform(0, 10))  # arrivals spread over a warm-up
        while time.monotonic() < until:
            try:
                await self.visit(http, until)
            except (ConnectionLost, RemoteError, aiohttp.ClientError, TimeoutError) as error:
                what = type(error).__name__
                if isinstance(error, RemoteError):  # which refusal: the code and its words
                    what = f"{what} {error}"[:100]
                self.tally.errors[what] += 1
            await asyncio.sleep(self.random.uniform(0.5, 3.0))  # away

    async def visit(self, http: aiohttp.ClientSession, until: float) -> None:
        self.visits += 1
        headers = {"Authorization": f"Bearer {self.token}"}
        ws = await asyncio.wait_for(
            http.ws_connect(self.url, headers=headers, max_msg_size=0), CALL_WAIT_S
        )
        connection = AhpConnection(ws, RATE, BURST)
        try:
            client_id = f"soak-{self.number}-{self.visits}-{uuid.uuid4().hex[:6]}"
            init = {"channel": "ahp-root://", "protocolVersions": ["1.1.0"], "clientId": client_id}
            await connection.call("initialize", init, CALL_WAIT_S)
            chat = await self.open_chat(connection)
            for _ in range(self.random.randint(1, 5)):
                if time.monotonic() >= until or not await self.turn(connection, chat):
                    return
                await asyncio.sleep(self.random.uniform(0.2, 1.0))  # thinking
        finally:
            await connection.close()

    async def open_chat(self, connection: AhpConnection) -> SoakChat:
        started = time.monotonic()
        await connection.call("listSessions", {"limit": 20}, CALL_WAIT_S)  # the sidebar
        self.tally.took("listSessions", started)
        # A user goes back to one of its own latest conversations while it is
        # short (listSessions pages oldest first: picking from its first page sent
        # half of all turns to the same 200 sessions, whose snapshots grew to MBs).
        recent = self.mine[-MINE:]
        if recent and self.random.random() < 0.5:
            session = self.random.choice(recent)
            state = (await connection.call("subscribe", {"channel": session}, CALL_WAIT_S))[
                "snapshot"
            ]["state"]
            uri = state["defaultChat"]
        else:
            session = f"ahp-session:/{uuid.uuid4()}"
            created = await connection.call("createSession", {"channel": session}, CALL_WAIT_S)
            uri = created["state"]["defaultChat"]
            self.mine.append(session)
        chat = SoakChat(uri.removeprefix("ahp-chat:/"), self.tally)
        connection.chats[uri] = chat  # type: ignore[assignment]
        started = time.monotonic()
        snapshot = (await connection.call("subscribe", {"channel": uri}, CALL_WAIT_S))["snapshot"]
        self.tally.took("subscribe", started)
        if len(snapshot["state"].get("turns") or ()) >= LONG:
            self.mine.remove(session)  # long enough: the next visit starts a new one
        active = (snapshot["state"].get("activeTurn") or {}).get("id")
        if active:  # left running by a dropped connection: let it end
            await _wait(chat.ending(active))
        return chat

    async def turn(self, connection: AhpConnection, chat: SoakChat) -> bool:
        """One turn and what the user does meanwhile; False once it dropped the connection."""
        uri = f"ahp-chat:/{chat.chat_id}"
        turn_id = uuid.uuid4().hex
        started = time.monotonic()
        action = {"type": "chat/turnStarted", "turnId": turn_id, "message": {"text": self.text()}}
        await connection.dispatch(uri, action)
        also: list[asyncio.Future[str]] = []
        roll = self.random.random()
        if roll < 0.05:  # leave mid-turn
            await asyncio.sleep(self.random.uniform(0, 0.4))
            self.tally.outcomes["dropped"] += 1
            return False
        if roll < 0.20:
            await asyncio.sleep(self.random.uniform(0, 0.3))
            pending = uuid.uuid4().hex
            queued = {"kind": "queued", "id": pending, "message": {"text": self.text()}}
            await connection.dispatch(uri, {"type": "chat/pendingMessageSet", **queued})
            self.tally.outcomes["queued"] += 1
            also.append(asyncio.ensure_future(self._queued_end(chat, pending)))
        elif roll < 0.30:
            await asyncio.sleep(self.random.uniform(0, 0.3))
            steer = {"kind": "steering", "id": uuid.uuid4().hex, "message": {"text": "faster"}}
            await connection.dispatch(uri, {"type": "chat/pendingMessageSet", **steer})
            self.tally.outcomes["steered"] += 1
        elif roll < 0.40:
            second = uuid.uuid4().hex
            busy = {"type": "chat/turnStarted", "turnId": second, "message": {"text": self.text()}}
            await connection.dispatch(uri, busy)
            self.tally.outcomes["second turn"] += 1
            also.append(chat.ending(second))
        elif roll < 0.50:
            await asyncio.sleep(self.random.uniform(0, 0.6))
            await connection.dispatch(uri, {"type": "chat/turnCancelled", "turnId": turn_id})
        how = await _wait(chat.ending(turn_id))
        self.tally.outcomes[how] += 1
        if how == "complete":
            self.tally.took("turn", started)
        for more in also:
            self.tally.outcomes[f"then {await _wait(more)}"] += 1
        return how != "lost"

    async def _queued_end(self, chat: SoakChat, pending: str) -> str:
        """How the turn a queued message became ended (it may be removed unrun)."""
        deadline = time.monotonic() + TURN_WAIT_S
        while pending not in chat.from_queued:  # its turnStarted has not come yet
            if time.monotonic() > deadline:
                return "queued, never ran"
            await asyncio.sleep(0.05)
        return await _wait(chat.ending(chat.from_queued[pending]))


async def _wait(future: "asyncio.Future[str]") -> str:
    try:
        return await asyncio.wait_for(asyncio.shield(future), TURN_WAIT_S)
    except TimeoutError:
        return "timed out"


# -- the server ------------------------------------------------------------------------------
@attrs.frozen
class Server:
    url: str
    tokens: tuple[str, ...]
    pid: int
    store: Path


@contextlib.contextmanager
def serving(folder: Path, port: int) -> Iterator[Server]:
    """`agenthost serve` on loopback: ten identities, the paced scripted provider."""
    tokens = tuple(secrets.token_urlsafe(24) for _ in range(IDENTITIES))
    (folder / "tokens").write_text("".join(f"{t} soak-{i}\n" for i, t in enumerate(tokens)))
    manifest = folder / "providers.toml"
    manifest.write_text(
        f'[providers.scripted]\nkind = "scripted"\necho_deltas = {DELTAS}\ndelta_s = {DELTA_S}\n'
    )
    store = folder / "agenthost.db"
    command = [sys.executable, "-c", "from agenthost.server.cli import main; main()", "serve"]
    command += ["--port", str(port), "--token-file", str(folder / "tokens")]
    command += ["--store", str(store), "--providers", str(manifest)]
    log = (folder / "server.log").open("w")
    server = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True
    )
    try:
        assert server.stdout is not None
        url = None
        for line in server.stdout:  # the first lines say where it serves
            if "serving AHP at " in line:
                url = line.split("serving AHP at ", 1)[1].split()[0]
                break
        if url is None:
            raise RuntimeError(f"the server did not start: see {folder / 'server.log'}")
        yield Server(url=url, tokens=tokens, pid=server.pid, store=store)
    finally:
        server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(60)
        if server.poll() is None:
            server.kill()
            server.wait(10)
        log.close()


def process_figures(pid: int) -> tuple[float, int, int, float]:
    """RSS (MB), open files, threads and CPU seconds of a process (Linux /proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss_mb = int(fields["VmRSS"].split()[0]) / 1024
    threads = int(fields["Threads"])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu_s = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    return rss_mb, fds, threads, cpu_s


async def gauges(http: aiohttp.ClientSession, url: str) -> dict[str, float]:
    base = url.replace("ws", "http", 1).removesuffix("ahp")
    try:
        async with http.get(base + "metrics") as response:
            text = await response.text()
    except aiohttp.ClientError:
        return {}
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("agenthost_live_sessions", "agenthost_connections", "agenthost_chat_channels"):
            found[name.removeprefix("agenthost_")] = float(value)
        elif name == "agenthost_asyncio_tasks":
            found["tasks"] = float(value)
    return found


def _p(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def sample(
    http: aiohttp.ClientSession, server: Server, tally: Tally, started: float, load: bool
) -> Sample:
    rss_mb, fds, threads, cpu_s = process_figures(server.pid)
    calls, tally.window_calls = tally.window_calls, {c: [] for c in CALLS}
    turns, tally.window_turns = tally.window_turns, 0
    return Sample(
        t=time.monotonic() - started,
        rss_mb=rss_mb,
        fds=fds,
        threads=threads,
        cpu_s=cpu_s,
        gauges=await gauges(http, server.url),
        turns=turns,
        latencies={c: (_p(v, 0.5), _p(v, 0.95)) for c, v in calls.items()},
        load=load,
    )


# -- the run ---------------------------------------------------------------------------------
@attrs.frozen
class SoakResult:
    samples: list[Sample]
    tally: Tally
    lost: list[tuple[str, str]]
    verdicts: dict[str, tuple[bool, str]]
    plot: Path | None
    out: Path


async def drive(config: SoakConfig, server: Server, out: Path) -> tuple[list[Sample], Tally]:
    tally = Tally()
    samples: list[Sample] = []
    started = time.monotonic()
    until = started + config.minutes * 60
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        samples.append(await sample(http, server, tally, started, load=True))
        users = [
            User(n, server.url, server.tokens[n % IDENTITIES], config, tally)
            for n in range(config.users)
        ]
        tasks = [asyncio.ensure_future(user.run(http, until)) for user in users]
        while time.monotonic() < until:
            await asyncio.sleep(min(config.sample_s, max(until - time.monotonic(), 0.01)))
            samples.append(await sample(http, server, tally, started, load=True))
        _, pending = await asyncio.wait(tasks, timeout=TURN_WAIT_S + CALL_WAIT_S)
        for task in pending:
            task.cancel()
        idle_until = time.monotonic() + config.idle_s
        while time.monotonic() < idle_until:
            await asyncio.sleep(min(config.sample_s, idle_until - time.monotonic()))
            samples.append(await sample(http, server, tally, started, load=False))
    return samples, tally


def lost_turns(store: Path, completed: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """Turns a client saw complete that the store does not hold as complete."""
    with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        return [
            (chat_id, turn_id)
            for chat_id, turn_id in sorted(completed)
            if db.execute(
                "SELECT state FROM turns WHERE chat_id = ? AND id = ?", (chat_id, turn_id)
            ).fetchone()
            != ("complete",)
        ]


def verdicts(
    samples: list[Sample], config: SoakConfig, lost: list[tuple[str, str]]
) -> dict[str, tuple[bool, str]]:
    load = [s for s in samples[1:] if s.load]
    warm = max(1, len(load) // 10)  # the first tenth is warm-up
    part = max(1, len(load) // 10)  # first and last tenth after it, compared
    rate = [s.turns / config.sample_s for s in load]
    first = statistics.mean(rate[warm : warm + part]) if len(rate) > warm else float("nan")
    last = statistics.mean(rate[-part:]) if rate else float("nan")
    half = load[len(load) // 2 :] or load
    level = [s.rss_mb for s in half] or [float("nan")]
    growth = statistics.median(level[-part:]) - statistics.median(level[:part])
    peak = max(level) - statistics.median(level[:part])
    start = samples[0].rss_mb
    idle = samples[-1].rss_mb
    return {
        "turns/s kept": (
            last >= KEPT_THROUGHPUT * first,
            f"last {last:.1f} vs first {first:.1f} turns/s ({last / first:.2f}x; >= 0.9x)",
        ),
        "RSS levels off": (
            growth < GROWTH_LIMIT_MB,
            f"{growth:+.0f} MB over the load's second half (< {GROWTH_LIMIT_MB:.0f};"
            f" its peak {peak:+.0f} MB)",
        ),
        "RSS back when idle": (
            idle - start < IDLE_LIMIT_MB,
            f"{start:.0f} MB at start, {idle:.0f} MB idle (< +{IDLE_LIMIT_MB:.0f})",
        ),
        "no turn lost": (
            not lost,
            f"{len(lost)} of the turns clients saw complete missing from the store",
        ),
    }


def plot(samples: list[Sample], config: SoakConfig, out: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    t = [s.t / 60 for s in samples]
    figure, axes = plt.subplots(4, 1, figsize=(10, 12), sharex=True)
    axes[0].plot(t, [s.turns / config.sample_s for s in samples])
    axes[0].set_ylabel("turns/s")
    axes[1].plot(t, [s.rss_mb for s in samples])
    axes[1].set_ylabel("server RSS (MB)")
    axes[2].plot(t, [s.fds for s in samples], label="open files")
    axes[2].plot(t, [s.threads for s in samples], label="threads")
    for name in ("connections", "chat_channels", "live_sessions", "tasks"):
        axes[2].plot(t, [s.gauges.get(name, float("nan")) for s in samples], label=name)
    axes[2].legend(fontsize="small")
    for call in CALLS:
        axes[3].plot(t, [s.latencies[call][0] for s in samples], label=f"{call} p50")
        axes[3].plot(t, [s.latencies[call][1] for s in samples], "--", label=f"{call} p95")
    axes[3].set_yscale("log")
    axes[3].set_ylabel("latency (ms)")
    axes[3].legend(fontsize="small", ncol=3)
    axes[3].set_xlabel("minutes (load, then idle)")
    end = next((s.t / 60 for s in samples if not s.load), None)
    for axis in axes:
        axis.grid(alpha=0.3)
        if end is not None:
            axis.axvline(end, color="grey", linestyle=":")
    figure.suptitle(f"soak: {config.users} users, {config.minutes:g} min, then idle")
    figure.tight_layout()
    path = out / "soak.png"
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def run(config: SoakConfig) -> SoakResult:
    out = config.out or Path(tempfile.mkdtemp(prefix="agenthost-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="agenthost-soak-server-") as scratch:
        folder = Path(scratch)
        with serving(folder, config.port) as server:
            samples, tally = asyncio.run(drive(config, server, out))
            lost = lost_turns(server.store, tally.completed)
        (out / "server.log").write_text((folder / "server.log").read_text()[-200_000:])
    found = verdicts(samples, config, lost)
    return SoakResult(
        samples=samples,
        tally=tally,
        lost=lost,
        verdicts=found,
        plot=plot(samples, config, out),
        out=out,
    )


def report(result: SoakResult, config: SoakConfig) -> str:
    lines = [
        f"{'min':>5} {'turns/s':>8} {'RSS MB':>7} {'fds':>5} {'thr':>4} {'CPU%':>5}"
        f" {'conns':>6} {'chans':>6} {'live':>5} {'tasks':>6} {'list p50/p95':>14}"
        f" {'sub p50/p95':>14} {'turn p50/p95':>14}"
    ]
    previous = None
    for s in result.samples:
        cpu = 100 * (s.cpu_s - previous.cpu_s) / (s.t - previous.t) if previous else 0.0
        previous = s
        calls = " ".join(
            f"{s.latencies[c][0]:>6.0f}/{s.latencies[c][1]:<7.0f}" for c in CALLS
        ).replace("nan", "  -")
        lines.append(
            f"{s.t / 60:>5.1f} {s.turns / config.sample_s:>8.1f} {s.rss_mb:>7.0f} {s.fds:>5}"
            f" {s.threads:>4} {cpu:>5.0f} {s.gauges.get('connections', 0):>6.0f}"
            f" {s.gauges.get('chat_channels', 0):>6.0f} {s.gauges.get('live_sessions', 0):>5.0f}"
            f" {s.gauges.get('tasks', 0):>6.0f} {calls}{'' if s.load else '  idle'}"
        )
    tally = result.tally
    lines.append(f"turns seen complete: {len(tally.completed)}; outcomes: {dict(tally.outcomes)}")
    lines.append(f"cancels: {dict(tally.cancels)}; visit errors: {dict(tally.errors)}")
    for name, (ok, detail) in result.verdicts.items():
        lines.append(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    lines.append(f"plot: {result.plot or 'none (pip install .[bench] for matplotlib)'}")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks soak")
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--users", type=int, default=300)
    parser.add_argument("--sample-s", type=float, default=None)
    parser.add_argument("--idle-s", type=float, default=None)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="where soak.png goes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    short = args.minutes <= 2
    config = SoakConfig(
        minutes=args.minutes,
        users=args.users,
        sample_s=args.sample_s or (5.0 if short else 10.0),
        idle_s=args.idle_s if args.idle_s is not None else (10.0 if short else 120.0),
        port=args.port,
        out=args.out,
    )
    result = run(config)
    print(report(result, config))
    if args.json:
        print(
            json.dumps(
                {
                    "verdicts": {k: ok for k, (ok, _) in result.verdicts.items()},
                    "completed": len(result.tally.completed),
                    "lost": len(result.lost),
                    "samples": [attrs.asdict(s) for s in result.samples],
                }
            )
        )
    if not all(ok for ok, _ in result.verdicts.values()):
        sys.exit(1)
