"""Shards and session leases (store/leases.py) on PostgreSQL, without Ray: two
store objects on one schema are two shards."""

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agenthost.messages import AgentHostError, ErrorCode
from agenthost.messages.state import TurnState
from agenthost.store.leases import owner_of
from agenthost.store.postgres import PostgresStore
from agenthost.store.records import (
    DeleteSession,
    ReleaseLease,
    SaveSession,
    SaveTurnEnded,
    SaveTurnStarted,
    StoreOp,
)
from agenthost.store.sqlite import SqliteStore
from tests.fakes.stores import StoreFactory, store_factories

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (agenthost[scale])")

Shard = Callable[[str], PostgresStore]


@pytest.fixture
def pg(db_path: Path) -> Iterator[StoreFactory]:
    yield from store_factories("postgres", db_path)


@pytest.fixture
def shard(pg: StoreFactory) -> Iterator[Shard]:
    """Open a store as the shard named; all are closed at the end."""
    opened: list[PostgresStore] = []

    def start(name: str) -> PostgresStore:
        store = PostgresStore(pg.spec, shard=name)
        store.open()
        opened.append(store)
        return store

    yield start
    for store in opened:
        store.close()


def session(session_id: str, chat_id: str = "c") -> SaveSession:
    return SaveSession(
        session_id=session_id, provider="scripted", title="", created_at=0, chat_ids=(chat_id,)
    )


def started(turn_id: str, seq: int = 0, session_id: str = "s1") -> SaveTurnStarted:
    return SaveTurnStarted(
        session_id=session_id, chat_id="c", turn_id=turn_id, seq=seq, user_text="hi", started_at=0
    )


def ended(turn_id: str, chat_id: str = "c") -> SaveTurnEnded:
    return SaveTurnEnded(
        chat_id=chat_id, turn_id=turn_id, state=TurnState.COMPLETE, assistant_text="ok", ended_at=1
    )


def commit(store: PostgresStore, *ops: StoreOp) -> dict[int, ErrorCode]:
    """Apply the ops as one batch and commit it; the failed positions' codes."""
    for op in ops:
        store.apply(op)
    report = store.commit()
    return {position: error.code for position, error in report.failed.items()}


def turns(pg: StoreFactory) -> list[tuple[str, str, str | None, str | None]]:
    return [
        (r[0], r[1], r[2], r[3])
        for r in pg.query(
            "SELECT id, assistant_text, state, error_code FROM turns ORDER BY seq, id"
        )
    ]


def test_each_start_of_a_shard_registers_a_new_epoch(shard: Shard) -> None:
    assert [shard("a").shard_epoch, shard("a").shard_epoch, shard("b").shard_epoch] == [1, 2, 1]


def test_a_restarted_shard_takes_over_its_sessions_and_ends_their_running_turns_once(
    shard: Shard, pg: StoreFactory
) -> None:
    before = shard("a")
    assert commit(before, session("s1"), started("t0"), ended("t0"), started("t1")) == {}
    after = shard("a")  # the same shard, started again: a new epoch
    takeover = after.acquire_lease("s1")
    after.commit()
    assert takeover is not None and takeover.abandoned_turns == 1
    assert takeover.fenced_owner == "a" and takeover.lease_epoch == 2
    again = after.acquire_lease("s1")  # its own now: nothing more happens
    after.commit()
    assert again is not None and (again.abandoned_turns, again.lease_epoch) == (0, 2)
    assert turns(pg) == [
        ("t0", "ok", "complete", None),
        ("t1", "", "error", "execution_abandoned"),
    ]


def test_a_stale_shards_write_is_refused_with_lease_lost_and_changes_nothing(
    shard: Shard, pg: StoreFactory
) -> None:
    stale = shard("a")
    assert commit(stale, session("s1"), started("t1")) == {}
    fresh = shard("b")
    fresh.acquire_lease("s1", force=True)  # the router knows "a" is dead
    fresh.commit()
    stale.apply(ended("t1"))  # the stale shard's completion comes too late
    report = stale.commit()
    assert report.fenced == {"s1"}
    assert {p: e.code for p, e in report.failed.items()} == {0: ErrorCode.LEASE_LOST}
    assert turns(pg) == [("t1", "", "error", "execution_abandoned")]  # ended once
    assert pg.query("SELECT id FROM sessions") == [("s1",)]  # nothing deleted


