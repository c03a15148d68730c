"""The codex CLI's process as the adapter runs it: the threads the SDK's
blocking calls run on, and why an exited CLI exited, in its own words.

The SDK (openai-codex) is synchronous: each request blocks its caller until
the answer comes. `Worker` is one daemon thread running submitted calls in
order; the adapter has one for its requests and one for its turns' reads.
`exit_reason` reads what the SDK keeps private (the process and the stderr
it drains); this is the one module that does, and tests/providers/codex fail
if those move.
"""

import concurrent.futures
import contextlib
import queue
import re
import subprocess
import threading
from collections.abc import Callable
from typing import TypeVar

from openai_codex.client import CodexClient

T = TypeVar("T")
EXIT_WAIT_S = 2.0  # how long a failure waits for the exited CLI's last stderr lines
_NOISE = re.compile(r"^\s*(\d+: |Stack backtrace:|WARNING: proceeding, even though)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Worker:
    """One daemon thread running submitted calls in order (daemon: a call the
    CLI never answers must not hold up the interpreter's exit)."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()

    def submit(self, fn: Callable[[], T]) -> "concurrent.futures.Future[T]":
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def job() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the awaiting coroutine
                future.set_exception(exc)

        self._jobs.put(job)
        return future

    def stop(self) -> None:
        self._jobs.put(None)


def exit_reason(client: CodexClient, what: str) -> str:
    """Why the CLI exited, in its own words: its status and the last lines of its
    stderr, once the SDK drained them (the SDK sees stdout close before it reads
    the CLI's last stderr lines). Blocks up to EXIT_WAIT_S: call it off the loop.

    The SDK keeps the process and the stderr it drains private (`_proc`,
    `_stderr_thread`, `_stderr_lines` in openai-codex 0.163); this is the one
    place that reads them, and tests/providers/codex fail if they move.
    """
    process: subprocess.Popen[str] | None = getattr(client, "_proc", None)
    status = None
    if process is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            status = process.wait(EXIT_WAIT_S)
    drain: threading.Thread | None = getattr(client, "_stderr_thread", None)
    if drain is not None:
        drain.join(EXIT_WAIT_S)
    lines = [_ANSI.sub("", line).strip() for line in getattr(client, "_stderr_lines", ())]
    said = [line for line in lines if line and not _NOISE.match(line)]
    errors = [line for line in said if "error" in line.lower()]
    words = "; ".join((errors or said)[-3:]) or "it said nothing on stderr"
    code = "" if status is None else f", status {status}"
    return f"the codex CLI exited ({what}{code}): {words}"
