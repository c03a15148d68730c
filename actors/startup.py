"""Starting and stopping a host: its actors, store, provider loops and clock.

Both surfaces (actors/surface.py, actors/aio.py) start a host through
`start_host` (an operation of actors/calls.py: its one ask opens the store
on the store's thread) and stop it through `stop_host`.
"""

import contextlib
import os
import time
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pykka
import structlog

from agenthost.actors import calls, collector, logs
from agenthost.actors.calls import HostCore
from agenthost.actors.clock import Clock, SystemClock
from agenthost.actors.context import ActorGroup, Lifecycle, Services
from agenthost.actors.contributions import (
    Contribution,
    MementoCache,
    build_dispatcher,
    check_ids,
    injectable,
)
from agenthost.actors.contributions.builtin import BUILTINS
from agenthost.actors.host import HostActor
from agenthost.actors.limits import HostLimits
from agenthost.actors.protocol import Flush
from agenthost.actors.store import OpenStore, StoreActor
from agenthost.actors.supervisor import RestartPolicy, SupervisorActor
from agenthost.actors.worktree import WorktreeActor
from agenthost.providers.base import Provider, ProviderLoop, RetryPolicy
from agenthost.store.base import Store
from agenthost.store.sqlite import SqliteStore

log = structlog.get_logger(__name__)


def default_store_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return Path(base) / "agenthost" / "agenthost.db"


@attrs.define(eq=False)
class Running:
    """A started host's parts: what `stop` takes down."""

    core: HostCore
    store: Store
    loops: dict[str, ProviderLoop]
    own_clock: SystemClock | None
    holds_collector: bool


def start_host(
    store: Store | None,
    providers: Mapping[str, Provider] | None,
    clock: Clock | None,
    restart_policy: RestartPolicy | None,
    resume_retry: RetryPolicy | None,
    lifecycle: Lifecycle,
    subscriber_queue_size: int,
    contributions: Sequence[type[Contribution]],
    rare_full_collections: bool,
    limits: HostLimits | None = None,
) -> Generator[calls.Ask, Any, Running]:
    """Start a host's actors; the store opens on its own thread (the one ask).

    Raises:
        AgentHostError: STORE_ERROR when the store cannot be opened or is in use
            (nothing stays started then).
        ContributionError: see `Host.start`.
    """
    if providers is None:
        from agenthost.providers.scripted import ScriptedProvider

        providers = {"scripted": ScriptedProvider()}
    logs.quiet_unless_configured()
    classes = (*BUILTINS, *contributions)
    check_ids(classes)
    store = store or SqliteStore(default_store_path())
    store_ref = StoreActor.start(store)
    try:
        yield calls.Ask(store_ref, OpenStore())
    except BaseException:
        store_ref.stop(block=False)
        raise
    loops = {name: provider.make_loop(name) for name, provider in providers.items()}
    own_clock = None
    if clock is None:
        clock = own_clock = SystemClock()
    services = Services(
        clock=clock,
        store=store_ref,
        group=ActorGroup(),
        providers=dict(providers),
        loops=loops,
        subscriber_queue_size=subscriber_queue_size,
        resume_retry=resume_retry or RetryPolicy(),
        lifecycle=lifecycle,
        limits=limits or HostLimits(),
    )
    services.mementos = MementoCache(services.store)
    try:
        services.contributions = build_dispatcher(classes, injectable(services))
    except BaseException:
        store_ref.stop(block=False)
        for loop in loops.values():
            loop.stop()
        raise
    services.worktrees = WorktreeActor.start()
    services.supervisor = SupervisorActor.start(services, restart_policy or RestartPolicy())
    services.host = HostActor.start(services)
    if rare_full_collections:
        collector.hold()
    log.info("host_started", store=store.location, providers=sorted(providers))
    return Running(HostCore(services), store, loops, own_clock, rare_full_collections)


def policy_of(
    restart_policy: RestartPolicy | None,
    restart_intensity: tuple[int, float] | None,
    restart_backoff: tuple[float, float] | None,
) -> RestartPolicy | None:
    """A restart policy with the short forms applied."""
    if restart_intensity is None and restart_backoff is None:
        return restart_policy
    policy = restart_policy or RestartPolicy()
    if restart_intensity is not None:
        policy = attrs.evolve(policy, intensity=restart_intensity[0], period=restart_intensity[1])
    if restart_backoff is not None:
        policy = attrs.evolve(
            policy, backoff_min=restart_backoff[0], backoff_max=restart_backoff[1]
        )
    return policy


def stop_host(running: Running, timeout: float) -> None:
    """Stop every actor of the host (newest first), flush the store, stop provider
    loops. (Blocks: the asyncio side runs it once, off the loop's critical path.)"""
    core = running.core
    if core.stopped:
        return
    core.stopped = True
    services = core.services
    deadline = time.monotonic() + timeout

    def left() -> float:
        return max(deadline - time.monotonic(), 0.1)

    for ref in reversed(services.group.snapshot()):
        with contextlib.suppress(pykka.ActorDeadError):
            ref.stop(block=False)
    for ref in reversed(services.group.snapshot()):
        with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
            ref.stop(block=True, timeout=left())
    with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
        services.store.ask(Flush(), timeout=left())
    with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
        services.store.stop(block=True, timeout=left())
    if services.worktrees is not None:
        with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
            services.worktrees.stop(block=True, timeout=left())
    for loop in running.loops.values():
        loop.stop()
    if running.own_clock is not None:
        running.own_clock.stop()
    if running.holds_collector:
        collector.release()
    log.info("host_stopped")
