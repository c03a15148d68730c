"""The same chat workload on agenthost and on its peers, side by side; and the store
(benchmarks/peers_store.py).

The workload, per simulated chat: a session, a chat and a provider; a user
message goes in, the provider streams the reply as 10 deltas and a completion,
and they come out to a subscriber on the chat; 3 turns a chat, one after
another, all chats at once. Written four ways:

- agenthost: its public surface (Host.start with the SQLite store in a
  temporary folder, ScriptedProvider(echo_deltas=10) with zero latency, one
  subscription per chat); a turn ends when its TurnCompleted reaches the
  subscriber, which is after the store committed it.
- pykka: a session, a chat and a provider ThreadingActor per chat, with tells.
- autogen: a session, a chat and a provider agent per chat on autogen-core's
  SingleThreadedAgentRuntime (benchmarks/peers_autogen.py; bench-only).
- asyncio: a floor that does nothing else: three tasks per chat joined by
  asyncio queues.

Every client is the same asyncio task per chat (send, then read the
subscriber until the completion), so only the middle differs. A size's
figure for one system comes from a child process of its own (clean memory
figures; a peer that cannot start its threads or takes too long cannot take
the run down): rounds of the workload after a small warm-up, turns/s as the
median of rounds (setup is timed apart), peak RSS over the RSS after the
warm-up. A child that exceeds the budget is stopped and reported "too slow";
so is a size a system was too slow for at a smaller size, or whose estimate
from that smaller size is over the budget. A size whose threads (estimated
from the warm-up) would take more than half of the free pids is reported
"cannot start" without being tried, so a peer never starves other processes
of threads.

The store: the same turn rows written three ways, as rows/s against raw
sqlite3 inserts in one transaction: SqliteStore ops committed in batches as
the StoreActor does, and the StoreActor itself (group commit, every write
acked after its commit).

Run: `python -m benchmarks peers [--chats 100,1000,5000] [--budget 60] [--json]`.
"""

import argparse
import asyncio
import contextlib
import gc
import importlib.util
import json
import logging
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import attrs
import pykka
import structlog
from rich.console import Console
from rich.table import Table

from agenthost.actors import Host
from agenthost.actors.aio import AsyncChat
from agenthost.messages.events import AssistantDelta, TurnCompleted
from agenthost.providers import ScriptedProvider
from agenthost.store import SqliteStore
from benchmarks import peers_store

TURNS = 3
DELTAS = 10
SYSTEMS = ("asyncio", "agenthost", "pykka", "autogen")
BASELINE = "agenthost"
DEFAULT_CHATS = (100, 1000)
DEFAULT_BUDGET_S = 60.0
WAIT_S = 120.0  # any single wait for a reply inside a workload
RUN_TIMEOUT_S = 3600.0  # all turns of one round (the parent's budget stops it much earlier)


# -- the messages the peers pass (dataclasses: autogen routes on them too) ------------------
@dataclass(frozen=True)
class Open:
    """Setup only: makes each actor or agent of a chat exist before the clock starts."""


@dataclass(frozen=True)
class UserText:
    text: str


@dataclass(frozen=True)
class ProviderSend:
    text: str


@dataclass(frozen=True)
class Delta:
    text: str


@dataclass(frozen=True)
class Completed:
    pass


Send = Callable[[str], Awaitable[object]]
NextEvent = Callable[[], Awaitable[object]]


def prompt(chat: int, turn: int) -> str:
    """24 characters, so its echo ("echo: " + prompt) splits into exactly 10 deltas."""
    return f"chat {chat:08d} turn {turn:05d}"


