"""Shards as Ray actors: Ray places them, and starts one again when it dies.

Belongs here: importing ray (lazily, only when shards start on Ray), a Ray
cluster this process starts on this machine (`LocalRay`: loopback only, its
ports from a range given), the shard actor (`ShardActor`, a ServedShard in a
Ray worker process), and `start_sharded`, which starts N shard actors and a
ShardedHost over them.

Invariants:
1. Ray places and restarts shards (max_restarts=-1); a shard's traffic does
   not go through Ray (shards/wire.py): a Ray call costs more than a turn.
2. A shard that Ray starts again registers a new epoch in the store before
   it serves (ServedShard), so what the dead one held is stale.
3. What this process starts it stops: the actors it made (after a clean stop
   each), and the local cluster if it started one; never a cluster it joined.
4. A local cluster listens on 127.0.0.1 only: Ray is told so through its own
   switch (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 makes it take the loopback
   address as the node's) before it is imported, and every port it opens is
   in the range given.
5. Shard actors are named (`RayShards.names`, a prefix of this start's own,
   in the `agenthost` namespace), so another process of the cluster (an AHP
   front of `serve --fronts`: server/fronts.py) finds them (`join_shards`).
"""

import asyncio
import os
import secrets
import sys
from collections.abc import Mapping
from typing import Any

import attrs
import structlog

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.shards.front import Address, Locate
from agenthost.shards.host import ShardedHost
from agenthost.shards.serving import ServedShard, ShardOptions, check_shared_store

log = structlog.get_logger(__name__)

LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
DEFAULT_PORTS = 24000
SHARD_START_S = 120.0
NAMESPACE = "agenthost"


def import_ray(*, loopback: bool) -> Any:
    """ray, imported now (invariant 4: loopback before the import).

    Raises:
        AgentHostError: INVALID_ARGUMENT when ray is not installed.
    """
    if loopback:
        imported_before = "ray" in sys.modules
        os.environ.update(LOOPBACK_ENV)
    try:
        import ray
        from ray._private import ray_constants  # read-only: was the switch seen?
    except ImportError:
        raise AgentHostError(
            code=ErrorCode.INVALID_ARGUMENT,
            message="shards run on Ray, which is not installed: pip install 'agenthost[scale]'",
        ) from None
    if loopback and imported_before and ray_constants.ENABLE_RAY_CLUSTER:
        raise AgentHostError(
            code=ErrorCode.INVALID_ARGUMENT,
            message=(
                "ray was imported before agenthost could keep a local cluster on loopback:"
                " set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 before importing it"
            ),
        )
    return ray


@attrs.frozen(kw_only=True)
class NodePorts:
    """The ports of one Ray node this process starts: `base` and the 49 after it."""

    base: int

    def node_args(self, *, head: bool) -> dict[str, Any]:
        b = self.base
        args: dict[str, Any] = {
            "node_ip_address": "127.0.0.1",
            "node_manager_port": b + 1,
            "object_manager_port": b + 2,
            "metrics_agent_port": b + 4,
            "metrics_export_port": b + 5,
            "dashboard_agent_listen_port": b + 6,
            "runtime_env_agent_port": b + 7,
            "min_worker_port": b + 10,
            "max_worker_port": b + 49,
            "include_dashboard": False,
        }
        if head:
            args["gcs_server_port"] = b
        return args


class LocalRay:
    """A Ray cluster of `nodes` nodes on this machine, started and stopped here
    (ray.cluster_utils.Cluster: the nodes are processes of this machine)."""

    def __init__(
        self,
        nodes: int = 1,
        *,
        ports: int = DEFAULT_PORTS,
        num_cpus: int | None = None,
        resources: tuple[Mapping[str, float], ...] = (),
    ) -> None:
        self.ray = import_ray(loopback=True)
        from ray.cluster_utils import Cluster

        cpus = num_cpus if num_cpus is not None else max(os.cpu_count() or 1, 1)
        head = {
            **NodePorts(base=ports).node_args(head=True),
            "num_cpus": cpus,
            "resources": dict(resources[0]) if resources else {},
        }
        self.cluster = Cluster(initialize_head=True, head_node_args=head)
        for n in range(1, nodes):
            self.cluster.add_node(
                **NodePorts(base=ports + 50 * n).node_args(head=False),
                num_cpus=cpus,
                resources=dict(resources[n]) if n < len(resources) else {},
            )
        assert self.cluster.head_node is not None
        self.address: str = str(self.cluster.head_node.gcs_address)
        self.ray.init(address=self.address, log_to_driver=False, logging_level="WARNING")
        log.info("ray_started", address=self.address, nodes=nodes)

    def stop(self) -> None:
        self.ray.shutdown()
        self.cluster.shutdown()
        log.info("ray_stopped", address=self.address)


