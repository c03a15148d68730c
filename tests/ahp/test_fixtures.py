"""AHP's conformance fixtures, run against our types, reducers and wire conversion.

The fixtures live outside the repository: the folder in AHP_FIXTURES, by
default shared/ahp/fixtures beside the repository (tests/ahp/fixture_files.py).
Every reducer fixture and every round-trip fixture found there is one test;
the ones we do not support are listed, with why, in tests/ahp/skip.toml; the
run says in one line how many it found (tests/ahp/conftest.py). Harness rules (the
fixture README): "now" is 9999 ms; `initial` must survive a round trip
through the typed model; actions decode with from_wire and apply in order
through our reducers; the result is compared with `expected` after dropping
null-valued keys, numbers by value. A round trip decodes `input` as the named
type and compares the re-encoding with acceptableOutputs[0], key presence
included (group B: unknown keys are dropped).
"""

import json
from pathlib import Path
from typing import Any

import pytest

from agenthost.messages.protocol import WIRE_TYPES
from agenthost.messages.reducers import reduce_chat, reduce_root, reduce_session
from agenthost.messages.state import ChatState, RootState, SessionState
from agenthost.messages.wire import action_from_wire, from_wire, to_wire
from tests.ahp.fixture_files import CASES, FIXTURES, SKIPS, fixture_paths, summary

NOW_MS = 9_999
REDUCERS = {
    "chat": (ChatState, reduce_chat),
    "session": (SessionState, reduce_session),
    "root": (RootState, reduce_root),
}


def _fixtures(folder: str) -> list[Any]:
    if not FIXTURES.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(f"no AHP fixtures at {FIXTURES}"))]
    paths = fixture_paths(folder)
    reasons = SKIPS.get(folder, {})
    return [
        pytest.param(
            path,
            id=path.name,
            marks=[pytest.mark.skip(reasons[path.name])] if path.name in reasons else [],
        )
        for path in paths
    ]


def without_nulls(value: Any) -> Any:
    """Absent == null: drop null-valued keys, recursively."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


@pytest.mark.parametrize("path", _fixtures("reducers"))
def test_reducer_fixture(path: Path) -> None:
    fixture = json.loads(path.read_text())
    if fixture["reducer"] not in REDUCERS:
        pytest.fail(f"no reducer {fixture['reducer']!r}: list the fixture in skip.toml")
    state_type, reducer = REDUCERS[fixture["reducer"]]
    state = from_wire(fixture["initial"], state_type)
    assert without_nulls(to_wire(state)) == without_nulls(fixture["initial"]), "initial round trip"
    for action in fixture["actions"]:
        state = reducer(state, action_from_wire(action), NOW_MS)
    assert without_nulls(to_wire(state)) == without_nulls(fixture["expected"])


@pytest.mark.parametrize("path", _fixtures("round-trips"))
def test_round_trip_fixture(path: Path) -> None:
    fixture = json.loads(path.read_text())
    assert len(fixture["acceptableOutputs"]) == 1
    value = from_wire(fixture["input"], WIRE_TYPES[fixture["type"]])
    assert to_wire(value) == fixture["acceptableOutputs"][0]


def test_the_runner_counts_the_fixtures_it_finds(tmp_path: Path) -> None:
    for kind, names in (("reducers", ["a.json", "b.json"]), ("round-trips", ["c.json"])):
        folder = tmp_path / "types" / "test-cases" / kind
        folder.mkdir(parents=True)
        for name in names:
            (folder / name).write_text("{}")
    line = summary(tmp_path)
    assert line.startswith(f"AHP fixtures: 2 reducer and 1 round-trip fixtures at {tmp_path} (")
    assert summary(tmp_path / "missing").startswith("AHP fixtures: none at ")


def test_the_skip_file_names_only_fixtures_that_exist() -> None:
    if not FIXTURES.is_dir():
        pytest.skip(f"no AHP fixtures at {FIXTURES}")
    for folder, reasons in SKIPS.items():
        for name, reason in reasons.items():
            assert (CASES / folder / name).is_file(), f"{folder}/{name} is not a fixture"
            assert reason.strip(), f"{folder}/{name} has no reason"
