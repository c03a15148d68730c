"""A property run's trace: every call the machine made and what it answered,
and every event its subscriber saw, in order. Written to a file under the
pytest tmp dir and into the assertion message when a check fails (threads make
hypothesis's own replay of a failure less reliable than the trace)."""

import itertools
from pathlib import Path
from typing import Any

TRACE_DIR: list[Path] = []
"""Where traces go: set by the test module's fixture (the pytest tmp dir)."""

_runs = itertools.count(1)
TAIL = 60  # lines of the trace put into an assertion message


class Trace:
    def __init__(self, title: str) -> None:
        self.title = title
        self.lines: list[str] = []

    def call(self, what: str, answer: Any = None) -> None:
        self.lines.append(f"call  {what} -> {_short(answer)}")

    def event(self, event: Any) -> None:
        self.lines.append(f"event {_short(event)}")

    def note(self, text: str) -> None:
        self.lines.append(f"note  {text}")

    def write(self, failure: BaseException) -> str:
        """Write the whole trace to a file; returns the message to fail with."""
        text = "\n".join([self.title, *self.lines, f"FAILED: {failure!r}"])
        where = "(no trace directory)"
        if TRACE_DIR:
            path = TRACE_DIR[0] / f"lifecycle-{next(_runs)}.txt"
            path.write_text(text)
            where = str(path)
        tail = "\n".join(self.lines[-TAIL:])
        return f"{failure}\n-- trace in {where}; its last {TAIL} lines:\n{tail}"


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
