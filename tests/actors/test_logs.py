"""An embedded host is quiet unless the program asks for its logs.

Each case runs a fresh interpreter: the tests' own structlog configuration
(tests/conftest.py) would otherwise count as the program's.
"""

import subprocess
import sys
from pathlib import Path

PROGRAM = """
import logging, sys
{setup}
from agenthost.actors import Host
from agenthost.store import SqliteStore
import structlog
host = Host.start(store=SqliteStore("agenthost.db"))
print(host.create_session().chat().send("hi").result().text)
structlog.get_logger("agenthost.example").warning("something_looked_odd", size=3)
host.stop()
"""


def run(tmp_path: Path, setup: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM.format(setup=setup)],
        cwd=tmp_path,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_embedded_host_prints_only_warnings_and_only_on_stderr(tmp_path: Path) -> None:
    done = run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "echo: hi\n"
    assert "something_looked_odd" in done.stderr and "size=3" in done.stderr
    assert "store_migrated" not in done.stderr and "host_started" not in done.stderr


def test_a_program_that_configured_logging_at_info_sees_the_hosts_info_lines(
    tmp_path: Path,
) -> None:
    done = run(tmp_path, "logging.basicConfig(level=logging.INFO, stream=sys.stderr)")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "echo: hi\n"
    assert "host_started" in done.stderr and "agenthost.db" in done.stderr


def test_a_program_that_configured_structlog_keeps_its_configuration(tmp_path: Path) -> None:
    setup = (
        "import structlog\n"
        "structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stdout))"
    )
    done = run(tmp_path, setup)
    assert done.returncode == 0, done.stderr
    assert "host_started" in done.stdout  # its own choice: everything, on stdout
