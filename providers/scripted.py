"""The scripted provider: deterministic, no network, any of three shapes.

`ScriptedProvider(shape="copilot" | "claude" | "codex")` behaves like that
provider's contract: copilot and codex return from send early and end the
turn on idle; claude's send settles with the turn. The object is the
scripted backend: the host opens one adapter per provider session, and its
scripts, gates and records survive connection restarts. Thread-safe: tests
call `on`, `open`, `wait_reached`, `fail_resume` from their own thread.

An unscripted prompt is answered `echo: <prompt>` in `echo_deltas` deltas,
`delta_s` seconds apart (the load generator's paced model). Steps:
Say, Gate, Pause, Crash, DropCompletion, Reject, NoFinishReason, ToolCall.
"""

import asyncio
import itertools
import threading
from collections import defaultdict
from typing import Any, Literal

import attrs

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.provider import (
    Capabilities,
    ConnectionFailed,
    Idle,
    ProviderCancel,
    ProviderResume,
    ProviderSend,
    ReplyDelta,
    ReplyMessage,
    ToolCallCompleted,
    ToolCallStarted,
    UserMessageEcho,
)
from agenthost.providers.base import (
    Emit,
    Provider,
    ProviderAdapter,
    ProviderCallError,
    ProviderCrashed,
    ProviderResumeError,
)

Shape = Literal["copilot", "claude", "codex"]

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


@attrs.frozen
class Say:
    """Stream `text` as one delta."""

    text: str


@attrs.frozen
class Gate:
    """Wait until `provider.open(name)`; an opened gate stays open."""

    name: str


@attrs.frozen
class Pause:
    """Paced delivery: wait on the provider's loop, never blocking a thread."""

    seconds: float


@attrs.frozen
class Crash:
    """The provider connection fails."""


@attrs.frozen
class DropCompletion:
    """The call resolves but no terminal event ever comes."""


@attrs.frozen
class NoFinishReason:
    """The reply ends without a finish reason (no final message, only idle)."""


@attrs.frozen
class Reject:
    """The send call fails with `message` (the provider had taken the turn)."""

    message: str


@attrs.frozen
class ToolCall:
    name: str
    arguments: str = "{}"
    needs_permission: bool = True


Step = Say | Gate | Pause | Crash | DropCompletion | NoFinishReason | Reject | ToolCall


class ScriptedProvider(Provider):
    """The scripted backend. See the module docstring."""

    def __init__(
        self, shape: Shape = "copilot", echo_deltas: int = 3, delta_s: float = 0.0
    ) -> None:
        if shape not in SHAPES:
            raise ValueError(f"unknown shape {shape!r}: expected one of {sorted(SHAPES)}")
        self.shape = shape
        self.capabilities = SHAPES[shape]
        self.echo_deltas = echo_deltas
        self.delta_s = delta_s
        self._lock = threading.Condition()
        self._scripts: dict[str, tuple[Step, ...]] = {}
        self._opened: set[str] = set()
        self._gate_waiters: dict[
            str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]
        ] = defaultdict(list)
        self._reached: dict[str, int] = defaultdict(int)
        self._prompts: list[tuple[str, str]] = []
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
            loop.call_soon_threadsafe(_resolve, future)

    def wait_reached(self, gate: str, timeout: float = 10.0) -> None:
        """Return once a turn is parked at `gate`.

        Raises:
            TimeoutError: none reached it within `timeout`.
        """
        with self._lock:
            if not self._lock.wait_for(lambda: self._reached[gate] > 0, timeout):
                raise TimeoutError(f"no turn reached gate {gate!r} within {timeout} s")

    def fail_resume(self, code: int = -32603, message: str = "", times: int = 1) -> None:
        """Make the next `times` resumes fail with this error."""
        with self._lock:
            self._resume_failures.extend([(code, message)] * times)

    @property
    def prompts(self) -> list[str]:
        """The exact prompt text each send delivered, in order."""
        with self._lock:
            return [text for _, text in self._prompts]

    def prompts_for(self, session_id: str) -> list[str]:
        with self._lock:
            return [text for sid, text in self._prompts if sid == session_id]

    # -- the host's side -------------------------------------------------------
    def open_session(self, session_id: str, chat_id: str, emit: Emit) -> "ScriptedAdapter":
        return ScriptedAdapter(self, session_id, chat_id, emit)

    def _script_for(self, text: str) -> tuple[Step, ...] | None:
        with self._lock:
            return self._scripts.get(text)

    def _record_prompt(self, session_id: str, text: str) -> None:
        with self._lock:
            self._prompts.append((session_id, text))

    def _next_id(self) -> str:
        with self._lock:
            return f"msg-{next(self._ids)}"

    def _take_resume_failure(self) -> tuple[int, str] | None:
        with self._lock:
            return self._resume_failures.pop(0) if self._resume_failures else None

    async def _wait_gate(self, name: str) -> None:
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


