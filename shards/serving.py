"""One shard's parts, wherever it runs: a Host on the shared store, served.

Belongs here: `ShardOptions` (what every shard of a sharded host is started
with, plain data a Ray actor can be handed) and `ServedShard` (a started
Host on the shard's own store object, and its ShardServer). The Ray actor
(shards/ray_shards.py) runs one in its own process; tests and a single
machine without Ray can run one in this process.

Invariants:
1. A shard's store is a PostgreSQL store with the shard's identity: it
   registers a new epoch when it opens (store/leases.py); a SQLite store is
   refused (one process holds it: it cannot be shared).
2. Stopping a shard stops its Host cleanly (the store flushes and releases
   the shard's leases), then its server.
"""

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from agenthost.actors.surface import Host
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.providers.base import Provider
from agenthost.shards.front import Address
from agenthost.shards.shard import ShardServer

ProviderFactory = Callable[[], Mapping[str, Provider]]
"""Makes a shard's providers in the shard's own process (a provider object
holds threads and loops: it does not travel; a function does)."""

RESIDENT_S = 30.0


def scripted_providers(
    deltas: int = 10, delta_ms: float = 0.0, shape: str = "copilot"
) -> ProviderFactory:
    """The scripted provider, paced as given, made in each shard."""
    return _Scripted(deltas=deltas, delta_ms=delta_ms, shape=shape)


@attrs.frozen
class _Scripted:
    deltas: int
    delta_ms: float
    shape: str

    def __call__(self) -> Mapping[str, Provider]:
        from agenthost.providers.scripted import ScriptedProvider

        return {
            "scripted": ScriptedProvider(
                shape=self.shape,  # type: ignore[arg-type]
                echo_deltas=self.deltas,
                delta_s=self.delta_ms / 1000,
                records=0,  # in a shard process: nobody reads them
            )
        }


@attrs.frozen
class ManifestProviders:
    """A providers.toml, read in each shard."""

    path: str

    def __call__(self) -> Mapping[str, Provider]:
        from agenthost.providers import load_manifest

        return load_manifest(self.path)


@attrs.frozen(kw_only=True)
class ShardOptions:
    """What every shard of a sharded host starts with."""

    store: str  # a postgresql:// URL
    providers: ProviderFactory = attrs.field(factory=scripted_providers)
    provider_names: tuple[str, ...] = ("scripted",)
    bind: str = "127.0.0.1"
    idle_release_s: float = RESIDENT_S
    host_options: Mapping[str, Any] = attrs.field(factory=dict)


def check_shared_store(spec: str) -> None:
    """Refuse a store the shards cannot share (invariant 1).

    Raises:
        AgentHostError: INVALID_ARGUMENT naming the store and what to give.
    """
    if not spec.strip().lower().startswith(("postgresql://", "postgres://")):
        raise AgentHostError(
            code=ErrorCode.INVALID_ARGUMENT,
            message=(
                f"{spec}: shards share one store, and a SQLite file belongs to one process;"
                " give --store postgresql://user@host/database"
            ),
        )


class ServedShard:
    """A Host on the shard's store, served to fronts (see the module docstring)."""

    def __init__(self, shard_id: str, options: ShardOptions, secret: bytes) -> None:
        from agenthost.store.postgres import PostgresStore

        check_shared_store(options.store)
        self.shard_id = shard_id
        self.store = PostgresStore(options.store, shard=shard_id)
        self.host = Host.start(
            store=self.store,
            providers=options.providers(),
            idle_release_s=options.idle_release_s,
            **options.host_options,
        )
        from agenthost.actors.protocol import WatchLeases

        services = self.host.core.services
        assert services.host is not None
        services.store.tell(WatchLeases(host=services.host))
        self.server = ShardServer(self.host.core, secret, bind=options.bind)
        try:
            host, port = self.server.start()
        except BaseException:
            self.host.stop()
            raise
        self._address = Address(host=host, port=port, epoch=self.store.shard_epoch or 0)

    @property
    def address(self) -> Address:
        return self._address

    def stop(self, timeout: float = 30.0) -> None:
        self.host.stop(timeout=timeout)
        self.server.stop(timeout)
