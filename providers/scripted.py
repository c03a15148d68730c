"""The scripted provider: deterministic, no network, any of three shapes.

`ScriptedProvider(shape="copilot" | "claude" | "codex")` behaves like that
provider's contract: copilot and codex return from send early and end the
turn on idle; claude's send settles with the turn. The object is the
scripted backend: the host opens one adapter per provider session, and its
scripts, gates and records survive connection restarts. Thread-safe: tests
call `on`, `open`, `wait_reached`, `fail_resume` from their own thread.

With `obeys_cancel=False` a run goes on after the host cancels its turn (a
provider slow to stop). With `echo_ids=False` steering echoes carry no message id (the host then
matches them by text). An unscripted prompt is answered `echo: <prompt>` in `echo_deltas` deltas,
`delta_s` seconds apart (the load generator's paced model). Steps:
Say, SayEach, Think, Gate, Pause, Crash, DropCompletion, Reject, NoFinishReason,
ToolCall (with confirmation options, editable), AuthToolCall (an MCP tool
that waits for a token), AskUser (with choices),
ClientToolCall, SpawnSubagent, SettleCall (providers/scripted_steps.py, re-exported
here); the adapter that plays them is providers/scripted_adapter.py. Its
records of what it was sent (prompts, sends, model inputs, answers: a token
an answer carried is never recorded, only that one came) keep the
latest RECORDS_KEPT of each, so a server on it runs for days without holding
every message.
"""

import asyncio
import itertools
import threading
from collections import defaultdict, deque
from typing import Literal

import attrs

from agenthost.messages.provider import Capabilities, ProviderAnswer, ProviderSend
from agenthost.providers.base import Emit, Provider
from agenthost.providers.scripted_adapter import ScriptedAdapter, resolve
from agenthost.providers.scripted_steps import (
    ANSWER,
    AskUser,
    AuthToolCall,
    ClientToolCall,
    Crash,
    DropCompletion,
    Gate,
    NoFinishReason,
    Pause,
    Reject,
    Say,
    SayEach,
    SettleCall,
    SpawnSubagent,
    Step,
    Think,
    ToolCall,
    echo_reply,
    echo_steps,
)

__all__ = [
    "ANSWER",
    "SHAPES",
    "AskUser",
    "AuthToolCall",
    "ClientToolCall",
    "Crash",
    "DropCompletion",
    "Gate",
    "NoFinishReason",
    "Pause",
    "Reject",
    "Say",
    "SayEach",
    "ScriptedAdapter",
    "ScriptedProvider",
    "SettleCall",
    "Shape",
    "SpawnSubagent",
    "Step",
    "Think",
    "ToolCall",
    "echo_reply",
    "echo_steps",
]

REDACTED = "<redacted>"
"""What a recorded answer holds in place of the token it carried."""

_echo_steps = echo_steps  # the name tests/server/test_load.py imports

Shape = Literal["copilot", "claude", "codex"]
RECORDS_KEPT = 1_000
"""How many of its latest prompts, sends, inputs and answers the backend keeps to be read."""

SHAPES: dict[str, Capabilities] = {
    "copilot": Capabilities(
        call_settles_with_turn=False,
        can_withdraw_steering=True,
        stateful_prompt=True,
        accepts_steering=True,
    ),
    "claude": Capabilities(
        call_settles_with_turn=True,
        can_withdraw_steering=False,
        stateful_prompt=True,
        accepts_steering=True,
    ),
    "codex": Capabilities(
        call_settles_with_turn=False,
        can_withdraw_steering=False,
        stateful_prompt=True,
        accepts_steering=True,
    ),
}