def reply_chunks(text: str, deltas: int = DELTAS) -> list[str]:
    """The peers' provider: the scripted provider's echo, in `deltas` pieces."""
    reply = f"echo: {text}"
    size = -(-len(reply) // deltas)
    return [reply[i : i + size] for i in range(0, len(reply), size)]


# -- the client, the same for every system ----------------------------------------------
@attrs.define
class Tally:
    """What the subscribers saw, and how long setup and the turns took."""

    turns: int = 0
    deltas: int = 0
    setup_s: float = 0.0
    threads: int = 0
    run_s: float = 0.0


async def converse(
    index: int,
    send: Send,
    next_event: NextEvent,
    tally: Tally,
) -> None:
    """One chat's client: each turn, send, then read the subscriber up to the completion."""
    for turn in range(TURNS):
        await send(prompt(index, turn))
        while True:
            event = await next_event()
            if isinstance(event, Delta | AssistantDelta):
                tally.deltas += 1
            elif isinstance(event, Completed | TurnCompleted):
                tally.turns += 1
                break


async def run_clients(clients: Sequence[tuple[Send, NextEvent]], tally: Tally) -> None:
    """Every chat's client at once; setup is done, so the thread count is the run's."""
    tally.threads = threading.active_count()
    started = time.perf_counter()
    chats = (converse(i, send, next_event, tally) for i, (send, next_event) in enumerate(clients))
    await asyncio.wait_for(asyncio.gather(*chats), RUN_TIMEOUT_S)
    tally.run_s = time.perf_counter() - started


# -- (d) the floor: asyncio tasks and queues ----------------------------------------------
async def _asyncio_provider(inbox: asyncio.Queue[Any], chat: asyncio.Queue[Any]) -> None:
    while True:
        message = await inbox.get()
        for chunk in reply_chunks(message.text):
            chat.put_nowait(Delta(text=chunk))
        chat.put_nowait(Completed())


async def _asyncio_chat(
    inbox: asyncio.Queue[Any], provider: asyncio.Queue[Any], subscriber: asyncio.Queue[Any]
) -> None:
    while True:
        message = await inbox.get()
        if isinstance(message, UserText):
            provider.put_nowait(ProviderSend(text=message.text))
        else:
            subscriber.put_nowait(message)


async def _asyncio_session(inbox: asyncio.Queue[Any], chat: asyncio.Queue[Any]) -> None:
    while True:
        chat.put_nowait(await inbox.get())


def _queue_sender(inbox: asyncio.Queue[Any]) -> Send:
    async def send(text: str) -> None:
        inbox.put_nowait(UserText(text=text))

    return send


async def asyncio_chats(chats: int) -> Tally:
    tally = Tally()
    started = time.perf_counter()
    tasks = []
    clients: list[tuple[Send, NextEvent]] = []
    for _ in range(chats):
        session: asyncio.Queue[Any] = asyncio.Queue()
        chat: asyncio.Queue[Any] = asyncio.Queue()
        provider: asyncio.Queue[Any] = asyncio.Queue()
        subscriber: asyncio.Queue[Any] = asyncio.Queue()
        tasks += [
            asyncio.create_task(_asyncio_session(session, chat)),
            asyncio.create_task(_asyncio_chat(chat, provider, subscriber)),
            asyncio.create_task(_asyncio_provider(provider, chat)),
        ]
        clients.append((_queue_sender(session), subscriber.get))
    tally.setup_s = time.perf_counter() - started
    try:
        await run_clients(clients, tally)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return tally


# -- (a) agenthost, through its public surface ----------------------------------------------
def _chat_sender(chat: AsyncChat) -> Send:
    async def send(text: str) -> None:
        await chat.send(text, timeout=WAIT_S)

    return send


async def agenthost_chats(chats: int) -> Tally:
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="agenthost-peers-") as folder:
        started = time.perf_counter()
        host = Host.start(
            store=SqliteStore(Path(folder) / "bench.db"),
            providers={"scripted": ScriptedProvider(echo_deltas=DELTAS)},
        )
        try:
            sessions = await asyncio.gather(
                *(host.aio.create_session(timeout=WAIT_S) for _ in range(chats))
            )
            handles = await asyncio.gather(*(session.chat(timeout=WAIT_S) for session in sessions))
            clients: list[tuple[Send, NextEvent]] = []
            for chat in handles:
                subscription = await chat.subscribe(timeout=WAIT_S)
                events: AsyncIterator[object] = subscription.__aiter__()
                clients.append((_chat_sender(chat), events.__anext__))
            tally.setup_s = time.perf_counter() - started
            await run_clients(clients, tally)
        finally:
            host.stop()
    return tally


# -- (c) plain pykka ThreadingActors -------------------------------------------------------
class _PykkaProvider(pykka.ThreadingActor):
    def __init__(self, chat: pykka.ActorRef[Any]) -> None:
        super().__init__()
        self._chat = chat

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, ProviderSend):
            for chunk in reply_chunks(message.text):
                self._chat.tell(Delta(text=chunk))
            self._chat.tell(Completed())
        return None


class _PykkaChat(pykka.ThreadingActor):
    def __init__(self, subscriber: Callable[[object], None]) -> None:
        super().__init__()
        self._subscriber = subscriber

    def on_start(self) -> None:
        self._provider = _PykkaProvider.start(self.actor_ref)

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Open):
            return self._provider
        if isinstance(message, UserText):
            self._provider.tell(ProviderSend(text=message.text))
        else:
            self._subscriber(message)
        return None

    def on_stop(self) -> None:
        self._provider.stop()


