"""Bytes per resident idle session.

A session is resident with its actors (session, chat, turn tracker, queue
drain, provider connection) after one completed turn, then left idle. The
figure is the process's RSS growth divided by the sessions (Python seldom
returns freed memory, so RSS is what a host really pays), on the pooled
runtime, with the SQLite store in a temporary folder. Idle release is off
for the measurement, so every session stays resident however long it takes.

`python -m benchmarks sessions [--sessions 100000]` prints the process's
whole RSS with that many resident sessions (the issue's 2 GiB budget).
"""

import asyncio
import gc
import tempfile
from pathlib import Path

import attrs
import psutil

from agenthost.actors import Host
from agenthost.providers import ScriptedProvider
from agenthost.store import SqliteStore


@attrs.frozen
class Resident:
    sessions: int
    bytes_per_session: float
    actors_per_session: float
    rss: int = 0  # the whole process's, with every session resident


OPEN_AT_ONCE = 2000  # sessions being opened concurrently (the rest wait their turn)


async def _open(host: Host, sessions: int) -> None:
    slots = asyncio.Semaphore(OPEN_AT_ONCE)

    async def one(index: int) -> None:
        async with slots:
            session = await host.aio.create_session(timeout=600)
            chat = await session.chat(timeout=600)
            handle = await chat.send(f"hello {index}", timeout=600)
            await handle.outcome(timeout=600)

    await asyncio.gather(*(one(i) for i in range(sessions)))


def run(sessions: int = 5000) -> Resident:
    from agenthost.actors.runtime import live_actors

    process = psutil.Process()
    with tempfile.TemporaryDirectory() as folder:
        host = Host.start(
            store=SqliteStore(Path(folder) / "sessions.db"),
            providers={"scripted": ScriptedProvider(echo_deltas=3)},
            idle_release_s=86_400.0,
        )
        asyncio.run(_open(host, 50))  # warm up: imports, caches, the pool's threads
        gc.collect()
        before_rss, before_actors = process.memory_info().rss, len(live_actors())
        asyncio.run(_open(host, sessions))
        gc.collect()
        rss = process.memory_info().rss
        actors = len(live_actors()) - before_actors
        host.stop(timeout=120)
    return Resident(sessions, (rss - before_rss) / sessions, actors / sessions, rss)


def main(argv: list[str]) -> None:
    import argparse
    import logging

    import structlog

    parser = argparse.ArgumentParser(prog="python -m benchmarks sessions", description=__doc__)
    parser.add_argument("--sessions", type=int, default=100_000)
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    resident = run(args.sessions)
    print(
        f"{resident.sessions:,} resident idle sessions ({resident.actors_per_session:.0f} actors"
        f" each): process RSS {resident.rss / 2**30:.2f} GiB,"
        f" {resident.bytes_per_session:,.0f} B per session"
    )
