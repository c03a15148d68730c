"""The scripted provider's adapter: one scripted provider session, playing
scripts (providers/scripted_steps.py) on the provider loop.

It talks to its backend (ScriptedProvider, which outlives connection
restarts) only through the backend's adapter-side methods. Steering: `steer`
queues the message in the running run; the model reads queued steering at
its next step boundary and then echoes it. What the host answers goes back
honestly: a denied tool call does not run, an edited input is what it runs
with, the chosen option is recorded, an answer is what the model reads, a
tool that waits for a token runs only once it has one its resource takes.
"""

import asyncio
from typing import TYPE_CHECKING, Any

import attrs

from agenthost.messages.common import (
    AuthRequiredReason,
    McpAuthRequirement,
    ProtectedResourceMetadata,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.inputs import chosen
from agenthost.messages.provider import (
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
    ReplyReasoning,
    SubagentStarted,
    ToolCallCompleted,
    ToolCallStarted,
    ToolInputDelta,
    UsageUpdated,
    UserMessageEcho,
)
from agenthost.providers.base import (
    Emit,
    HostRequests,
    ProviderAdapter,
    ProviderCallError,
    ProviderCrashed,
    ProviderResumeError,
)
from agenthost.providers.scripted_steps import (
    IMMEDIATE,
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
    echo_steps,
)

if TYPE_CHECKING:
    from agenthost.providers.scripted import ScriptedProvider


def resolve(future: "asyncio.Future[None] | None") -> None:
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
        self, backend: "ScriptedProvider", session_id: str, chat_id: str, emit: Emit
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
        self.backend.record_prompt(message)
        message_id = self.backend.next_id()
        steps = self._steps_for(message.text)
        run = _Run(key=message.turn_id)
        self._current = run
        if any(isinstance(step, Reject) for step in steps):
            # The call itself fails: run the steps up to the rejection inline.
            await self._run(run, message.text, steps, message_id, starts_turn=False)
            return message_id
        if all(isinstance(step, IMMEDIATE) for step in steps):
            # Nothing in the reply waits (no pause, gate or question): the model
            # answers within the call, as a fast one would, without a task of its own.
            await self._guarded(run, message.text, steps, message_id, starts_turn=False)
            return message_id
        run.settled = asyncio.get_running_loop().create_future()
        self._launch(run, message.text, steps, message_id, starts_turn=False)
        if self.capabilities.call_settles_with_turn:
            assert run.task is not None
            run.task.add_done_callback(lambda _t: resolve(run.settled))
            await asyncio.shield(run.settled)
            if run.task.done() and not run.task.cancelled() and run.task.exception() is not None:
                return message_id  # a crash: reported through ConnectionFailed
        return message_id

    def _steps_for(self, text: str) -> tuple[Step, ...]:
        steps = self.backend.script_for(text)
        if steps is None:
            steps = echo_steps(text, self.backend.echo_deltas, self.backend.delta_s)
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
        self.backend.record_input(text)
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
                case Think(thought):
                    self._emit(ReplyReasoning(turn_id=key, text=thought))
                case SayEach(chunks):
                    for chunk in chunks:
                        said.append(chunk)
                        self._emit(ReplyDelta(turn_id=key, text=chunk))
                        if run.steering:
                            await self._boundary(run, said)
                case Gate(name, reads_steering):
                    await self.backend.wait_gate(name)
                    if reads_steering:
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
                    resolve(run.settled)
                case SpawnSubagent(prompt, background, drop_end):
                    await self._spawn(key, prompt, background, drop_end)
                    await self._boundary(run, said)
                case Reject(reason, before_start, resumable):
                    error = AgentHostError(
                        code=ErrorCode.PROVIDER_ERROR, message=reason, resumable=resumable
                    )
                    raise ProviderCallError(error, taken=not before_start)
                case ToolCall(name, arguments, needs_permission, options, editable) as step:
                    call_id = self.backend.next_id()
                    await self._stream_input(key, call_id, step)
                    self._emit(
                        ToolCallStarted(
                            turn_id=key,
                            tool_call_id=call_id,
                            name=name,
                            arguments=arguments,
                            needs_permission=needs_permission,
                        )
                    )
                    approved, ran_with = True, arguments
                    if needs_permission:
                        reply = await self._ask(
                            HostRequestOpened(
                                turn_id=key,
                                request_id=call_id,
                                kind=HostRequestKind.PERMISSION,
                                tool_call_id=call_id,
                                tool_name=name,
                                arguments=arguments,
                                options=options,
                                editable=editable,
                            )
                        )
                        approved = bool(reply.approved) and reply.error is None
                        if editable and reply.edited_input is not None:
                            ran_with = reply.edited_input
                    if approved:
                        result = f"ran {name} with {ran_with}"
                        self._emit(
                            ToolCallCompleted(turn_id=key, tool_call_id=call_id, result=result)
                        )
                    await self._boundary(run, said)
                case AuthToolCall() as call:
                    await self._auth_tool(key, call)
                    await self._boundary(run, said)
                case AskUser() as ask:
                    asked = ask.asked()
                    reply = await self._ask(
                        HostRequestOpened(
                            turn_id=key,
                            request_id=self.backend.next_id(),
                            kind=HostRequestKind.USER_INPUT,
                            question=ask.question,
                            questions=(asked,) if ask.choices else (),
                        )
                    )
                    answered = dict(reply.answers or ()).get(asked.id)
                    if answered is not None:  # the model reads it in words
                        self.backend.record_input(", ".join(chosen(asked, answered)))
                    elif reply.answer is not None:
                        self.backend.record_input(reply.answer)
                    await self._boundary(run, said)
                case ClientToolCall(tool, arguments, gate):
                    call_id = self.backend.next_id()
                    self._emit(
                        ToolCallStarted(
                            turn_id=key, tool_call_id=call_id, name=tool, arguments=arguments
                        )
                    )
                    if gate is not None:
                        await self.backend.wait_gate(gate)
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
            UsageUpdated(turn_id=key, prompt_tokens=_tokens(text), completion_tokens=_tokens(full))
        )
        if finish is not None:
            self._emit(ReplyMessage(turn_id=key, text=full, finish_reason=finish))
        self._emit(Idle(turn_id=key))

    async def _spawn(self, key: str, prompt: str, background: bool, drop_end: bool) -> None:
        call_id = self.backend.next_id()
        subagent_id = self.backend.next_id()
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
                    case Think(thought):
                        self._emit(
                            ReplyReasoning(turn_id=key, text=thought, subagent_id=subagent_id)
                        )
                    case Gate(name, _):
                        await self.backend.wait_gate(name)
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

    async def _auth_tool(self, key: str, step: AuthToolCall) -> None:
        """An MCP tool blocked on a token: challenged until the host hands it one
        its resource takes (or refuses it: the turn ended), then it runs."""
        call_id = self.backend.next_id()
        self._emit(
            ToolCallStarted(
                turn_id=key,
                tool_call_id=call_id,
                name=step.name,
                arguments=step.arguments,
                mcp_server=step.server,
            )
        )
        while True:
            challenge = HostRequestOpened(
                turn_id=key,
                request_id=self.backend.next_id(),
                kind=HostRequestKind.AUTHENTICATION,
                tool_call_id=call_id,
                tool_name=step.name,
                auth=McpAuthRequirement(
                    reason=AuthRequiredReason.REQUIRED,
                    resource=ProtectedResourceMetadata(resource=step.resource),
                    required_scopes=step.scopes or None,
                ),
            )
            reply = await self._ask_unless_crashed(challenge, step.crash_gate)
            if reply.token is None:  # refused: the call cannot run
                failed = reply.error or "not authorized"
                self._emit(
                    ToolCallCompleted(
                        turn_id=key, tool_call_id=call_id, result=failed, success=False
                    )
                )
                return
            if step.accepts is None or reply.token == step.accepts:
                break  # (a token the resource refuses is challenged again)
        result = f"ran {step.name} with {step.arguments} on {step.resource}"
        self._emit(ToolCallCompleted(turn_id=key, tool_call_id=call_id, result=result))

    async def _ask_unless_crashed(
        self, request: HostRequestOpened, crash_gate: str | None
    ) -> ProviderAnswer:
        """Ask the host; with `crash_gate`, the connection fails if it opens first."""
        if crash_gate is None:
            return await self._ask(request)
        ask = asyncio.ensure_future(self._ask(request))
        gate = asyncio.ensure_future(self.backend.wait_gate(crash_gate))
        try:
            await asyncio.wait({ask, gate}, return_when=asyncio.FIRST_COMPLETED)
            if not ask.done():
                raise ProviderCrashed("scripted crash while a tool call waited for a token")
            return ask.result()
        finally:
            ask.cancel()
            gate.cancel()

    async def _stream_input(self, key: str, call_id: str, step: ToolCall) -> None:
        """A call whose input the model streams: started streaming, then its pieces."""
        if not step.chunks:
            return
        self._emit(
            ToolCallStarted(
                turn_id=key, tool_call_id=call_id, name=step.name, arguments="", streaming=True
            )
        )
        for i, chunk in enumerate(step.chunks):
            self._emit(
                ToolInputDelta(
                    turn_id=key,
                    tool_call_id=call_id,
                    content=chunk,
                    invocation_message=f"{step.name}: {i + 1} of {len(step.chunks)}",
                )
            )
            if i == 0 and step.stream_gate is not None:
                await self.backend.wait_gate(step.stream_gate)

    async def _ask(self, request: HostRequestOpened) -> ProviderAnswer:
        return await self._requests.ask(request, self._emit)

    async def answer(self, message: ProviderAnswer) -> None:
        self.backend.record_answer(message)
        self._requests.answer(message)

    async def _boundary(self, run: _Run, said: list[str]) -> None:
        """The model reads the steering queued so far, then echoes it."""
        unread = [steer for steer in run.steering if not steer.read]
        if not unread:
            return
        for steer in unread:
            steer.read = True
            self.backend.record_input(steer.text)
        await self.backend.wait_echo_release()
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
        self.backend.record_steered()
        message_id = self.backend.next_id()
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
        failure = self.backend.take_resume_failure()
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


def _swallow(task: "asyncio.Task[None]") -> None:
    if not task.cancelled():
        task.exception()


def _tokens(text: str) -> int:
    """The usual estimate of a text's tokens, four characters each (not a word
    count: splitting a 100 KB message made 16,000 strings a turn)."""
    return (len(text) + 3) // 4
