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
Say, Gate, Pause, Crash, DropCompletion, Reject, NoFinishReason, ToolCall,
AskUser, ClientToolCall, SpawnSubagent, SettleCall. Its records of what it
was sent (prompts, sends, model inputs, answers) keep the latest RECORDS_KEPT
of each, so a server on it runs for days without holding every message.
"""

import asyncio
import itertools
import threading
from collections import defaultdict, deque
from typing import Any, Literal

import attrs

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.provider import (
    Capabilities,
    ConnectionFailed,
    HostRequestKind,
    HostRequestOpened,
    Idle,
    ProviderAnswer,
    ProviderCancel,
    ProviderResume,
    ProviderSend,
    ProviderSteer,
    ProviderWithdraw,
    ReplyDelta,
    ReplyMessage,
    SubagentStarted,
    ToolCallCompleted,
    ToolCallStarted,
    UsageUpdated,
    UserMessageEcho,
)
from agenthost.providers.base import (
    Emit,
    HostRequests,
    Provider,
    ProviderAdapter,
    ProviderCallError,
    ProviderCrashed,
    ProviderResumeError,
)

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


@attrs.frozen
class Say:
    """Stream `text` as one delta."""

    text: str


@attrs.frozen
class SayEach:
    """Stream each of `texts` as a delta of its own, one step each (the echo reply
    of an unscripted prompt, paced by no pause)."""

    texts: tuple[str, ...]


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
    """The send call fails with `message`. `before_start`: the provider never
    took the turn (else it had taken it)."""

    message: str
    before_start: bool = False


@attrs.frozen
class ToolCall:
    """A tool the model runs; with `needs_permission` it first asks the host."""

    name: str
    arguments: str = "{}"
    needs_permission: bool = True


@attrs.frozen
class AskUser:
    """The model asks the user a question and waits for the answer."""

    question: str


@attrs.frozen
class ClientToolCall:
    """The model calls a tool a client executes, and waits for its result.
    With `gate`, the call is announced first and the request waits for the gate."""

    tool: str
    arguments: str = "{}"
    gate: str | None = None


@attrs.frozen
class SpawnSubagent:
    """A tool call spawns a subagent that answers `prompt` (its own script, or
    the echo). `background`: the call returns at once and the subagent runs on.
    `drop_end`: the subagent's own end never arrives."""

    prompt: str
    background: bool = False
    drop_end: bool = False


@attrs.frozen
class SettleCall:
    """The send call resolves now (a call that settles with its turn), while the
    run goes on."""


