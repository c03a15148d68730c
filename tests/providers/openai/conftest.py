from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agenthost.actors import Host
from agenthost.providers import OpenAICompatProvider
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.providers.openai.standin import StandIn

KEY = "sk-test-do-not-leak-0123456789"


@pytest.fixture
def standin() -> Iterator[StandIn]:
    started = StandIn.start()
    yield started
    started.stop()


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TEST_KEY", KEY)
    return KEY


@pytest.fixture
def openai_provider(standin: StandIn, api_key: str) -> Callable[..., OpenAICompatProvider]:
    def make(**options: Any) -> OpenAICompatProvider:
        settings: dict[str, Any] = {
            "base_url": standin.url,
            "model": "m",
            "api_key_env": "TEST_KEY",
            "max_retries": 0,
        }
        settings.update(options)
        return OpenAICompatProvider(**settings)

    return make


@pytest.fixture
def start_openai_host(
    db_path: Path, clock: FakeClock, openai_provider: Callable[..., OpenAICompatProvider]
) -> Iterator[Callable[..., Host]]:
    """Start hosts on this test's store with an `openai` provider on the stand-in."""
    hosts: list[Host] = []

    def start(**options: Any) -> Host:
        started = Host.start(
            store=SqliteStore(db_path),
            providers={"openai": openai_provider(**options)},
            clock=clock,
        )
        hosts.append(started)
        return started

    yield start
    for started in hosts:
        started.stop()
