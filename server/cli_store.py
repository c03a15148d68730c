"""The stores the `agenthost` commands name with --store, and their refusals as one line.

One form for every command: a path or `sqlite:///path` (a SQLite file), or
`postgresql://...`; without --store, the user's SQLite file. A store a
command cannot use is refused as a `CliError` with exit code 2 (a --store
naming no usable store is a bad option value), worded by the store itself
(`store PATH: what is wrong; what to do`). Invariants:
- an explicit SQLite path is never given folders it lacks: its folder must
  exist (only the user's default store gets its folder made);
- a store made new is said on stderr, with where it is;
- a store opened only to read (`reading`) takes no lock, so it works beside
  a server that holds it;
- a sharded run (`--shards`) takes only a store its shards can share:
  PostgreSQL.
"""

import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.server.cli_errors import USAGE, CliError

if TYPE_CHECKING:
    from agenthost.shards import ShardOptions
    from agenthost.shards.ray_shards import RayShards
    from agenthost.store import Store


def named_store(spec: str | None, *, create: bool = True) -> "Store":
    """The store a --store value names (not opened): a path, sqlite:///path or
    postgresql://...; the user's SQLite file by default.

    Raises:
        CliError: the value names no store, or (with `create`) a new SQLite
            file in a folder that does not exist.
    """
    from agenthost.actors.startup import default_store_path
    from agenthost.store import SqliteStore, store_from_spec

    try:
        store = store_from_spec(default_store_path() if spec is None else spec, create=create)
    except AgentHostError as error:
        raise refusal(error) from None
    if spec is not None and create and isinstance(store, SqliteStore):
        folder = store.path.parent
        if not store.path.exists() and not folder.is_dir():
            raise CliError(
                f"store {store.path}",
                f"its folder {folder} does not exist: create it first, or give a store"
                " in an existing folder",
                code=USAGE,
            )
    return store


def refusal(error: AgentHostError, code: int = USAGE) -> CliError:
    """A store's refusal (`store PATH: what; what to do`) as a CliError: 2, as a
    --store naming no usable store is; 1 for what a check or backup found."""
    if error.code is ErrorCode.STORE_ERROR and error.message.endswith(IN_USE):
        location = error.message.removesuffix(IN_USE).strip()
        return CliError(
            f"store {location}",
            "in use by another agenthost process (a running `agenthost serve`?):"
            " stop it, or name another store with --store",
            code=code,
        )
    return CliError(error.message, code=code)


IN_USE = "is in use by another agenthost process"
"""How a store says another process holds it (store/sqlite.py)."""


@contextmanager
def reading(spec: str | None) -> Iterator["Store"]:
    """The store opened only to read: a SQLite file without its lock, so it
    works beside a server that holds it (PostgreSQL serves many anyway)."""
    from agenthost.store import SqliteStore

    store = named_store(spec, create=False)
    if isinstance(store, SqliteStore):
        store = SqliteStore(store.path, read_only=True)
    try:
        store.open()
    except AgentHostError as error:
        raise refusal(error) from None
    try:
        yield store
    finally:
        store.close()


def start_host(
    store: "Store",
    providers: dict[str, Any] | None = None,
    *,
    say_created: bool = True,
    limits: Any = None,
    max_resident_bytes: int | None = None,
) -> Any:
    """A host on the store (with `limits`, HostLimits); a store it cannot open is
    one line. A store made new is said on stderr (unless the caller says it)."""
    from agenthost.actors import Host

    try:
        host = Host.start(
            store=store, providers=providers, limits=limits, max_resident_bytes=max_resident_bytes
        )
    except AgentHostError as error:
        raise refusal(error) from None
    except (OSError, sqlite3.Error) as error:
        why = getattr(error, "strerror", None) or str(error)
        raise CliError(f"store {store.location}", f"cannot open it: {why}", code=USAGE) from None
    if store.created and say_created:
        say_created_store(store.location)
    return host


def say_created_store(location: str) -> None:
    print(f"agenthost: created a new store at {location}", file=sys.stderr)


def refuse_unshared(store: str | None) -> None:
    """A sharded run needs a store its shards share: PostgreSQL (one line otherwise)."""
    if store is None or not store.strip().lower().startswith(("postgresql://", "postgres://")):
        raise CliError(
            "--shards",
            f"shards share one store, and {'SQLite' if store is None else store} is one"
            " process's: give --store postgresql://user@host/database",
            code=USAGE,
        )


def start_shards(
    store: str,
    manifest: Path | None,
    names: tuple[str, ...],
    count: int,
    ray_address: str | None,
    limits: Any = None,
) -> Any:
    """A sharded host over `count` shards on Ray, each with the manifest's
    providers (read in the shard) or the scripted one, and `limits` (HostLimits)
    on each shard and the front; one line if it cannot."""
    from agenthost.shards.ray_shards import start_sharded

    options = _shard_options(store, manifest, names, limits)
    try:
        return start_sharded(options, count, ray_address=ray_address)
    except AgentHostError as error:
        raise CliError("--shards", error.message, code=USAGE) from None


def _shard_options(
    store: str, manifest: Path | None, names: tuple[str, ...], limits: Any
) -> "ShardOptions":
    from agenthost.shards import ShardOptions
    from agenthost.shards.serving import ManifestProviders, scripted_providers

    factory = scripted_providers() if manifest is None else ManifestProviders(str(manifest))
    return ShardOptions(
        store=store,
        providers=factory,
        provider_names=names,
        host_options={} if limits is None else {"limits": limits},
    )


def start_ray_shards(
    store: str,
    manifest: Path | None,
    names: tuple[str, ...],
    count: int,
    ray_address: str | None,
    limits: Any = None,
) -> "RayShards":
    """`count` shards on Ray and no front (the fronts are processes of their
    own: server/fronts.py); one line if it cannot."""
    from agenthost.shards.ray_shards import RayShards

    options = _shard_options(store, manifest, names, limits)
    try:
        return RayShards(count, options, ray_address=ray_address)
    except AgentHostError as error:
        raise CliError("--shards", error.message, code=USAGE) from None