def test_the_rest_of_a_fenced_batch_commits(shard: Shard, pg: StoreFactory) -> None:
    a = shard("a")
    assert commit(a, session("s1"), session("s2", "d")) == {}
    b = shard("b")
    b.acquire_lease("s1", force=True)
    b.commit()
    other = SaveTurnStarted(
        session_id="s2", chat_id="d", turn_id="t2", seq=0, user_text="hi", started_at=0
    )
    assert commit(a, started("t1"), other) == {0: ErrorCode.LEASE_LOST}
    assert [r[0] for r in turns(pg)] == ["t2"]


def test_a_live_owner_is_refused_with_lease_held_naming_it(shard: Shard) -> None:
    a = shard("a")
    commit(a, session("s1"))
    b = shard("b")
    with pytest.raises(AgentHostError) as caught:
        b.acquire_lease("s1")
    assert caught.value.code is ErrorCode.LEASE_HELD
    assert owner_of(caught.value) == "a"
    assert commit(b) == {}  # the refusal left the batch usable


def test_a_released_lease_is_taken_without_force_and_ends_nothing(
    shard: Shard, pg: StoreFactory
) -> None:
    a = shard("a")
    commit(a, session("s1"), started("t1"), ended("t1"))
    commit(a, ReleaseLease(session_id="s1"))
    b = shard("b")
    takeover = b.acquire_lease("s1")
    b.commit()
    assert takeover is not None and takeover.fenced_owner is None
    assert takeover.abandoned_turns == 0
    assert commit(a, started("t2", seq=1)) == {0: ErrorCode.LEASE_LOST}  # a released it


def test_an_acquisition_waits_for_the_owners_commit_and_then_ends_the_turn_it_started(
    shard: Shard, pg: StoreFactory
) -> None:
    a = shard("a")
    commit(a, session("s1"))
    a.apply(started("t1"))
    a.find_session("s1")  # a read sends the batch: the lease row is locked until the commit
    b = shard("b")
    b._conn.execute("SET lock_timeout = '200ms'")  # a private connection, in a test
    with pytest.raises(psycopg.errors.LockNotAvailable):
        b.acquire_lease("s1", force=True)
    b.rollback()
    b._conn.execute("SET lock_timeout = '10s'")
    result: list[object] = []
    taking = threading.Thread(target=lambda: result.append(b.acquire_lease("s1", force=True)))
    taking.start()
    assert a.commit().failed == {}  # the turn's start commits first...
    taking.join(10)
    b.commit()
    [takeover] = result
    assert takeover.abandoned_turns == 1  # type: ignore[attr-defined]  # ...and is ended once
    assert commit(a, ended("t1")) == {0: ErrorCode.LEASE_LOST}
    assert turns(pg) == [("t1", "", "error", "execution_abandoned")]


def test_a_shards_load_shows_another_shards_running_turn_without_ending_it(
    shard: Shard, pg: StoreFactory
) -> None:
    a = shard("a")
    commit(a, session("s1"), started("t1"))
    record = shard("b").load_session("s1")
    assert record is not None and record.chats[0].turns[0].state is TurnState.ERROR
    assert turns(pg) == [("t1", "", None, None)]  # still running, on "a"


def test_disposing_a_session_deletes_its_lease(shard: Shard, pg: StoreFactory) -> None:
    a = shard("a")
    commit(a, session("s1"))
    assert pg.query("SELECT shard_id, lease_epoch FROM session_leases") == [("a", 1)]
    commit(a, DeleteSession(session_id="s1"))
    assert pg.query("SELECT * FROM session_leases") == []


def test_a_shard_closed_cleanly_releases_its_leases(shard: Shard, pg: StoreFactory) -> None:
    a = shard("a")
    commit(a, session("s1"))
    a.close()
    assert pg.query("SELECT shard_id FROM session_leases") == [(None,)]


def test_a_sqlite_shard_keeps_a_single_process_form(db_path: Path) -> None:
    store = SqliteStore(db_path, shard="only")
    store.open()
    try:
        store.apply(session("s1"))
        store.apply(started("t1"))
        store.commit()
        takeover = store.acquire_lease("s1")
        assert takeover is not None and takeover.lease_epoch == 1
        assert store.shard_epoch == 1
    finally:
        store.close()
