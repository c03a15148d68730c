"""Run a vendor CLI so that nothing it starts outlives the host or gets a terminal.

The SDKs spawn their CLI themselves, from the path they are given. An
adapter hands its SDK the `agenthost-cli-guard` launcher instead, plus the
environment from `guard_env()`. The launcher (a console script) owns the
whole process tree of the CLI, not only the process the SDK sees: a CLI may
be a loader that starts the real binary as its child (npm's `copilot` is a
node script that runs the native CLI), and each CLI starts tools of its own.

On Linux the launcher
1. starts a new session (its own process group, no controlling terminal) and
   makes itself the subreaper of everything below it, so an orphaned
   grandchild is reparented to it, not to init;
2. arms a parent-death signal: the host dying, even by SIGKILL, tells it;
3. forks a keeper, whose own parent-death signal tells it the launcher died
   (the SDK's hard stop is a SIGKILL of the process it spawned);
4. forks the CLI (parent-death signal SIGKILL, the SDK's stdio as its own)
   and closes its own copies of stdio, so the SDK sees EOF when the CLI's
   tree is gone;
5. forwards SIGTERM, SIGINT and SIGHUP to the CLI; when the CLI exits, kills
   whatever is left of the session and exits with the CLI's status.
Whoever notices the end (the launcher on the CLI's exit or the host's
death; the keeper on the launcher's death) SIGKILLs every process of the
session. A process that leaves the session on purpose (setsid) is out of
reach of that sweep, as it would be of a process-group kill.

The parent-death signal follows the thread that spawned the launcher:
adapters spawn from their provider loop's thread (or a long-lived executor
thread), which lives as long as the host.

Elsewhere (no prctl) the launcher only starts a new session and becomes the
CLI with `execv`, as a best effort.
"""

import contextlib
import ctypes
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

from agenthost.messages.errors import AgentHostError, ErrorCode

LAUNCHER = "agenthost-cli-guard"
CLI_ENV = "AGENTHOST_GUARDED_CLI"
PARENT_ENV = "AGENTHOST_GUARD_PARENT"
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
HOST_DIED = signal.SIGUSR1  # the launcher's parent-death signal
LAUNCHER_DIED = signal.SIGUSR2  # the keeper's parent-death signal
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_SWEEPS = 50  # rounds of killing until the session is empty


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


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _session_of(pid: str) -> tuple[int, int, str] | None:
    """(parent pid, session id, state) of a process, from /proc; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[3]), fields[0]


def kill_session(session: int, spare: int) -> None:
    """SIGKILL every live process of `session` (and every child of `spare`), but
    `spare` itself; reap what becomes ours; again until none is left (bounded)."""
    for _ in range(_SWEEPS):
        found = False
        for pid in filter(str.isdigit, os.listdir("/proc")):
            about = _session_of(pid)
            if about is None or int(pid) == spare or about[2] in "ZX":
                continue
            parent, sid, _ = about
            if sid == session or parent == spare:
                found = True
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(pid), signal.SIGKILL)
        _reap()
        if not found:
            return


def _reap() -> None:
    """Collect every child of ours that has exited (a subreaper inherits orphans)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _quiet_stdio() -> None:
    """Drop our copies of the SDK's pipes: its EOF is the CLI tree's to give."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _keeper(launcher: int, session: int) -> NoReturn:
    """The keeper's life: wait for the launcher to die, then end the session."""

    def launcher_died(signum: int, frame: Any) -> None:
        kill_session(session, spare=os.getpid())
        os._exit(0)

    signal.signal(LAUNCHER_DIED, launcher_died)
    for forwarded in FORWARDED:
        signal.signal(forwarded, signal.SIG_IGN)  # only the launcher's death ends us
    _prctl(_PR_SET_PDEATHSIG, LAUNCHER_DIED)
    _quiet_stdio()
    if os.getppid() != launcher:
        launcher_died(LAUNCHER_DIED, None)
    while True:
        signal.pause()


def _run_cli(cli: str, argv: list[str], launcher: int) -> NoReturn:
    """In the forked CLI process: die with the launcher, then become the CLI."""
    for restored in (*FORWARDED, HOST_DIED, LAUNCHER_DIED, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(restored, signal.SIG_DFL)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != launcher:
        os._exit(1)
    try:
        os.execv(cli, [cli, *argv])
    except OSError as exc:
        sys.stderr.write(f"{LAUNCHER}: cannot run {cli}: {exc.strerror}\n")
        os._exit(127)


def _own_the_tree(cli: str, argv: list[str], parent: int) -> NoReturn:
    """The launcher on Linux: steps 1-5 of the module docstring."""
    with contextlib.suppress(OSError):  # already a group leader: no terminal to lose either
        os.setsid()
    me, session = os.getpid(), os.getsid(0)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)

    def host_died(signum: int, frame: Any) -> None:
        kill_session(session, spare=me)
        os._exit(128 + signal.SIGKILL)

    signal.signal(HOST_DIED, host_died)
    _prctl(_PR_SET_PDEATHSIG, HOST_DIED)
    if os.getppid() != parent:
        sys.exit(f"{LAUNCHER}: the host exited before the CLI started")
    if os.fork() == 0:
        _keeper(me, session)
    child = os.fork()
    if child == 0:
        _run_cli(cli, argv, me)

    def forward(signum: int, frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for forwarded in FORWARDED:
        signal.signal(forwarded, forward)
    _quiet_stdio()
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            break
    kill_session(session, spare=me)  # what the CLI left behind, and the keeper
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # killed by a signal: end the same way, as the CLI did
        with contextlib.suppress(OSError, ValueError):  # SIGKILL's cannot be set
            signal.signal(-code, signal.SIG_DFL)
        os.kill(me, -code)
        code = 128 - code  # a signal that does not kill: the shell's convention
    os._exit(code)


def main() -> None:
    """The launcher: own the CLI's process tree (Linux), or detach and become the CLI."""
    cli = os.environ.pop(CLI_ENV, None)
    parent = os.environ.pop(PARENT_ENV, None)
    if cli is None or parent is None:
        sys.exit(f"{LAUNCHER}: run only by agenthost ({CLI_ENV} and {PARENT_ENV} unset)")
    if sys.platform.startswith("linux"):
        _own_the_tree(cli, sys.argv[1:], int(parent))
    with contextlib.suppress(OSError):
        os.setsid()
    if os.getppid() != int(parent):
        sys.exit(f"{LAUNCHER}: the host exited before the CLI started")
    os.execv(cli, [cli, *sys.argv[1:]])
