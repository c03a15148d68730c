"""What the Claude CLI's frames mean for the host's turns: the one mapping from
claude-agent-sdk messages to provider-protocol events.

A plain object the ClaudeAdapter holds (the claude provider loop's thread
only). It keeps the user messages written to the CLI and not yet taken in by a
turn (`queued`), the CLI turn under way (`run`) and the send calls waiting on
their turns (`sends`). Invariants:
1. A run starts with the first frame of a turn: with the message the frame
   names (its uuid), else the oldest written one. Steering a frame says the
   turn took in is echoed into that run (folded), never a run of its own.
2. The last assistant message of a run is held until the next one starts or
   the run ends, so the final message carries the finish reason. The CLI's own
   stand-in for a reply the model API failed to give ("API Error: ...", model
   <synthetic>) is no reply: the run's error result says it.
3. Every send a run took in settles with the run's result: with its uuid, or
   with the CLI's own error text (taken). A run no send waits on (steering
   that ran as its own turn) reports a failure as a rejected CallSettled.
4. A key cancelled before its run started is interrupted when the run starts.
5. The model's thinking is reported once: as it streams (thinking deltas), or
   whole from the message's thinking blocks where it did not stream.
6. A tool_use block that streams (with partial messages) is started streaming
   at its block's start and its input_json_delta pieces follow; the call is
   started whole, once, by whichever comes first of the assistant message's
   tool_use block and the permission callback (both as before).
"""

import asyncio
import json
from collections.abc import Callable
from typing import Any

import attrs

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.provider import (
    CallSettled,
    Idle,
    ProviderEvent,
    ReplyDelta,
    ReplyMessage,
    ReplyReasoning,
    Settlement,
    ToolCallCompleted,
    ToolCallStarted,
    ToolInputDelta,
    UserMessageEcho,
)
from agenthost.providers.base import ProviderCallError

try:
    import claude_agent_sdk as sdk  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # the `claude` extra is not installed: ClaudeProvider() says so
    sdk = None  # type: ignore[assignment,unused-ignore]

SYNTHETIC = "<synthetic>"  # the model of a message the CLI wrote itself (an API error)


@attrs.define
class Written:
    """A user message written to the CLI and not yet taken in by a turn."""

    uuid: str
    key: str  # the send's turn id, or the steering message's pending id
    text: str
    steering: bool


@attrs.define
class Run:
    """One CLI turn, from its first frame to its result."""

    key: str
    message: Written | None
    held: str | None = None  # the last assistant message's text, until the next one starts
    joined: list[Written] = attrs.field(factory=list)  # taken in while it ran
    tools: set[str] = attrs.field(factory=set)
    cancelled: bool = False
    thought: bool = False  # the message under way streamed its thinking
    streaming: dict[Any, str] = attrs.field(factory=dict)  # block index -> tool call streaming


