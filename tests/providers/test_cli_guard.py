"""The CLI guard: nothing a provider CLI starts outlives the host, and it never gets a terminal.

A stand-in host (guard_host.py) starts a stand-in CLI (guard_cli.sh) through the
launcher, or a loader-shaped one (guard_loader.sh, which starts guard_cli.sh as
its child, as npm's `copilot` node loader starts the native binary).
"""

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from agenthost.messages import AgentHostError, ErrorCode
from agenthost.providers.cli_guard import resolve_cli
from tests.providers.processes import wait_gone

HERE = Path(__file__).parent
WAIT_S = 10.0
linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="parent-death signal is Linux's"
)


@attrs.frozen
class Report:
    """What the stand-in CLI said of itself, and the launcher's pid."""

    launcher: int
    pid: int
    ppid: int
    session: int
    group: int
    tty: str
    left: int | None  # a child it left running
    argv: list[str]


class GuardedHost:
    """A stand-in host process running one stand-in CLI through the launcher."""

    def __init__(self, cli: Path, **env: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "guard_host.py"), str(cli)]
            + [f"{k}={v}" for k, v in env.items()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.report = self._read_report()

    def _read_report(self) -> Report:
        assert self.process.stdout is not None
        launcher, pid, ppid, session, group, tty, left, *argv = (
            self.process.stdout.readline().split()
        )
        return Report(
            launcher=int(launcher),
            pid=int(pid),
            ppid=int(ppid),
            session=int(session),
            group=int(group),
            tty=tty,
            left=None if left == "-" else int(left),
            argv=argv,
        )

    def launcher_ended(self) -> str:
        """The host's line once the launcher exited and the CLI's stdout reached its end."""
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def pids(self) -> list[int]:
        report = self.report
        return [report.launcher, report.pid, report.ppid, *([report.left] if report.left else [])]

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=WAIT_S)
        for pid in self.pids():  # never leave a stray behind, whatever the test found
            if not wait_gone(pid, 0.1):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def guarded() -> Iterator[type[GuardedHost]]:
    hosts: list[GuardedHost] = []

    class Tracked(GuardedHost):
        def __init__(self, cli: Path, **env: str) -> None:
            super().__init__(cli, **env)
            hosts.append(self)

    yield Tracked
    for host in hosts:
        host.kill()


@linux_only
def test_a_cli_dies_with_a_host_killed_by_sigkill_and_has_no_terminal(
    guarded: type[GuardedHost],
) -> None:
    host = guarded(HERE / "guard_cli.sh")
    report = host.report
    assert report.session == report.group == report.launcher == report.ppid, (
        "the CLI runs in a session and group of their own, led by the launcher, its parent"
    )
    assert report.session != os.getsid(0)
    assert report.tty == "no"
    assert report.argv == ["--flag"], "the SDK's arguments reach the CLI"
    os.kill(host.process.pid, signal.SIGKILL)
    assert wait_gone(report.pid), "the CLI outlived its host"
    assert wait_gone(report.launcher), "the launcher outlived its host"


@linux_only
def test_a_loader_and_the_cli_it_started_die_with_a_host_killed_by_sigkill(
    guarded: type[GuardedHost],
) -> None:
    host = guarded(HERE / "guard_loader.sh")
    report = host.report
    loader = report.ppid
    assert loader != report.launcher, "the CLI is the loader's child"
    assert report.session == report.launcher
    os.kill(host.process.pid, signal.SIGKILL)
    assert wait_gone(loader), "the loader outlived its host"
    assert wait_gone(report.pid), "the CLI the loader started outlived the host"


@linux_only
def test_a_loader_killed_by_sigkill_takes_the_cli_it_started_and_the_launcher_exits(
    guarded: type[GuardedHost],
) -> None:
    host = guarded(HERE / "guard_loader.sh")
    report = host.report
    os.kill(report.ppid, signal.SIGKILL)
    assert wait_gone(report.pid), "the CLI outlived the loader that started it"
    assert host.launcher_ended() == f"exited {-signal.SIGKILL} eof ''", (
        "the launcher ends as its CLI did, and the SDK's pipe reaches its end"
    )


@linux_only
def test_the_launcher_killed_by_sigkill_takes_the_whole_tree(
    guarded: type[GuardedHost],
) -> None:
    """The SDKs' hard stop is a SIGKILL of the process they spawned: the launcher."""
    host = guarded(HERE / "guard_loader.sh")
    report = host.report
    os.kill(report.launcher, signal.SIGKILL)
    assert wait_gone(report.ppid), "the loader outlived the launcher"
    assert wait_gone(report.pid), "the CLI outlived the launcher"


@linux_only
def test_what_an_exiting_cli_left_running_is_killed_and_the_cli_s_status_is_kept(
    guarded: type[GuardedHost],
) -> None:
    host = guarded(HERE / "guard_cli.sh", GUARD_CLI_EXIT="3")
    report = host.report
    assert report.left is not None
    assert host.launcher_ended() == "exited 3 eof ''"
    assert wait_gone(report.left), "a child the CLI left behind outlived it"


@linux_only
def test_a_terminate_of_the_launcher_reaches_the_cli(guarded: type[GuardedHost]) -> None:
    host = guarded(HERE / "guard_cli.sh")
    os.kill(host.report.launcher, signal.SIGTERM)
    assert wait_gone(host.report.pid)
    assert host.launcher_ended() == f"exited {-signal.SIGTERM} eof ''"


def test_a_missing_cli_is_a_clear_error_naming_the_option(tmp_path: Path) -> None:
    with pytest.raises(AgentHostError) as missing:
        resolve_cli(tmp_path / "nope", provider="copilot")
    assert missing.value.code is ErrorCode.PROVIDER_UNAVAILABLE
    assert "cli_path=" in missing.value.message and "copilot" in missing.value.message
    with pytest.raises(AgentHostError, match="cli_path="):
        resolve_cli(None, provider="claude")
    not_executable = tmp_path / "cli"
    not_executable.write_text("")
    with pytest.raises(AgentHostError, match="not executable"):
        resolve_cli(not_executable, provider="codex")


def test_the_launcher_refuses_to_run_outside_agenthost() -> None:
    from agenthost.providers.cli_guard import launcher_path

    ran = subprocess.run([launcher_path()], capture_output=True, text=True, timeout=WAIT_S)
    assert ran.returncode != 0
    assert "run only by agenthost" in ran.stderr
