import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from agenthost.actors import Host, runtime
from agenthost.providers import ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.fakes.stores import StoreFactory, store_factories

# Debug checks on: a blocking future.get() on a pool worker raises.
os.environ["AGENTHOST_DEBUG"] = "1"
runtime.set_debug(True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long property runs (marked `properties`) run only when asked for by
    name (`pytest -m properties`); a run that excludes others still skips them."""
    if "properties" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="a long property run: pytest -m properties (tox -e bench)")
    for item in items:
        if "properties" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _stop_actors_and_reset_logs() -> Iterator[None]:
    structlog.reset_defaults()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    yield
    runtime.stop_all()
    structlog.reset_defaults()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "agenthost.db"


@pytest.fixture(params=["sqlite", "postgres"])
def store_factory(request: pytest.FixtureRequest, db_path: Path) -> Iterator[StoreFactory]:
    """The store contract's tests run once per store: a SQLite file, and a fresh
    schema on the PostgreSQL test server (skipped, saying why, where there is none)."""
    yield from store_factories(request.param, db_path)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def provider() -> ScriptedProvider:
    return ScriptedProvider()


@pytest.fixture
def host(db_path: Path, provider: ScriptedProvider, clock: FakeClock) -> Iterator[Host]:
    started = Host.start(store=SqliteStore(db_path), providers={"scripted": provider}, clock=clock)
    yield started
    started.stop()


@pytest.fixture
def start_host(db_path: Path, clock: FakeClock) -> Iterator[Callable[..., Host]]:
    """Start hosts on this test's store and clock; all are stopped at the end."""
    hosts: list[Host] = []

    def start(provider: ScriptedProvider, **options: Any) -> Host:
        started = Host.start(
            store=SqliteStore(db_path), providers={"scripted": provider}, clock=clock, **options
        )
        hosts.append(started)
        return started

    yield start
    for started in hosts:
        started.stop()
