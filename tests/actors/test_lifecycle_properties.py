"""The lifecycle property machine (tests/actors/lifecycle/machine.py), once per
shape of the scripted provider: 50 examples in every run (about 5 s a shape),
300 per shape with `pytest -m properties` (`tox -e bench` runs them)."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.actors.lifecycle import trace
from tests.actors.lifecycle.machine import Lifecycle

QUICK = settings(
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
LONG = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(autouse=True)
def _traces(tmp_path: Path) -> Iterator[None]:
    """A failing run's trace goes under this test's tmp dir."""
    trace.TRACE_DIR[:] = [tmp_path]
    yield
    trace.TRACE_DIR.clear()


def machine(shape: str) -> type[Lifecycle]:
    return type(f"Lifecycle_{shape}", (Lifecycle,), {"shape": shape})


@pytest.mark.parametrize("shape", ["copilot", "claude", "codex"])
def test_the_lifecycle_holds_its_invariants_under_interleavings(shape: str) -> None:
    machine_class = machine(shape)
    machine_class.TestCase.settings = QUICK
    machine_class.TestCase("runTest").runTest()


@pytest.mark.properties
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("shape", ["copilot", "claude", "codex"])
def test_the_lifecycle_holds_its_invariants_in_a_few_hundred_runs(shape: str) -> None:
    machine_class = machine(shape)
    machine_class.TestCase.settings = LONG
    machine_class.TestCase("runTest").runTest()
