"""Run a vendor CLI so that it never outlives the host and never gets a terminal.

The SDKs spawn their CLI themselves, from the path they are given. An
adapter hands its SDK the `agenthost-cli-guard` launcher instead, plus the
environment from `guard_env()`. The launcher (a console script) puts itself
in a new session (its own process group, no controlling terminal), arms a
parent-death signal (SIGKILL), and then becomes the real CLI with `execv`, so
the SDK's process handle is the CLI itself. A host killed with SIGKILL takes
its CLIs with it.

The parent-death signal follows the thread that spawned the CLI: adapters
spawn from their provider loop's thread (or a long-lived executor thread),
which lives as long as the host.
"""

import contextlib
import ctypes
import os
import shutil
import signal
import sys
from pathlib import Path

from agenthost.messages.errors import AgentHostError, ErrorCode

LAUNCHER = "agenthost-cli-guard"
CLI_ENV = "AGENTHOST_GUARDED_CLI"
PARENT_ENV = "AGENTHOST_GUARD_PARENT"
_PR_SET_PDEATHSIG = 1


def resolve_cli(cli_path: str | os.PathLike[str] | None, *, provider: str) -> str:
    """The absolute path of an executable CLI, or a clear error naming the option.

    Nothing is downloaded or searched for: the user says where the CLI is.
    """
    if cli_path is None:
        raise AgentHostError(
            code=ErrorCode.PROVIDER_UNAVAILABLE,
            message=f"{provider}: no CLI configured; set cli_path= to the {provider} CLI",
        )
    path = Path(cli_path).expanduser()
    found = shutil.which(str(path)) if path.parent == Path() else str(path)
    if found is None or not os.access(found, os.X_OK) or not Path(found).is_file():
        raise AgentHostError(
            code=ErrorCode.PROVIDER_UNAVAILABLE,
            message=f"{provider}: CLI not found or not executable at {cli_path!s}; set cli_path=",
        )
    return str(Path(found).resolve())


def launcher_path() -> str:
    """The installed launcher, beside this interpreter or on PATH."""
    beside = Path(sys.executable).with_name(LAUNCHER)
    if beside.is_file():
        return str(beside)
    found = shutil.which(LAUNCHER)
    if found is None:
        raise AgentHostError(
            code=ErrorCode.PROVIDER_UNAVAILABLE,
            message=f"the {LAUNCHER} launcher is not installed; reinstall agenthost",
        )
    return found


def guard_env(cli: str) -> dict[str, str]:
    """What the launcher needs in its environment to run `cli` for this process."""
    return {CLI_ENV: cli, PARENT_ENV: str(os.getpid())}


def _arm_parent_death_signal() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def main() -> None:
    """The launcher: detach, arm the parent-death signal, become the CLI."""
    cli = os.environ.pop(CLI_ENV, None)
    parent = os.environ.pop(PARENT_ENV, None)
    if cli is None or parent is None:
        sys.exit(f"{LAUNCHER}: run only by agenthost ({CLI_ENV} and {PARENT_ENV} unset)")
    with contextlib.suppress(OSError):  # already a group leader: no terminal to lose either
        os.setsid()
    if sys.platform.startswith("linux"):
        _arm_parent_death_signal()
    if os.getppid() != int(parent):
        sys.exit(f"{LAUNCHER}: the host exited before the CLI started")
    os.execv(cli, [cli, *sys.argv[1:]])
