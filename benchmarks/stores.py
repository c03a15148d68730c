"""`python -m benchmarks stores`: PostgreSQL against SQLite, as ratios.

Each measure runs on both stores in the same run, in alternating rounds
(medians of rounds); no targets, only ratios:
- turn rows written by store ops, committed in batches of MAX_BATCH (what the
  StoreActor does, without the actor): rows/s;
- the StoreActor's group commit: a Write a row, acked once committed; rows/s
  until the last ack;
- one owner's page of sessions (`list_sessions_page`, 20 rows) among few and
  among many other owners' sessions: µs a call, and their ratio (the listing
  should not grow with other owners), beside the whole-store `list_sessions`
  a server filtered before.
PostgreSQL runs in a fresh schema of --postgres (default: the test server),
dropped afterwards; where none answers, only SQLite is measured.
"""

import argparse
import contextlib
import logging
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import structlog
from rich.console import Console
from rich.table import Table

from agenthost.actors.protocol import Flush, Write
from agenthost.actors.runtime import Actor, handles
from agenthost.actors.store import MAX_BATCH, StoreActor
from agenthost.actors.threads import ThreadingRuntime
from agenthost.messages.state import SessionState
from agenthost.store import Store, store_from_spec
from agenthost.store.base import OWNER_KEY
from agenthost.store.records import SaveSession, SaveSessionState, SaveTurnStarted

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1/test"
WAIT_S = 120.0
SESSION_ID = "s" * 32
CHAT_ID = "c" * 32
PAGE = 20
MINE = 50


def turn_ops(rows: int) -> list[SaveTurnStarted]:
    return [
        SaveTurnStarted(
            session_id=SESSION_ID,
            chat_id=CHAT_ID,
            turn_id=f"turn-{i:08d}",
            seq=i,
            user_text=f"chat 0 turn {i}",
            started_at=1_700_000_000_000 + i,
        )
        for i in range(rows)
    ]


def with_session(store: Store) -> Store:
    """The store, opened, holding the session and chat the turn rows belong to."""
    store.open()
    store.apply(
        SaveSession(
            session_id=SESSION_ID, provider="scripted", title="", created_at=0, chat_ids=(CHAT_ID,)
        )
    )
    store.commit()
    return store


def batches(store: Store, ops: list[SaveTurnStarted]) -> float:
    """Store.apply per op, a commit every MAX_BATCH ops; seconds. Closes the store."""
    started = time.perf_counter()
    for i, op in enumerate(ops, 1):
        store.apply(op)
        if i % MAX_BATCH == 0:
            store.commit()
    store.commit()
    seconds = time.perf_counter() - started
    store.close()
    return seconds


class AckCounter(Actor):
    """Whoever waits for the acks: an agenthost actor, as a chat is (on a thread
    of its own here, so the pool's scheduling is not part of the figure)."""

    own_runtime = ThreadingRuntime()

    def __init__(self, expected: int, done: threading.Event) -> None:
        super().__init__()
        self._left = expected
        self._done = done

    @handles(int)
    def _acked(self, message: int) -> None:
        self._left -= 1
        if self._left == 0:
            self._done.set()


def group_commit(store: Store, ops: list[SaveTurnStarted]) -> float:
    """The StoreActor on an open store: a Write a row, until the last ack; seconds."""
    actor = StoreActor.start(store)
    done = threading.Event()
    acks = AckCounter.start(len(ops), done)
    try:
        started = time.perf_counter()
        for i, op in enumerate(ops):
            actor.tell(Write(op=op, ack_to=acks, ack=i))
        if not done.wait(WAIT_S):
            raise TimeoutError("the store did not ack every write")
        seconds = time.perf_counter() - started
        actor.ask(Flush(), timeout=WAIT_S)
    finally:
        actor.stop(timeout=WAIT_S)
        acks.stop(timeout=WAIT_S)
    return seconds


# -- where the stores live -------------------------------------------------------------------
Places = Callable[[], contextlib.AbstractContextManager[str]]


@contextlib.contextmanager
def sqlite_place() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="agenthost-stores-bench-") as folder:
        yield str(Path(folder) / "store.db")


def postgres_places(url: str) -> Places | None:
    """Fresh schemas on the server at `url`, or None where there is none to reach."""
    try:
        import psycopg
    except ImportError:
        return None
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error:
        return None

    @contextlib.contextmanager
    def place() -> Iterator[str]:
        schema = f"bench_{uuid.uuid4().hex[:16]}"
        joiner = "&" if "?" in url else "?"
        try:
            yield f"{url}{joiner}schema={schema}"
        finally:
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())

    return place


