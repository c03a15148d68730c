"""Shards in this process (a Host and its ShardServer each, on one PostgreSQL
schema) and a sharded host over them: the wire, the routing and the leases
without Ray (tests/shards/test_ray.py runs real Ray)."""

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from agenthost.providers import ScriptedProvider
from agenthost.shards import ShardedHost, ShardOptions
from agenthost.shards.front import Address, Locate
from agenthost.shards.serving import ServedShard
from tests.fakes.stores import StoreFactory, store_factories

pytest.importorskip("psycopg", reason="psycopg is not installed (agenthost[scale])")


class LocalShards:
    """Shards started here by name; `restart(name)` stands in for Ray's restart:
    a new Host on a new store object (a new epoch), the old one left as it was
    (a zombie that lost its connection, as a killed process's writes would)."""

    def __init__(self, spec: str) -> None:
        self.secret = secrets.token_bytes(32)
        self.options = ShardOptions(store=spec)
        self.shards: dict[str, ServedShard] = {}
        self._all: list[ServedShard] = []

    def start(self, name: str, provider: ScriptedProvider | None = None) -> ServedShard:
        options = self.options
        if provider is not None:
            options = attrs.evolve(options, providers=lambda: {"scripted": provider})
        shard = ServedShard(name, options, self.secret)
        self.shards[name] = shard
        self._all.append(shard)
        return shard

    def locate(self, name: str) -> Locate:
        async def where() -> Address:
            return self.shards[name].address

        return where

    def crash(self, name: str) -> ServedShard:
        """Its server goes away (the front sees the connection end); its host stays."""
        shard = self.shards[name]
        shard.server.stop()
        return shard

    def front(self, *names: str) -> ShardedHost:
        return ShardedHost.connect({name: self.locate(name) for name in names}, self.secret)

    def stop(self) -> None:
        for shard in reversed(self._all):
            shard.stop()


@pytest.fixture
def pg(db_path: Path) -> Iterator[StoreFactory]:
    yield from store_factories("postgres", db_path)


@pytest.fixture
def local_shards(pg: StoreFactory) -> Iterator[LocalShards]:
    shards = LocalShards(pg.spec)
    yield shards
    shards.stop()


@pytest.fixture
def sharded(local_shards: LocalShards) -> Iterator[Callable[..., ShardedHost]]:
    fronts: list[ShardedHost] = []

    def start(*names: str) -> ShardedHost:
        for name in names:
            if name not in local_shards.shards:
                local_shards.start(name)
        front = local_shards.front(*names)
        fronts.append(front)
        return front

    yield start
    for front in fronts:
        front.stop()
