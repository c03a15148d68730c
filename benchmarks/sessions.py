"""Bytes per resident idle session.

A session is resident with its actors (session, chat, turn tracker, queue
drain, provider connection) after one completed turn, then left idle. The
figure is the process's RSS growth divided by the sessions (Python seldom
returns freed memory, so RSS is what a host really pays), on the pooled
runtime, with the SQLite store in a temporary folder.
"""

import asyncio
import gc
import tempfile
from pathlib import Path

import attrs
import psutil

from agenthost.actors import Host, aio
from agenthost.providers import ScriptedProvider
from agenthost.store import SqliteStore


@attrs.frozen
class Resident:
    sessions: int
    bytes_per_session: float
    actors_per_session: float


async def _open(host: Host, sessions: int) -> None:
    async def one(index: int) -> None:
        session = await aio.create_session(host)
        chat = await aio.chat(session)
        ticket = await aio.send(chat, f"hello {index}")
        await aio.outcome(ticket, timeout=60)

    await asyncio.gather(*(one(i) for i in range(sessions)))


def run(sessions: int = 5000) -> Resident:
    from agenthost.actors.runtime import live_actors

    process = psutil.Process()
    with tempfile.TemporaryDirectory() as folder:
        host = Host.start(
            store=SqliteStore(Path(folder) / "sessions.db"),
            providers={"scripted": ScriptedProvider(echo_deltas=3)},
        )
        asyncio.run(_open(host, 50))  # warm up: imports, caches, the pool's threads
        gc.collect()
        before_rss, before_actors = process.memory_info().rss, len(live_actors())
        asyncio.run(_open(host, sessions))
        gc.collect()
        grown = process.memory_info().rss - before_rss
        actors = len(live_actors()) - before_actors
        host.stop(timeout=60)
    return Resident(sessions, grown / sessions, actors / sessions)
