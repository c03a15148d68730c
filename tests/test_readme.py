"""Every ```python block of README.md runs as written, in order, in one
namespace, in a fresh folder with a fresh HOME, as a newcomer would paste them.

A block that needs what a fresh machine lacks starts with a line
`# requires: <what>`; it is only compiled, and reported as skipped with what
it needs. The blocks run in a child interpreter: this suite's own logging
setup (tests/conftest.py) would hide what a newcomer's program prints, and
the host the blocks start must print nothing but what they print.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
REQUIRES = re.compile(r"\A# requires: (.+)$", re.MULTILINE)

# Runs the blocks it is given on stdin, each compiled under its README line
# so a traceback points at the README; stops at the first failure.
RUNNER = """
import json, sys
namespace = {"__name__": "__main__"}
for line, source in json.load(sys.stdin):
    exec(compile(source, f"README.md, the block at line {line}", "exec"), namespace)
"""


def blocks() -> list[tuple[int, str]]:
    """(line, source) of each python block."""
    text = README.read_text()
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK.finditer(text)]


def requirement(source: str) -> str | None:
    found = REQUIRES.match(source)
    return found.group(1) if found else None


def test_the_readme_has_python_blocks_that_run_here() -> None:
    runnable = [b for b in blocks() if requirement(b[1]) is None]
    assert len(runnable) >= 5, "the README lost its runnable examples"


def block_id(value: object) -> str:
    return f"line-{value}" if isinstance(value, int) else ""


@pytest.mark.parametrize("line,source", blocks(), ids=block_id)
def test_each_block_is_valid_python(line: int, source: str) -> None:
    compile(source, f"README.md, the block at line {line}", "exec")
    needs = requirement(source)
    if needs is not None:
        pytest.skip(f"README.md line {line} requires {needs}")


def test_the_runnable_blocks_run_in_order_in_a_fresh_folder_and_print_no_logs(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    runnable = [b for b in blocks() if requirement(b[1]) is None]
    done = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(runnable),
        cwd=work,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # quiet: not a log line, not a warning
    assert "store_migrated" not in done.stdout and "host_started" not in done.stdout
    # the embedded default keeps its store where the README says
    assert (home / ".local/share/agenthost/agenthost.db").is_file()
