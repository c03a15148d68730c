"""The event loops agenthost runs itself: uvloop's where it is installed, else asyncio's.

agenthost starts asyncio loops of its own in two kinds of place: each provider
kind's loop thread (providers/base.py: ProviderLoop, where the adapters run),
and the CLIs that serve or drive hosts (`agenthost serve` and its fronts,
`agenthost load`). On those, uvloop (libuv under asyncio's API; a dependency
except on Windows) runs the same code with less interpreter work a callback:
the event loop's own machinery (scheduling a callback, waking a task, taking
a call from another thread) is C instead of Python. Measured in
`agenthost load --chats 100 --turns 5` (instructions a turn, cachegrind):
6.7% fewer with both the provider loop and the load's loop on uvloop, half
of it from each.

A program that embeds agenthost keeps its own loop: `AsyncHost` works on any
asyncio loop. `AGENTHOST_LOOP=asyncio` makes agenthost's own loops asyncio's
(to rule uvloop out when a provider library misbehaves on it).
"""

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

LOOP_ENV = "AGENTHOST_LOOP"


def _factory() -> Callable[[], asyncio.AbstractEventLoop]:
    choice = os.environ.get(LOOP_ENV, "").strip().lower()
    if choice not in ("", "uvloop", "asyncio"):
        raise ValueError(f"{LOOP_ENV}={choice!r}: choose uvloop or asyncio")
    if choice == "asyncio":
        return asyncio.new_event_loop
    try:
        import uvloop
    except ImportError:  # Windows, or not installed
        if choice == "uvloop":
            raise ValueError(f"{LOOP_ENV}=uvloop: uvloop is not installed") from None
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def new_loop() -> asyncio.AbstractEventLoop:
    """A new event loop of the kind agenthost runs (see the module docstring)."""
    return _factory()()


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on a loop of the kind agenthost runs."""
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(main)


def kind() -> str:
    """The name of the loop kind `new_loop` makes ("uvloop" or "asyncio").

    Raises:
        ValueError: AGENTHOST_LOOP names no loop agenthost runs, or uvloop
            while it is not installed.
    """
    return "asyncio" if _factory() is asyncio.new_event_loop else "uvloop"