class _PykkaSession(pykka.ThreadingActor):
    def __init__(self, subscriber: Callable[[object], None]) -> None:
        super().__init__()
        self._subscriber = subscriber

    def on_start(self) -> None:
        self._chat = _PykkaChat.start(self._subscriber)

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Open):
            return self._chat
        self._chat.tell(message)
        return None

    def on_stop(self) -> None:
        self._chat.stop()


def _pusher(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any]) -> Callable[[object], None]:
    """The subscriber an actor calls on its own thread: hands the event to the client's loop."""

    def push(event: object) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, event)

    return push


def _actor_sender(session: pykka.ActorRef[Any]) -> Send:
    async def send(text: str) -> None:
        session.tell(UserText(text=text))

    return send


async def pykka_chats(chats: int) -> Tally:
    tally = Tally()
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    sessions: list[pykka.ActorRef[Any]] = []
    try:
        clients: list[tuple[Send, NextEvent]] = []
        for _ in range(chats):
            subscriber: asyncio.Queue[Any] = asyncio.Queue()
            session = _PykkaSession.start(_pusher(loop, subscriber))
            sessions.append(session)
            clients.append((_actor_sender(session), subscriber.get))
        # each actor answers Open once its on_start ran: sessions, then chats, then providers
        level: list[Any] = list(sessions)
        while level:
            futures = [ref.ask(Open(), block=False) for ref in level]
            level = [child for child in (f.get(timeout=WAIT_S) for f in futures) if child]
        tally.setup_s = time.perf_counter() - started
        await run_clients(clients, tally)
    finally:
        stops = [session.stop(block=False) for session in sessions]
        for stop in stops:
            with contextlib.suppress(pykka.ActorDeadError):
                stop.get(timeout=WAIT_S)
    return tally


# -- (b) autogen-core -------------------------------------------------------------------
async def autogen_chats(chats: int) -> Tally:
    from benchmarks import peers_autogen

    return await peers_autogen.autogen_chats(chats)


def autogen_installed() -> bool:
    return importlib.util.find_spec("autogen_core") is not None


WORKLOADS: dict[str, Callable[[int], Coroutine[Any, Any, Tally]]] = {
    "asyncio": asyncio_chats,
    "agenthost": agenthost_chats,
    "pykka": pykka_chats,
    "autogen": autogen_chats,
}


def run_workload(system: str, chats: int) -> Tally:
    """Run the workload once on `system` with `chats` chats, in a fresh event loop."""
    return asyncio.run(WORKLOADS[system](chats))


# -- one measurement: a child process per system and size -------------------------------
def current_rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure(system: str, chats: int, rounds: int, budget_s: float) -> dict[str, Any]:
    """Runs in the child: warm up, then rounds until `rounds` or the budget is spent.

    The warm-up at 1 and 3 chats also tells the threads a chat costs; a size whose
    threads would not fit `thread_headroom()` is not tried (it returns only a "problem").
    """
    one, three = run_workload(system, 1), run_workload(system, 3)
    needed = one.threads + (three.threads - one.threads) * (chats - 1) // 2
    if needed > thread_headroom():
        return {"problem": f"cannot start (~{needed:,} threads)"}
    gc.collect()
    baseline = current_rss()
    rates, setups, threads = [], [], []
    started = time.monotonic()
    for _ in range(rounds):
        tally = run_workload(system, chats)
        if tally.turns != chats * TURNS or tally.deltas != chats * TURNS * DELTAS:
            raise RuntimeError(f"counted {tally.turns} turns and {tally.deltas} deltas")
        rates.append(tally.turns / tally.run_s)
        setups.append(tally.setup_s)
        threads.append(tally.threads)
        spent = time.monotonic() - started
        if spent + tally.setup_s + tally.run_s > budget_s:
            break
    return {
        "system": system,
        "chats": chats,
        "turns_per_s": statistics.median(rates),
        "setup_s": statistics.median(setups),
        "round_s": (time.monotonic() - started) / len(rates),
        "rounds": len(rates),
        "threads": max(threads),
        "peak_rss_delta": max(peak_rss() - baseline, 0),
    }


@attrs.frozen
class Outcome:
    system: str
    chats: int
    result: dict[str, Any] | None = None
    problem: str = ""  # "too slow", "cannot start: ...", "not installed"