class ShardActor:
    """A shard in a Ray worker process (made a Ray actor class by `_actor_class`)."""

    def __init__(self, shard_id: str, options: ShardOptions, secret: bytes) -> None:
        self._shard = ServedShard(shard_id, options, secret)

    def address(self) -> Address:
        return self._shard.address

    def pid(self) -> int:
        return os.getpid()

    def node(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def stop(self) -> None:
        self._shard.stop()


def locate_actor(actor: Any) -> Locate:
    """Where a shard actor listens now (Ray waits out its restart)."""

    async def where() -> Address:
        address: Address = await asyncio.wrap_future(actor.address.remote().future())
        return address

    return where


def join_shards(ray_address: str, names: Mapping[str, str]) -> Mapping[str, Locate]:
    """(Another process of the cluster: an AHP front.) Join the cluster as a
    driver and find the named shard actors: shard id -> where it is now."""
    loopback = ray_address.split(":")[0] in ("127.0.0.1", "localhost")
    ray = import_ray(loopback=loopback)
    ray.init(address=ray_address, namespace=NAMESPACE, log_to_driver=False, logging_level="WARNING")
    return {
        shard_id: locate_actor(ray.get_actor(name, namespace=NAMESPACE))
        for shard_id, name in names.items()
    }


def _actor_class(ray: Any) -> Any:
    return ray.remote(max_restarts=-1, max_task_retries=-1, num_cpus=0)(ShardActor)


class RayShards:
    """N shard actors on a Ray cluster (invariants 1-3)."""

    def __init__(
        self,
        count: int,
        options: ShardOptions,
        *,
        ray_address: str | None = None,
        local: LocalRay | None = None,
        placement: tuple[Mapping[str, float], ...] = (),
        ports: int = DEFAULT_PORTS,
    ) -> None:
        check_shared_store(options.store)
        self.secret = secrets.token_bytes(32)
        self._own_ray: LocalRay | None = None
        if ray_address is not None:
            loopback = ray_address.split(":")[0] in ("127.0.0.1", "localhost")
            self.ray = import_ray(loopback=loopback)
            self.ray.init(address=ray_address, log_to_driver=False, logging_level="WARNING")
        elif local is not None:
            self.ray = local.ray
        else:
            self._own_ray = LocalRay(ports=ports)
            self.ray = self._own_ray.ray
        self._joined = ray_address is not None
        if ray_address is not None:
            self.address = ray_address
        else:
            self.address = (local or self._own_ray).address  # type: ignore[union-attr]
        actor = _actor_class(self.ray)
        self.ids = [f"shard-{n}" for n in range(count)]
        # Named, so another process on the cluster (an AHP front: shards/fronts.py)
        # can find them; this start's own prefix keeps two starts on one cluster apart.
        run = secrets.token_hex(4)
        self.names = {shard_id: f"agenthost-{run}-{shard_id}" for shard_id in self.ids}
        self.actors: dict[str, Any] = {}
        for n, shard_id in enumerate(self.ids):
            settings: dict[str, Any] = {"name": self.names[shard_id], "namespace": NAMESPACE}
            if n < len(placement):
                settings["resources"] = dict(placement[n])
            elif ray_address is not None:
                settings["scheduling_strategy"] = "SPREAD"  # over the cluster's nodes
            self.actors[shard_id] = actor.options(**settings).remote(shard_id, options, self.secret)
        try:
            self.ray.get([a.address.remote() for a in self.actors.values()], timeout=SHARD_START_S)
        except BaseException:
            self.stop()
            raise

    def locate(self, shard_id: str) -> Locate:
        return locate_actor(self.actors[shard_id])

    def pid(self, shard_id: str) -> int:
        return int(self.ray.get(self.actors[shard_id].pid.remote(), timeout=SHARD_START_S))

    def node(self, shard_id: str) -> str:
        return str(self.ray.get(self.actors[shard_id].node.remote(), timeout=SHARD_START_S))

    def stop(self, timeout: float = 30.0) -> None:
        """Stop each shard cleanly, then its actor; then Ray, if this process started it."""
        stopping = [a.stop.remote() for a in self.actors.values()]
        try:
            self.ray.get(stopping, timeout=timeout)
        except Exception:
            log.warning("shard_stop_failed", exc_info=True)
        for actor in self.actors.values():
            self.ray.kill(actor, no_restart=True)
        self.actors.clear()
        if self._own_ray is not None:
            self._own_ray.stop()
        elif self._joined:
            self.ray.shutdown()


def start_sharded(
    options: ShardOptions,
    shards: int = 2,
    *,
    ray_address: str | None = None,
    local: LocalRay | None = None,
    placement: tuple[Mapping[str, float], ...] = (),
    ports: int = DEFAULT_PORTS,
    timeout: float = SHARD_START_S,
) -> ShardedHost:
    """`shards` shard actors on Ray and a ShardedHost over them; its `stop()` stops
    them (and the local Ray this started). With `ray_address`, join that cluster
    and spread the shards over its nodes; with `local`, use that LocalRay;
    otherwise start a local Ray of one node (ports from `ports`).

    Raises:
        AgentHostError: INVALID_ARGUMENT for a store shards cannot share, or
            without ray.
    """
    ray_shards = RayShards(
        shards, options, ray_address=ray_address, local=local, placement=placement, ports=ports
    )
    try:
        return ShardedHost.connect(
            {shard_id: ray_shards.locate(shard_id) for shard_id in ray_shards.ids},
            ray_shards.secret,
            options.provider_names,
            on_stop=ray_shards.stop,
            shards_started=ray_shards,
            timeout=timeout,
            limits=options.host_options.get("limits"),
        )
    except BaseException:
        ray_shards.stop()
        raise
