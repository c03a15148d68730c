"""Waiting for processes that are not our children (a CLI spawned by a host we killed)."""

import os
import select

WAIT_S = 10.0


def wait_gone(pid: int, timeout: float = WAIT_S) -> bool:
    """Wait (bounded) for process `pid` to exit; True once it has."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(fd)


def guarded(process: dict[str, int]) -> bool:
    """A stand-in's own report (pid, ppid, sid, pgid) says it runs under the CLI
    guard: in a session and group of their own, led by the guard, its parent."""
    return process["sid"] == process["pgid"] == process["ppid"] != os.getsid(0)