class ClaudeTurns:
    def __init__(self, log: Any, interrupt: Callable[[], None]) -> None:
        self._log = log
        self._interrupt = interrupt  # interrupt the CLI's running turn (a control request)
        self.queued: list[Written] = []
        self.run: Run | None = None
        self.cancelled: set[str] = set()  # keys cancelled before their run started
        self.sends: dict[str, asyncio.Future[str]] = {}  # by uuid: sends waiting on their turn

    def map(self, frame: Any) -> list[ProviderEvent]:
        """The provider-protocol events one SDK message means."""
        match frame:
            case sdk.SystemMessage(subtype="init"):
                return self.begin(())
            case sdk.SystemMessage(subtype="api_retry", data=data):
                # The model API failed and the CLI tries again: no event, but a
                # person watching the log sees why the turn is quiet.
                self._log.warning(
                    "claude_api_retrying",
                    turn_id=None if self.run is None else self.run.key,
                    attempt=data.get("attempt"),
                    max_retries=data.get("max_retries"),
                    retry_delay_ms=data.get("retry_delay_ms"),
                    error_status=data.get("error_status"),
                    error=data.get("error"),
                )
                return []
            case sdk.StreamEvent(parent_tool_use_id=None, event=event):
                events = self.begin(frame.user_message_uuids or ())
                run = self._current()
                if event.get("type") == "message_start":
                    events += self._release(run, finish_reason=None)
                    run.thought = False
                    run.streaming = {}
                events += self._tool_input(run, event)
                delta = event.get("delta") or {}
                if event.get("type") == "content_block_delta" and delta.get("type") == "text_delta":
                    events.append(ReplyDelta(turn_id=run.key, text=delta.get("text", "")))
                if (
                    event.get("type") == "content_block_delta"
                    and delta.get("type") == "thinking_delta"
                ):
                    run.thought = True
                    events.append(ReplyReasoning(turn_id=run.key, text=delta.get("thinking", "")))
                return events
            case sdk.AssistantMessage(parent_tool_use_id=None, content=content):
                events = self.begin(frame.user_message_uuids or ())
                run = self._current()
                events += self._release(run, finish_reason=None)
                text = "".join(b.text for b in content if isinstance(b, sdk.TextBlock))
                if frame.model == SYNTHETIC and getattr(frame, "error", None):
                    text = ""  # the CLI's "API Error: ..." stand-in reply: the result carries it
                run.held = text or None
                if not run.thought:  # its thinking did not stream: it comes whole, here
                    events += [
                        ReplyReasoning(turn_id=run.key, text=b.thinking)
                        for b in content
                        if isinstance(b, sdk.ThinkingBlock) and b.thinking
                    ]
                for block in content:
                    if isinstance(block, sdk.ToolUseBlock) and block.id not in run.tools:
                        run.tools.add(block.id)
                        events.append(tool_started(run.key, block.id, block.name, block.input))
                return events
            case sdk.UserMessage(parent_tool_use_id=None, content=list(content)):
                events = self.begin(())
                run = self._current()
                for block in content:
                    if isinstance(block, sdk.ToolResultBlock):
                        events.append(
                            ToolCallCompleted(
                                turn_id=run.key,
                                tool_call_id=block.tool_use_id,
                                result=_text_of(block.content),
                                success=not block.is_error,
                            )
                        )
                return events
            case sdk.ResultMessage():
                events = self.begin(frame.user_message_uuids or ())
                return events + self._end(frame)
        return []

    def _tool_input(self, run: Run, event: dict[str, Any]) -> list[ProviderEvent]:
        """A tool_use block as it streams (invariant 6): started streaming at its
        block's start, each input_json_delta a piece of its input."""
        kind, index = event.get("type"), event.get("index")
        block = event.get("content_block") or {}
        if kind == "content_block_start" and block.get("type") == "tool_use":
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str) or call_id in run.tools:
                return []
            run.streaming[index] = call_id
            return [
                ToolCallStarted(
                    turn_id=run.key, tool_call_id=call_id, name=name, arguments="", streaming=True
                )
            ]
        delta = event.get("delta") or {}
        call_id = run.streaming.get(index)
        if kind == "content_block_delta" and delta.get("type") == "input_json_delta" and call_id:
            piece = delta.get("partial_json")
            if isinstance(piece, str) and piece:
                return [ToolInputDelta(turn_id=run.key, tool_call_id=call_id, content=piece)]
        return []

    def _current(self) -> Run:
        run = self.run
        assert run is not None  # begin() made one
        return run

    def begin(self, uuids: Any) -> list[ProviderEvent]:
        """A frame of a turn: start the run if none is under way (invariant 1)
        and fold in the steering the frame says the turn took in."""
        events: list[ProviderEvent] = []
        if self.run is None:
            message = next((m for m in self.queued if m.uuid in uuids), None)
            if message is None and self.queued:
                message = self.queued[0]
            self.run = Run(key="" if message is None else message.key, message=message)
            if message is not None:
                self.queued.remove(message)
                if message.key in self.cancelled:
                    self.cancelled.discard(message.key)
                    self.run.cancelled = True
                    self._interrupt()
                events.append(
                    UserMessageEcho(
                        turn_id=message.key,
                        text=message.text,
                        provider_message_id=message.uuid,
                        starts_turn=message.steering,
                    )
                )
        run = self.run
        for message in [m for m in self.queued if m.uuid in uuids]:
            self.queued.remove(message)
            run.joined.append(message)  # a send merged into a turn settles with it
            events.append(
                UserMessageEcho(
                    turn_id=run.key, text=message.text, provider_message_id=message.uuid
                )
            )
        return events

    def _release(self, run: Run, finish_reason: str | None) -> list[ProviderEvent]:
        """The held assistant message became stable (the next one started, or the run ended)."""
        text, run.held = run.held, None
        if text is None and finish_reason is None:
            return []
        return [ReplyMessage(turn_id=run.key, text=text or "", finish_reason=finish_reason)]

    def _end(self, result: Any) -> list[ProviderEvent]:
        """The run's result: the final message with its finish reason and Idle,
        or the CLI's own error text for the turn (invariant 3)."""
        run, self.run = self.run, None
        assert run is not None
        self._log.info(
            "claude_turn_ended",
            turn_id=run.key,
            subtype=result.subtype,
            is_error=result.is_error,
            cancelled=run.cancelled,
        )
        sends = [m for m in (run.message, *run.joined) if m is not None and not m.steering]
        waiting = [(m, self.sends[m.uuid]) for m in sends if m.uuid in self.sends]
        if not result.is_error or run.cancelled:
            events = self._release(run, finish_reason=result.stop_reason or "stop")
            if not result.is_error:
                events.append(Idle(turn_id=run.key))
            for message, done in waiting:
                if not done.done():
                    done.set_result(message.uuid)
            return events
        events = self._release(run, finish_reason=None)
        error = AgentHostError(code=ErrorCode.PROVIDER_ERROR, message=_error_text(result))
        for _, done in waiting:
            if not done.done():
                done.set_exception(ProviderCallError(error, taken=True))
        if not sends:  # no send waits on this run (steering that ran as its own turn)
            events.append(CallSettled(turn_id=run.key, settlement=Settlement.REJECTED, error=error))
        return events


def tool_started(
    key: str, call_id: str, name: str, arguments: Any, *, permission: bool = False
) -> ToolCallStarted:
    return ToolCallStarted(
        turn_id=key,
        tool_call_id=call_id,
        name=name,
        arguments=json.dumps(arguments),
        needs_permission=permission,
    )


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def _error_text(result: Any) -> str:
    """The CLI's own words for a failed turn: its errors, else its result text, else the subtype."""
    errors = [str(e) for e in (result.errors or []) if str(e).strip()]
    if errors:
        return "; ".join(errors)
    if isinstance(result.result, str) and result.result.strip():
        return result.result.strip()
    return f"claude: {result.subtype}"
