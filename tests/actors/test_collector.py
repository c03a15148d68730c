"""A host tunes the garbage collector while it runs, and puts back what it changed."""

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenthost.actors import Host, collector
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock


@pytest.fixture(autouse=True)
def default_thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def start(path: Path, **options: bool) -> Host:
    return Host.start(store=SqliteStore(path), clock=FakeClock(), **options)


def test_a_running_host_makes_collections_rarer_and_the_last_stop_puts_them_back(
    tmp_path: Path,
) -> None:
    first = start(tmp_path / "a.db")
    tuned = (collector.YOUNG_EVERY, 10, collector.FULL_EVERY)
    assert gc.get_threshold() == tuned
    second = start(tmp_path / "b.db")
    first.stop()
    assert gc.get_threshold() == tuned  # the second still runs
    second.stop()
    assert gc.get_threshold() == (700, 10, 10)


def test_a_host_leaves_the_thresholds_alone_when_asked_or_already_rarer(tmp_path: Path) -> None:
    with start(tmp_path / "a.db", rare_full_collections=False):
        assert gc.get_threshold() == (700, 10, 10)
    gc.set_threshold(50_000, 20, 5000)
    with start(tmp_path / "b.db"):
        assert gc.get_threshold() == (50_000, 20, 5000)
    assert gc.get_threshold() == (50_000, 20, 5000)


def test_a_threshold_changed_while_the_host_ran_is_not_overwritten_at_stop(
    tmp_path: Path,
) -> None:
    host = start(tmp_path / "a.db")
    gc.set_threshold(2000, 10, 10)  # the embedding program retunes meanwhile
    host.stop()
    assert gc.get_threshold() == (2000, 10, 10)


def test_a_host_sweeps_once_its_last_resident_session_left_memory(tmp_path: Path) -> None:
    with start(tmp_path / "a.db") as host:
        assert collector.sweeps.wait_settled(timeout=10)  # another test's
        swept = collector.sweeps.count
        first, second = host.create_session(), host.create_session()
        first.dispose()
        assert not collector.sweeps.pending  # one is still resident
        second.dispose()
        assert collector.sweeps.wait_count(swept + 1, timeout=10)
        assert not collector.sweeps.pending


def test_a_host_that_leaves_the_collector_alone_never_sweeps(tmp_path: Path) -> None:
    with start(tmp_path / "a.db", rare_full_collections=False) as host:
        assert collector.sweeps.wait_settled(timeout=10)  # another test's
        swept = collector.sweeps.count
        host.create_session().dispose()
        assert not collector.sweeps.pending
        assert collector.sweeps.count == swept
