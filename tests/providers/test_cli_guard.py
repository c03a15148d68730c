"""The CLI guard: a provider CLI never outlives the host and never gets a terminal."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agenthost.messages import AgentHostError, ErrorCode
from agenthost.providers.cli_guard import resolve_cli
from tests.providers.processes import wait_gone

HERE = Path(__file__).parent
WAIT_S = 10.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux's")
def test_a_cli_dies_with_a_host_killed_by_sigkill_and_has_no_terminal() -> None:
    host = subprocess.Popen(
        [sys.executable, str(HERE / "guard_host.py"), str(HERE / "guard_cli.sh")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    cli_pid = None
    try:
        assert host.stdout is not None
        pid, session, group, tty, *argv = host.stdout.readline().split()
        cli_pid = int(pid)
        assert (session, group) == (pid, pid), "the CLI leads its own session and group"
        assert tty == "no"
        assert argv == ["--flag"], "the SDK's arguments reach the CLI"
        os.kill(host.pid, signal.SIGKILL)
        assert wait_gone(cli_pid), "the CLI outlived its host"
    finally:
        host.kill()
        host.wait(timeout=WAIT_S)
        if cli_pid is not None and not wait_gone(cli_pid):
            os.kill(cli_pid, signal.SIGKILL)


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
