import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from agenthost.actors import FakeClock, Host, runtime
from agenthost.providers import ScriptedProvider
from agenthost.store import SqliteStore


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
