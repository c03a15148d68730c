"""Where AHP's conformance fixtures are, and what the runner finds there.

The folder is AHP_FIXTURES, else the first `shared/ahp/fixtures` beside the
repository or beside a folder above it (a git worktree sits one level down).
"""

import os
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("reducers", "round-trips")
SKIPS = tomllib.loads((Path(__file__).parent / "skip.toml").read_text())


def _fixtures_dir() -> Path:
    if "AHP_FIXTURES" in os.environ:
        return Path(os.environ["AHP_FIXTURES"])
    beside = [parent / "shared" / "ahp" / "fixtures" for parent in REPO.parents]
    return next((path for path in beside if path.is_dir()), beside[0])


FIXTURES = _fixtures_dir()
CASES = FIXTURES / "types" / "test-cases"


def fixture_paths(kind: str, fixtures: Path = FIXTURES) -> list[Path]:
    """The fixtures of one kind (a folder of `FOLDERS`), in name order."""
    cases = fixtures / "types" / "test-cases" / kind
    return sorted(cases.glob("*.json")) if fixtures.is_dir() else []


def summary(fixtures: Path = FIXTURES) -> str:
    """One line: how many fixtures the runner found, and where (or that it found none)."""
    if not fixtures.is_dir():
        return f"AHP fixtures: none at {fixtures} (set AHP_FIXTURES): the fixture tests skip"
    counts = {kind: len(fixture_paths(kind, fixtures)) for kind in FOLDERS}
    skipped = sum(len(SKIPS.get(kind, {})) for kind in FOLDERS)
    return (
        f"AHP fixtures: {counts['reducers']} reducer and {counts['round-trips']} round-trip"
        f" fixtures at {fixtures} ({skipped} skipped by tests/ahp/skip.toml)"
    )
