"""Shards on real Ray, on this machine: a cluster of two nodes (one Ray start for
the module), shards placed one a node, a shard killed with SIGKILL and started
again by Ray."""

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from agenthost.messages import ErrorCode
from agenthost.messages.events import AssistantDelta, TurnStarted
from agenthost.shards import ShardedHost, ShardOptions, scripted_providers
from agenthost.shards.ray_shards import LOOPBACK_ENV
from agenthost.shards.router import rendezvous
from tests.fakes.stores import postgres_schema_url

os.environ.update(LOOPBACK_ENV)  # before ray is imported: a local cluster on loopback only
pytest.importorskip("ray", reason="ray is not installed (pip install 'agenthost[scale]')")
pytest.importorskip("psycopg", reason="psycopg is not installed (agenthost[scale])")

NODES = ({"node_a": 1.0}, {"node_b": 1.0})


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    from agenthost.shards.ray_shards import LocalRay

    cluster = LocalRay(nodes=2, ports=24700, num_cpus=2, resources=NODES)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def store_url() -> Iterator[str]:
    yield from postgres_schema_url()


@pytest.fixture(scope="module")
def host(ray_cluster: Any, store_url: str) -> Iterator[ShardedHost]:
    from agenthost.shards.ray_shards import start_sharded

    # 20 deltas 50 ms apart: a turn runs about a second, long enough to be killed in
    options = ShardOptions(store=store_url, providers=scripted_providers(20, 50.0))
    started = start_sharded(options, 2, local=ray_cluster, placement=NODES)
    yield started
    started.stop()


def test_two_shards_run_on_two_nodes_of_one_cluster_and_serve_their_sessions(
    host: ShardedHost,
) -> None:
    shards = host.shards
    assert shards.node("shard-0") != shards.node("shard-1")
    ids = [f"two-nodes-{n}" for n in range(8)]
    assert {rendezvous(i, shards.ids) for i in ids} == {"shard-0", "shard-1"}
    for n, session_id in enumerate(ids):
        chat = host.create_session(session_id=session_id).chat()
        assert chat.send(f"q{n}").result(timeout=30).text == f"echo: q{n}"


def test_a_shard_killed_with_sigkill_comes_back_and_its_running_turn_ends_once(
    host: ShardedHost, store_url: str
) -> None:
    session = host.create_session()
    chat = session.chat()
    assert chat.send("before").result(timeout=30).state.value == "complete"
    events = chat.subscribe()
    running = chat.send("during")
    while not isinstance(events.next(timeout=30), TurnStarted):
        pass
    while not isinstance(events.next(timeout=30), AssistantDelta):  # it runs on the shard now
        pass
    owner = rendezvous(session.id, host.shards.ids)
    # A barrier: a session made on the same shard is answered once its row is
    # committed, and the turn's start was written before its first event went out.
    barrier = next(
        f"barrier-{n}" for n in range(100) if rendezvous(f"barrier-{n}", host.shards.ids) == owner
    )
    host.create_session(session_id=barrier)
    killed = host.shards.pid(owner)
    os.kill(killed, signal.SIGKILL)
    outcome = running.result(timeout=60)
    assert outcome.error is not None and outcome.error.code is ErrorCode.EXECUTION_ABANDONED
    assert host.shards.pid(owner) != killed  # Ray started it again
    assert chat.send("after").result(timeout=30).text == "echo: after"
    turns = [(t.user_text, t.state.value) for t in chat.state().turns]
    assert turns == [("before", "complete"), ("during", "error"), ("after", "complete")]
    import psycopg

    with psycopg.connect(store_url.split("?")[0]) as db:
        schema = store_url.split("schema=")[1].split("&")[0]
        rows = db.execute(
            f"SELECT user_text, state, error_code FROM {schema}.turns WHERE session_id = %s"
            " ORDER BY started_at, seq",
            (session.id,),
        ).fetchall()
    assert rows == [
        ("before", "complete", None),
        ("during", "error", "execution_abandoned"),
        ("after", "complete", None),
    ]