Step = (
    Say
    | SayEach
    | Gate
    | Pause
    | Crash
    | DropCompletion
    | NoFinishReason
    | Reject
    | ToolCall
    | AskUser
    | ClientToolCall
    | SpawnSubagent
    | SettleCall
)


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
        self._lock = threading.Condition()
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
            loop.call_soon_threadsafe(_resolve, future)

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
            loop.call_soon_threadsafe(_resolve, future)

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
    def open_session(self, session_id: str, chat_id: str, emit: Emit) -> "ScriptedAdapter":
        return ScriptedAdapter(self, session_id, chat_id, emit)

    def _script_for(self, text: str) -> tuple[Step, ...] | None:
        with self._lock:
            return self._scripts.get(text)

    def _record_prompt(self, message: ProviderSend) -> None:
        with self._lock:
            self._prompts.append((message.session_id, message.text))
            self._sends.append(message)

    def _record_steered(self) -> None:
        with self._lock:
            self._steered += 1
            self._lock.notify_all()

    def _record_answer(self, answer: ProviderAnswer) -> None:
        with self._lock:
            self._answers.append(answer)

    @property
    def answers(self) -> list[ProviderAnswer]:
        """Every answer the host gave to a request, in order."""
        with self._lock:
            return list(self._answers)

    def _record_input(self, text: str) -> None:
        with self._lock:
            self._inputs.append(text)

    async def _wait_echo_release(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if not self._echoes_held:
                return
            future: asyncio.Future[None] = loop.create_future()
            self._echo_waiters.append((loop, future))
            self._lock.notify_all()
        await future

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


def _resolve(future: "asyncio.Future[None] | None") -> None:
    if future is not None and not future.done():
        future.set_result(None)


@attrs.define
class _Steer:
    pending_id: str
    message_id: str
    text: str
    read: bool = False


@attrs.define
class _Run:
    """One provider-side run: started by a send, or by a steering message."""

    key: str
    steering: list[_Steer] = attrs.field(factory=list)
    task: "asyncio.Task[None] | None" = None
    settled: "asyncio.Future[None] | None" = None  # the send call, where it settles with the turn

    @property
    def alive(self) -> bool:
        return self.task is not None and not self.task.done()


class ScriptedAdapter(ProviderAdapter):
    """One scripted provider session; runs on the provider loop.

    Steering: `steer` queues the message in the running run; the model reads
    queued steering at its next step boundary (after a Say, when a Gate
    opens) and then echoes it (unless echoes are held, which parks the run).
    Copilot starts a new turn for it; claude and codex fold it into the
    running turn. Steering still unread when a run ends starts the next run.
    Withdraw succeeds only while the message is unread (copilot).
    """

    def __init__(
        self, backend: ScriptedProvider, session_id: str, chat_id: str, emit: Emit
    ) -> None:
        self.backend = backend
        self.capabilities = backend.capabilities
        self.session_id = session_id
        self.chat_id = chat_id
        self._emit = emit
        self._current: _Run | None = None
        self._requests = HostRequests()
        self._background: set[asyncio.Task[str]] = set()

    async def send(self, message: ProviderSend) -> str | None:
        self.backend._record_prompt(message)
        message_id = self.backend._next_id()
        steps = self._steps_for(message.text)
        run = _Run(key=message.turn_id)
        self._current = run
        if any(isinstance(step, Reject) for step in steps):
            # The call itself fails: run the steps up to the rejection inline.
            await self._run(run, message.text, steps, message_id, starts_turn=False)
            return message_id
        if all(isinstance(step, _IMMEDIATE) for step in steps):
            # Nothing in the reply waits (no pause, gate or question): the model
            # answers within the call, as a fast one would, without a task of its own.
            await self._guarded(run, message.text, steps, message_id, starts_turn=False)
            return message_id
        run.settled = asyncio.get_running_loop().create_future()
        self._launch(run, message.text, steps, message_id, starts_turn=False)
        if self.capabilities.call_settles_with_turn:
            assert run.task is not None
            run.task.add_done_callback(lambda _t: _resolve(run.settled))
            await asyncio.shield(run.settled)
            if run.task.done() and not run.task.cancelled() and run.task.exception() is not None:
                return message_id  # a crash: reported through ConnectionFailed
        return message_id

    def _steps_for(self, text: str) -> tuple[Step, ...]:
        steps = self.backend._script_for(text)
        if steps is None:
            steps = _echo_steps(text, self.backend.echo_deltas, self.backend.delta_s)
        return steps

    def _launch(
        self, run: _Run, text: str, steps: tuple[Step, ...], message_id: str, starts_turn: bool
    ) -> None:
        run.task = asyncio.get_running_loop().create_task(
            self._guarded(run, text, steps, message_id, starts_turn)
        )
        run.task.add_done_callback(_swallow)

    async def _guarded(
        self, run: _Run, text: str, steps: tuple[Step, ...], message_id: str, starts_turn: bool
    ) -> None:
        try:
            await self._run(run, text, steps, message_id, starts_turn)
        except ProviderCrashed as crash:
            self._emit(ConnectionFailed(error=crash.error))
            return
        self._next_run(run)

    async def _run(
        self, run: _Run, text: str, steps: tuple[Step, ...], message_id: str, starts_turn: bool
    ) -> None:
        key = run.key
        self.backend._record_input(text)
        self._emit(
            UserMessageEcho(
                turn_id=key, text=text, provider_message_id=message_id, starts_turn=starts_turn
            )
        )
        said: list[str] = []
        finish: str | None = "stop"
        terminal = True
        for step in steps:
            match step:
                case Say(chunk):
                    said.append(chunk)
                    self._emit(ReplyDelta(turn_id=key, text=chunk))
                    if run.steering:  # (a step boundary reads only what was steered)
                        await self._boundary(run, said)
                case SayEach(chunks):
                    for chunk in chunks:
                        said.append(chunk)
                        self._emit(ReplyDelta(turn_id=key, text=chunk))
                        if run.steering:
                            await self._boundary(run, said)
                case Gate(name):
                    await self.backend._wait_gate(name)
                    await self._boundary(run, said)
                case Pause(seconds):
                    await asyncio.sleep(seconds)
                case Crash():
                    raise ProviderCrashed("scripted crash")
                case DropCompletion():
                    terminal = False
                case NoFinishReason():
                    finish = None
                case SettleCall():
                    _resolve(run.settled)
                case SpawnSubagent(prompt, background, drop_end):
                    await self._spawn(key, prompt, background, drop_end)
                    await self._boundary(run, said)
                case Reject(reason, before_start):
                    raise ProviderCallError(
                        AgentHostError(code=ErrorCode.PROVIDER_ERROR, message=reason),
                        taken=not before_start,
                    )
                case ToolCall(name, arguments, needs_permission):
                    call_id = self.backend._next_id()
                    self._emit(
                        ToolCallStarted(
                            turn_id=key,
                            tool_call_id=call_id,
                            name=name,
                            arguments=arguments,
                            needs_permission=needs_permission,
                        )
                    )
                    approved = True
                    if needs_permission:
                        reply = await self._ask(
                            HostRequestOpened(
                                turn_id=key,
                                request_id=call_id,
                                kind=HostRequestKind.PERMISSION,
                                tool_call_id=call_id,
                                tool_name=name,
                                arguments=arguments,
                            )
                        )
                        approved = bool(reply.approved) and reply.error is None
                    if approved:
                        self._emit(ToolCallCompleted(turn_id=key, tool_call_id=call_id))
                    await self._boundary(run, said)
                case AskUser(question):
                    reply = await self._ask(
                        HostRequestOpened(
                            turn_id=key,
                            request_id=self.backend._next_id(),
                            kind=HostRequestKind.USER_INPUT,
                            question=question,
                        )
                    )
                    if reply.answer is not None:
                        self.backend._record_input(reply.answer)
                    await self._boundary(run, said)
                case ClientToolCall(tool, arguments, gate):
                    call_id = self.backend._next_id()
                    self._emit(
                        ToolCallStarted(
                            turn_id=key, tool_call_id=call_id, name=tool, arguments=arguments
                        )
                    )
                    if gate is not None:
                        await self.backend._wait_gate(gate)
                    reply = await self._ask(
                        HostRequestOpened(
                            turn_id=key,
                            request_id=call_id,
                            kind=HostRequestKind.CLIENT_TOOL,
                            tool_call_id=call_id,
                            tool_name=tool,
                            arguments=arguments,
                        )
                    )
                    self._emit(
                        ToolCallCompleted(
                            turn_id=key,
                            tool_call_id=call_id,
                            result=reply.result or reply.error or "",
                            success=reply.error is None,
                        )
                    )
                    await self._boundary(run, said)
        if not terminal:
            return
        full = "".join(said)
        self._emit(
            UsageUpdated(
                turn_id=key, prompt_tokens=len(text.split()), completion_tokens=len(full.split())
            )
        )
        if finish is not None:
            self._emit(ReplyMessage(turn_id=key, text=full, finish_reason=finish))
        self._emit(Idle(turn_id=key))

    async def _spawn(self, key: str, prompt: str, background: bool, drop_end: bool) -> None:
        call_id = self.backend._next_id()
        subagent_id = self.backend._next_id()
        self._emit(ToolCallStarted(turn_id=key, tool_call_id=call_id, name="subagent"))
        self._emit(
            SubagentStarted(
                turn_id=key,
                tool_call_id=call_id,
                subagent_id=subagent_id,
                prompt=prompt,
                background=background,
            )
        )

        async def subagent() -> str:
            said: list[str] = []
            for step in self._steps_for(prompt):
                match step:
                    case Say() | SayEach():
                        for chunk in (step.text,) if isinstance(step, Say) else step.texts:
                            said.append(chunk)
                            self._emit(ReplyDelta(turn_id=key, text=chunk, subagent_id=subagent_id))
                    case Gate(name):
                        await self.backend._wait_gate(name)
                    case Pause(seconds):
                        await asyncio.sleep(seconds)
            text = "".join(said)
            if not drop_end:
                self._emit(
                    ReplyMessage(
                        turn_id=key, text=text, finish_reason="stop", subagent_id=subagent_id
                    )
                )
                self._emit(Idle(turn_id=key, subagent_id=subagent_id))
            return text

        if background:
            self._emit(
                ToolCallCompleted(turn_id=key, tool_call_id=call_id, result="started in background")
            )
            task = asyncio.get_running_loop().create_task(subagent())
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            return
        result = await subagent()
        self._emit(ToolCallCompleted(turn_id=key, tool_call_id=call_id, result=result))

    async def _ask(self, request: HostRequestOpened) -> ProviderAnswer:
        return await self._requests.ask(request, self._emit)

    async def answer(self, message: ProviderAnswer) -> None:
        self.backend._record_answer(message)
        self._requests.answer(message)

    async def _boundary(self, run: _Run, said: list[str]) -> None:
        """The model reads the steering queued so far, then echoes it."""
        unread = [steer for steer in run.steering if not steer.read]
        if not unread:
            return
        for steer in unread:
            steer.read = True
            self.backend._record_input(steer.text)
        await self.backend._wait_echo_release()
        starts_turn = self.backend.shape == "copilot"
        for steer in unread:
            run.steering.remove(steer)
            self._emit(
                UserMessageEcho(
                    turn_id=run.key,
                    text=steer.text,
                    provider_message_id=steer.message_id if self.backend.echo_ids else None,
                    starts_turn=starts_turn,
                )
            )
            if starts_turn:
                said.clear()  # later deltas belong to the steering message's turn

    def _next_run(self, finished: _Run) -> None:
        """Steering still unread when a run ends runs next, as its own turn."""
        if self._current is finished:
            self._current = None
        if not finished.steering:
            return
        first, *rest = finished.steering
        run = _Run(key=first.pending_id, steering=rest)
        self._current = run
        self._launch(run, first.text, self._steps_for(first.text), first.message_id, True)

    async def steer(self, message: ProviderSteer) -> str | None:
        self.backend._record_steered()
        message_id = self.backend._next_id()
        run = self._current
        if run is not None and run.alive:
            run.steering.append(_Steer(message.pending_id, message_id, message.text))
            return message_id
        if self.backend.shape == "codex":
            raise ProviderCallError(
                AgentHostError(code=ErrorCode.PROVIDER_ERROR, message="no active turn to steer"),
                taken=False,
                no_active_turn=True,
            )
        run = _Run(key=message.pending_id)
        self._current = run
        self._launch(run, message.text, self._steps_for(message.text), message_id, True)
        return message_id

    async def withdraw(self, message: ProviderWithdraw) -> bool:
        run = self._current
        if run is None:
            return False
        for steer in run.steering:
            if steer.message_id == message.provider_message_id and steer.text == message.text:
                if steer.read:
                    return False
                run.steering.remove(steer)
                return True
        return False

    async def cancel(self, message: ProviderCancel) -> None:
        if not self.backend.obeys_cancel:
            return
        run = self._current
        if run is not None and run.key == message.turn_id and run.task is not None:
            run.steering.clear()
            self._current = None
            run.task.cancel()

    async def resume(self, message: ProviderResume) -> None:
        failure = self.backend._take_resume_failure()
        if failure is not None:
            code, text = failure
            raise ProviderResumeError(code, text, no_history=_means_no_history(code, text))

    async def dispose(self) -> None:
        for task in list(self._background):
            task.cancel()
        run, self._current = self._current, None
        if run is not None and run.task is not None:
            run.task.cancel()

    def turn_diagnostic_snapshot(self, turn_id: str) -> dict[str, Any]:
        run = self._current
        return {
            "running": run is not None and run.key == turn_id and run.alive,
            "unread_steering": 0 if run is None else sum(not s.read for s in run.steering),
            "waiting_on": self._requests.waiting_on(),
        }


def _means_no_history(code: int, text: str) -> bool:
    lowered = text.lower()
    return code == -32603 and any(
        marker in lowered for marker in ("session not found", "no events", "empty session")
    )


def echo_reply(prompt: str) -> str:
    """What an unscripted prompt is answered with."""
    return f"echo: {prompt}"


_IMMEDIATE = (Say, SayEach, NoFinishReason, DropCompletion)
"""Steps that never wait: a script of only these is answered within the send."""


def _echo_steps(prompt: str, deltas: int, delta_s: float) -> tuple[Step, ...]:
    """The echo reply in `deltas` nearly equal chunks (fewer only when the reply
    is shorter), `delta_s` apart: its pacing is then (deltas - 1) * delta_s."""
    reply = echo_reply(prompt)
    count = max(1, min(deltas, len(reply)))
    size = len(reply)
    chunks = tuple(reply[size * i // count : size * (i + 1) // count] for i in range(count))
    if delta_s <= 0:
        return (SayEach(chunks),)
    steps: list[Step] = []
    for chunk in chunks:
        if steps:
            steps.append(Pause(delta_s))
        steps.append(Say(chunk))
    return tuple(steps)


def _swallow(task: "asyncio.Task[None]") -> None:
    if not task.cancelled():
        task.exception()
