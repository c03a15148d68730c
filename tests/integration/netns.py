"""A loopback-only network namespace for the vendors' real CLIs.

A real CLI (Claude Code, codex, the Copilot CLI) dials its vendor as soon as
it starts. Here every one of them runs inside one network namespace that has
nothing but a loopback interface: `unshare -n` makes it (a holder process
keeps it alive for the test session), `ip link set lo up` brings loopback up,
and the CLI path handed to a provider is a wrapper script that enters it with
`nsenter --net=...` and checks, before it starts the CLI, that loopback is the
only interface there. Every process the CLI starts inherits the namespace.
The wrapper fails closed: with the holder gone, or another interface present,
it exits without starting the CLI.

The project's fake model APIs listen on 127.0.0.1 inside the same namespace:
`LoopbackNamespace.serve_in` runs an asyncio loop on a thread that joined the
namespace (setns(2) moves only the calling thread), so the sockets the loop
opens belong to it.
"""

import asyncio
import ctypes
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
WAIT_S = 30.0
NOT_LOOPBACK_ONLY = 97  # the wrapper's exit status when the namespace is not loopback-only

WRAPPER = """#!/bin/sh
# Runs {real} inside the loopback-only namespace of the agenthost tests, or not at all.
exec nsenter --net={netns} -- /bin/sh -c '
  if grep -v -e "^ *lo:" -e "|" /proc/net/dev | grep -q .; then
    echo "netns wrapper: not a loopback-only namespace; refusing to start $0" >&2
    exit {refused}
  fi
  exec "$0" "$@"' {real} "$@"
"""


def unavailable() -> str | None:
    """Why a loopback-only namespace cannot be made here, or None when it can."""
    for tool in ("unshare", "nsenter", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    try:
        made = subprocess.run(
            ["unshare", "-n", "true"], capture_output=True, text=True, timeout=WAIT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare -n true failed: {exc}"
    if made.returncode != 0:
        return f"unshare -n true failed: {made.stderr.strip() or made.returncode}"
    return None


class LoopbackNamespace:
    """One network namespace with loopback alone, held open by a holder process."""

    def __init__(self, holder: subprocess.Popen[str]) -> None:
        self._holder = holder
        self.path = f"/proc/{holder.pid}/ns/net"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def create(cls) -> "LoopbackNamespace":
        """Make the namespace; its holder exits when its stdin closes (with us)."""
        holder = subprocess.Popen(
            ["unshare", "-n", "--", "/bin/sh", "-c", "ip link set lo up && echo up && exec cat"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != "up":
            holder.kill()
            holder.wait(WAIT_S)
            raise RuntimeError("the loopback namespace did not come up")
        return cls(holder)

    def close(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(WAIT_S)
        if self._holder.stdin is not None:
            self._holder.stdin.close()
        try:
            self._holder.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            self._holder.kill()
            self._holder.wait(WAIT_S)

    def wrap(self, real: str | os.PathLike[str], where: Path) -> Path:
        """A script at `where` that runs `real` inside this namespace (only there)."""
        where.write_text(
            WRAPPER.format(netns=self.path, real=_quote(os.fspath(real)), refused=NOT_LOOPBACK_ONLY)
        )
        where.chmod(0o755)
        return where

    def run(self, argv: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
        """Run a command inside the namespace (through nsenter), to completion."""
        return subprocess.run(
            ["nsenter", f"--net={self.path}", "--", *argv],
            capture_output=True,
            text=True,
            timeout=WAIT_S,
            **options,
        )

    # -- the fake APIs' loop ----------------------------------------------------------------
    def serve_in(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the namespace's event loop (its thread joined the namespace)."""
        if self._loop is None:
            self._start_loop()
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(WAIT_S)

    def call_soon(self, fn: Callable[[], None]) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(fn)

    def _start_loop(self) -> None:
        started: Future[asyncio.AbstractEventLoop] = Future()

        def run() -> None:
            try:
                _join(self.path)
            except OSError as exc:
                started.set_exception(exc)
                return
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            started.set_result(loop)
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="netns-apis", daemon=True)
        self._thread.start()
        self._loop = started.result(WAIT_S)


def _join(path: str) -> None:
    """setns(2) this thread into the network namespace at `path`."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns({path}): {os.strerror(errno)}")
    finally:
        os.close(fd)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