# -- the measures ------------------------------------------------------------------------------
def write_rates(places: dict[str, Places], rows: int, rounds: int) -> dict[str, dict[str, float]]:
    """rows/s by way and store: medians of alternating rounds."""
    ops = turn_ops(rows)
    ways = {"ops in batches": batches, "StoreActor group commit": group_commit}
    samples: dict[str, dict[str, list[float]]] = {w: {s: [] for s in places} for w in ways}
    for _ in range(rounds):
        for way, run in ways.items():
            for name, place in places.items():
                with place() as spec:
                    samples[way][name].append(rows / run(with_session(store_from_spec(spec)), ops))
    return {
        way: {name: statistics.median(rates) for name, rates in by_store.items()}
        for way, by_store in samples.items()
    }


def fill_owners(store: Store, others: int) -> None:
    """About MINE sessions of "me", spread among `others` of a hundred other owners."""
    step = (others + MINE) // MINE
    for n in range(others + MINE):
        owner = "me" if n % step == 0 else f"o{n % 100}"
        session_id = f"{owner}-{n:08d}"
        store.apply(
            SaveSession(
                session_id=session_id, provider="scripted", title="", created_at=n, chat_ids=()
            )
        )
        config = SessionState(config=((OWNER_KEY, owner),))
        store.apply(SaveSessionState(session_id=session_id, state=config))
        if n % MAX_BATCH == 0:
            store.commit()
    store.commit()


def page_costs(place: Places, sizes: list[int], calls: int) -> dict[str, float]:
    """µs a call: a page of "me" at each size; the whole listing at the largest."""
    costs: dict[str, float] = {}
    for others in sizes:
        with place() as spec:
            store = store_from_spec(spec)
            store.open()
            try:
                fill_owners(store, others)
                started = time.perf_counter()
                for _ in range(calls):
                    store.list_sessions_page(owner="me", limit=PAGE)
                store.commit()
                costs[f"page among {others:,}"] = (time.perf_counter() - started) / calls * 1e6
                if others == sizes[-1]:
                    started = time.perf_counter()
                    for _ in range(max(1, calls // 20)):
                        store.list_sessions()
                    store.commit()
                    spent = time.perf_counter() - started
                    costs[f"list_sessions of {others + MINE:,}"] = spent / max(1, calls // 20) * 1e6
            finally:
                store.close()
    return costs


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks stores", description=__doc__)
    parser.add_argument("--rows", type=int, default=20_000, help="turn rows written per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--others", default="100,10000", help="other owners' sessions")
    parser.add_argument("--calls", type=int, default=200, help="page calls per size")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="a server to measure on")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    console = Console()
    places: dict[str, Places] = {"SQLite": sqlite_place}
    postgres = postgres_places(args.postgres)
    if postgres is None:
        console.print(f"no PostgreSQL at {args.postgres}: SQLite only")
    else:
        places["PostgreSQL"] = postgres

    rates = write_rates(places, args.rows, args.rounds)
    table = Table(title=f"store writes: {args.rows:,} turn rows (rows/s, medians of rounds)")
    for column in ("way", *places, "PostgreSQL / SQLite"):
        table.add_column(column, justify="left" if column == "way" else "right")
    for way, by_store in rates.items():
        ratio = by_store["PostgreSQL"] / by_store["SQLite"] if postgres else None
        table.add_row(
            way,
            *(f"{by_store[name]:,.0f}" for name in places),
            "" if ratio is None else f"{ratio:.2f}x",
        )
    console.print(table)

    sizes = sorted(int(size) for size in args.others.split(","))
    table = Table(title=f"one owner's page of {PAGE} ({MINE} sessions of theirs): µs a call")
    for column in ("measure", *places):
        table.add_column(column, justify="left" if column == "measure" else "right")
    costs = {name: page_costs(place, sizes, args.calls) for name, place in places.items()}
    for measure in costs["SQLite"]:
        table.add_row(measure, *(f"{costs[name][measure]:,.0f}" for name in places))
    first, last = f"page among {sizes[0]:,}", f"page among {sizes[-1]:,}"
    table.add_row(
        f"ratio {sizes[-1]:,} / {sizes[0]:,} others",
        *(f"{costs[name][last] / costs[name][first]:.2f}x" for name in places),
    )
    console.print(table)