def _resolve(future: "asyncio.Future[None]") -> None:
    if not future.done():
        future.set_result(None)


class ScriptedAdapter(ProviderAdapter):
    """One scripted provider session; runs on the provider loop."""

    def __init__(
        self, backend: ScriptedProvider, session_id: str, chat_id: str, emit: Emit
    ) -> None:
        self.backend = backend
        self.capabilities = backend.capabilities
        self.session_id = session_id
        self.chat_id = chat_id
        self._emit = emit
        self._tasks: dict[str, asyncio.Task[None]] = {}

    async def send(self, message: ProviderSend) -> str | None:
        self.backend._record_prompt(message.session_id, message.text)
        message_id = self.backend._next_id()
        steps = self.backend._script_for(message.text)
        if steps is None:
            steps = _echo_steps(message.text, self.backend.echo_deltas, self.backend.delta_s)
        if any(isinstance(step, Reject) for step in steps):
            # The call itself fails: run the steps up to the rejection inline.
            await self._run(message, steps, message_id)
            return message_id
        task = asyncio.get_running_loop().create_task(self._guarded(message, steps, message_id))
        self._tasks[message.turn_id] = task
        turn_id = message.turn_id

        def forget(_task: "asyncio.Task[None]") -> None:
            self._tasks.pop(turn_id, None)

        task.add_done_callback(forget)
        if self.capabilities.call_settles_with_turn:
            await task
        else:
            task.add_done_callback(_swallow)
        return message_id

    async def _guarded(
        self, message: ProviderSend, steps: tuple[Step, ...], message_id: str
    ) -> None:
        try:
            await self._run(message, steps, message_id)
        except ProviderCrashed as crash:
            self._emit(ConnectionFailed(error=crash.error))

    async def _run(self, message: ProviderSend, steps: tuple[Step, ...], message_id: str) -> None:
        turn_id = message.turn_id
        self._emit(
            UserMessageEcho(turn_id=turn_id, text=message.text, provider_message_id=message_id)
        )
        said: list[str] = []
        finish: str | None = "stop"
        terminal = True
        for step in steps:
            match step:
                case Say(text):
                    said.append(text)
                    self._emit(ReplyDelta(turn_id=turn_id, text=text))
                case Gate(name):
                    await self.backend._wait_gate(name)
                case Pause(seconds):
                    await asyncio.sleep(seconds)
                case Crash():
                    raise ProviderCrashed("scripted crash")
                case DropCompletion():
                    terminal = False
                case NoFinishReason():
                    finish = None
                case Reject(text):
                    raise ProviderCallError(
                        AgentHostError(code=ErrorCode.PROVIDER_ERROR, message=text), taken=True
                    )
                case ToolCall(name, arguments):
                    call_id = self.backend._next_id()
                    self._emit(
                        ToolCallStarted(
                            turn_id=turn_id, tool_call_id=call_id, name=name, arguments=arguments
                        )
                    )
                    self._emit(ToolCallCompleted(turn_id=turn_id, tool_call_id=call_id))
        if not terminal:
            return
        if finish is not None:
            self._emit(ReplyMessage(turn_id=turn_id, text="".join(said), finish_reason=finish))
        self._emit(Idle(turn_id=turn_id))

    async def cancel(self, message: ProviderCancel) -> None:
        task = self._tasks.pop(message.turn_id, None)
        if task is not None:
            task.cancel()

    async def resume(self, message: ProviderResume) -> None:
        failure = self.backend._take_resume_failure()
        if failure is not None:
            code, text = failure
            raise ProviderResumeError(code, text, no_history=_means_no_history(code, text))

    async def dispose(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()

    def turn_diagnostic_snapshot(self, turn_id: str) -> dict[str, Any]:
        task = self._tasks.get(turn_id)
        return {"running": task is not None and not task.done()}


def _means_no_history(code: int, text: str) -> bool:
    lowered = text.lower()
    return code == -32603 and any(
        marker in lowered for marker in ("session not found", "no events", "empty session")
    )


def echo_reply(prompt: str) -> str:
    """What an unscripted prompt is answered with."""
    return f"echo: {prompt}"


def _echo_steps(prompt: str, deltas: int, delta_s: float) -> tuple[Step, ...]:
    reply = echo_reply(prompt)
    size = max(1, -(-len(reply) // max(deltas, 1)))
    steps: list[Step] = []
    for i in range(0, len(reply), size):
        if delta_s > 0 and steps:
            steps.append(Pause(delta_s))
        steps.append(Say(reply[i : i + size]))
    return tuple(steps)


def _swallow(task: "asyncio.Task[None]") -> None:
    if not task.cancelled():
        task.exception()