class ScriptedProvider(Provider):
    """The scripted backend. See the module docstring."""

    def __init__(
        self,
        shape: Shape = "copilot",
        echo_deltas: int = 3,
        delta_s: float = 0.0,
        echo_ids: bool = True,
        obeys_cancel: bool = True,
        records: int = RECORDS_KEPT,
    ) -> None:
        """`records`: how many of the latest prompts, sends, inputs and answers to keep."""
        if shape not in SHAPES:
            raise ValueError(f"unknown shape {shape!r}: expected one of {sorted(SHAPES)}")
        self.shape = shape
        self.capabilities = SHAPES[shape]
        self.echo_deltas = echo_deltas
        self.delta_s = delta_s
        self.echo_ids = echo_ids
        self.obeys_cancel = obeys_cancel
        # One lock: `_lock` waits and notifies on it; what only records or reads
        # takes `_mutex` itself (a plain lock's `with` runs no Python code: the
        # adapters record on every send).
        self._mutex = threading.Lock()
        self._lock = threading.Condition(self._mutex)
        self._scripts: dict[str, tuple[Step, ...]] = {}
        self._opened: set[str] = set()
        self._gate_waiters: dict[
            str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]
        ] = defaultdict(list)
        self._reached: dict[str, int] = defaultdict(int)
        # What tests read back, the latest `records` of each: a server that runs
        # on the scripted provider for days keeps no more of what it was sent.
        self._prompts: deque[tuple[str, str]] = deque(maxlen=records)
        self._sends: deque[ProviderSend] = deque(maxlen=records)
        self._inputs: deque[str] = deque(maxlen=records)
        self._answers: deque[ProviderAnswer] = deque(maxlen=records)
        self._steered = 0
        self._echoes_held = False
        self._echo_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._resume_failures: list[tuple[int, str]] = []
        self._ids = itertools.count(1)

    # -- scripting (any thread) ----------------------------------------------
    def on(self, prompt_text: str, *steps: Step) -> "ScriptedProvider":
        """Answer every send of exactly `prompt_text`, in every session, with `steps`."""
        with self._lock:
            self._scripts[prompt_text] = steps
        return self

    def open(self, name: str) -> None:
        """Open a gate for every turn parked at it, now and later."""
        with self._lock:
            self._opened.add(name)
            waiters = self._gate_waiters.pop(name, [])
        for loop, future in waiters:
            loop.call_soon_threadsafe(resolve, future)

    def wait_reached(self, gate: str, timeout: float = 10.0) -> None:
        """Return once a turn is parked at `gate`.

        Raises:
            TimeoutError: none reached it within `timeout`.
        """
        with self._lock:
            if not self._lock.wait_for(lambda: self._reached[gate] > 0, timeout):
                raise TimeoutError(f"no turn reached gate {gate!r} within {timeout} s")

    def hold_echoes(self) -> None:
        """Park every run that read steering before it echoes it, until released."""
        with self._lock:
            self._echoes_held = True

    def release_echoes(self) -> None:
        with self._lock:
            self._echoes_held = False
            waiters, self._echo_waiters = self._echo_waiters, []
        for loop, future in waiters:
            loop.call_soon_threadsafe(resolve, future)

    def wait_echo_held(self, timeout: float = 10.0) -> None:
        """Return once a run is parked with read steering it has not echoed.

        Raises:
            TimeoutError: none within `timeout`.
        """
        with self._lock:
            if not self._lock.wait_for(lambda: bool(self._echo_waiters), timeout):
                raise TimeoutError(f"no run held an echo within {timeout} s")

    @property
    def model_inputs(self) -> list[str]:
        """Every user text the model read, in order: sends and steering it consumed."""
        with self._lock:
            return list(self._inputs)

    def wait_steered(self, count: int = 1, timeout: float = 10.0) -> None:
        """Return once the backend has been handed `count` steering messages in all.

        Raises:
            TimeoutError: fewer arrived within `timeout`.
        """
        with self._lock:
            if not self._lock.wait_for(lambda: self._steered >= count, timeout):
                raise TimeoutError(
                    f"{self._steered} of {count} steering messages within {timeout} s"
                )

    @property
    def steered(self) -> int:
        """How many steering messages the backend was handed, in all."""
        with self._lock:
            return self._steered

    def parked_at(self, gate: str) -> bool:
        """Whether a turn waits at `gate` now (non-blocking; for deterministic tests)."""
        with self._lock:
            return self._reached[gate] > 0

    def echo_held(self) -> bool:
        """Whether a run waits to echo steering it read (non-blocking)."""
        with self._lock:
            return bool(self._echo_waiters)

    def fail_resume(self, code: int = -32603, message: str = "", times: int = 1) -> None:
        """Make the next `times` resumes fail with this error."""
        with self._lock:
            self._resume_failures.extend([(code, message)] * times)

    @property
    def prompts(self) -> list[str]:
        """The exact prompt text each send delivered, in order."""
        with self._lock:
            return [text for _, text in self._prompts]

    @property
    def instructions(self) -> list[str]:
        """The instructions each send carried, in order (beside `prompts`)."""
        with self._lock:
            return [send.instructions for send in self._sends]

    @property
    def sends(self) -> list[ProviderSend]:
        """Every send as the provider got it (text, instructions, model, attachments)."""
        with self._lock:
            return list(self._sends)

    def prompts_for(self, session_id: str) -> list[str]:
        with self._lock:
            return [text for sid, text in self._prompts if sid == session_id]

    # -- the host's side -------------------------------------------------------
    def open_session(self, session_id: str, chat_id: str, emit: Emit) -> ScriptedAdapter:
        return ScriptedAdapter(self, session_id, chat_id, emit)

    # -- the adapters' side (their provider loop) ------------------------------
    def script_for(self, text: str) -> tuple[Step, ...] | None:
        with self._mutex:
            return self._scripts.get(text)

    def record_prompt(self, message: ProviderSend) -> None:
        with self._mutex:
            self._prompts.append((message.session_id, message.text))
            self._sends.append(message)

    def record_steered(self) -> None:
        with self._lock:
            self._steered += 1
            self._lock.notify_all()

    def record_answer(self, answer: ProviderAnswer) -> None:
        """Kept without its token: the record says a token came, never which."""
        if answer.token is not None:
            answer = attrs.evolve(answer, token=REDACTED)
        with self._lock:
            self._answers.append(answer)

    @property
    def answers(self) -> list[ProviderAnswer]:
        """Every answer the host gave to a request, in order."""
        with self._lock:
            return list(self._answers)

    def record_input(self, text: str) -> None:
        with self._mutex:
            self._inputs.append(text)

    async def wait_echo_release(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if not self._echoes_held:
                return
            future: asyncio.Future[None] = loop.create_future()
            self._echo_waiters.append((loop, future))
            self._lock.notify_all()
        await future

    def next_id(self) -> str:
        with self._mutex:
            return f"msg-{next(self._ids)}"

    def take_resume_failure(self) -> tuple[int, str] | None:
        with self._lock:
            return self._resume_failures.pop(0) if self._resume_failures else None

    async def wait_gate(self, name: str) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if name in self._opened:
                return
            future: asyncio.Future[None] = loop.create_future()
            self._gate_waiters[name].append((loop, future))
            self._reached[name] += 1
            self._lock.notify_all()
        try:
            await future
        finally:
            with self._lock:
                self._reached[name] -= 1