def measure_in_child(system: str, chats: int, rounds: int, budget_s: float) -> Outcome:
    command = [sys.executable, "-m", "benchmarks.peers", "--child", system, str(chats)]
    command += ["--rounds", str(rounds), "--budget", str(budget_s)]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=budget_s + 30,  # a round that started inside the budget, plus setup
            cwd=Path(__file__).resolve().parent.parent,
        )
    except subprocess.TimeoutExpired:
        return Outcome(system, chats, problem=f"too slow (over {budget_s:.0f} s)")
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line.removeprefix("RESULT "))
            if "problem" in result:
                return Outcome(system, chats, problem=result["problem"])
            return Outcome(system, chats, result=result)
    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    if "can't start new thread" in last:
        return Outcome(system, chats, problem="cannot start (threads)")
    return Outcome(system, chats, problem=f"failed: {last[:80]}")


def thread_headroom() -> int:
    """Threads a peer may start: half of the pids still free (pid_max bounds the threads
    of every process at once), so a peer that needs more is not run and never starves
    other processes. (25,000 threads could not be started here; 15,000 could.)"""
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[1])
    return (pid_max - running) // 2


def compare(sizes: list[int], systems: list[str], rounds: int, budget_s: float) -> list[Outcome]:
    """Every system at every size, smallest size first; skips what cannot fit the budget."""
    outcomes: list[Outcome] = []
    last: dict[str, Outcome] = {}
    for chats in sizes:
        for system in systems:
            before = last.get(system)
            if system == "autogen" and not autogen_installed():
                outcome = Outcome(system, chats, problem="not installed (pip install .[bench])")
            elif before is not None and before.result is None:
                outcome = Outcome(
                    system, chats, problem=f"not run: {before.problem} at {before.chats:,}"
                )
            elif before is not None and before.result is not None:
                estimate = before.result["round_s"] * chats / before.chats
                if estimate > budget_s:
                    outcome = Outcome(system, chats, problem=f"too slow (est. {estimate:.0f} s)")
                else:
                    outcome = measure_in_child(system, chats, rounds, budget_s)
            else:
                outcome = measure_in_child(system, chats, rounds, budget_s)
            last[system] = outcome
            outcomes.append(outcome)
    return outcomes


# -- printing --------------------------------------------------------------------------
def print_peers(outcomes: list[Outcome], console: Console) -> None:
    for chats in sorted({o.chats for o in outcomes}):
        at_size = [o for o in outcomes if o.chats == chats]
        ours = next((o.result for o in at_size if o.system == BASELINE and o.result), None)
        table = Table(
            title=f"{chats:,} chats x {TURNS} turns x {DELTAS} deltas (turns/s: median of rounds)"
        )
        columns = ("system", "turns/s", "agenthost ÷ it", "setup", "peak RSS Δ", "per chat")
        for column in (*columns, "threads", "rounds"):
            table.add_column(column, justify="left" if column == "system" else "right")
        for outcome in at_size:
            result = outcome.result
            if result is None:
                table.add_row(outcome.system, outcome.problem, "", "", "", "", "", "")
                continue
            ratio = f"{ours['turns_per_s'] / result['turns_per_s']:.2f}x" if ours else "-"
            table.add_row(
                outcome.system,
                f"{result['turns_per_s']:,.0f}",
                ratio,
                f"{result['setup_s']:.2f} s",
                f"{result['peak_rss_delta'] / 2**20:,.1f} MiB",
                f"{result['peak_rss_delta'] / chats:,.0f} B",
                f"{result['threads']:,}",
                str(result["rounds"]),
            )
        console.print(table)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks peers", description=__doc__)
    parser.add_argument("--chats", default=",".join(map(str, DEFAULT_CHATS)), help="sizes")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds")
    parser.add_argument("--store-rows", type=int, default=20_000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("SYSTEM", "CHATS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if args.child:
        system, chats = args.child
        result = measure(system, int(chats), args.rounds, args.budget)
        print("RESULT " + json.dumps(result), flush=True)
        return
    sizes = sorted(int(size) for size in args.chats.split(","))
    systems = [s for s in SYSTEMS if s in args.systems.split(",")]
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)
    outcomes = compare(sizes, systems, args.rounds, args.budget)
    print_peers(outcomes, console)
    store = peers_store.compare_store(args.store_rows) if args.store_rows else {}
    if store:
        peers_store.print_store(store, args.store_rows, console)
    if args.json:
        print(
            json.dumps(
                {
                    "peers": [attrs.asdict(o) for o in outcomes],
                    "store_rows_per_s": store,
                }
            )
        )


if __name__ == "__main__":
    main(sys.argv[1:])
