"""What codex's turn notifications mean for the host's turns: a table of
handlers, one per notification (and item type), each giving the
provider-protocol events it means.

Runs on the codex provider loop's thread, over the adapter's record of one
codex turn (`Run`). Invariants:
1. The last completed agent message is held until the next item starts or
   the turn ends, so only the final message carries the finish reason.
2. A tool item is announced once (an approval request may announce it first).
3. Codex's own errors end the turn in its words: turn/completed with status
   failed, and an `error` notification codex will not retry (willRetry
   false), which may come with no turn/completed after it. One it will retry
   is logged at warning, each time; past `max_retries` of them in one turn
   the turn ends with codex's words (and the adapter interrupts codex's turn).
4. A reasoning item (its summary, or its raw text where codex shows it) is
   reasoning once: as its deltas stream, or whole when it completes unstreamed.
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
    UserMessageEcho,
)

TOOL_ITEMS = {
    "commandExecution": "shell",
    "fileChange": "apply_patch",
    "mcpToolCall": "mcp",
    "dynamicToolCall": "tool",
    "webSearch": "web_search",
}
FINISH = {"completed": "stop", "interrupted": "interrupted"}


@attrs.define
class Run:
    """One codex turn, as the host's turn `key` knows it."""

    key: str
    started: asyncio.Event = attrs.field(factory=asyncio.Event)
    done: asyncio.Event = attrs.field(factory=asyncio.Event)
    turn_id: str | None = None
    held: str | None = None  # the last completed agent message, until we know it is final
    announced: set[str] = attrs.field(factory=set)  # tool items already reported
    reasoned: set[str] = attrs.field(factory=set)  # reasoning items whose text streamed
    retries: int = 0  # the errors codex said it would retry, this turn
    failed: AgentHostError | None = None  # codex's own error ended it
    interrupt: bool = False  # codex's error ended it: the adapter interrupts codex's turn

    def flush(self) -> list[ProviderEvent]:
        """A held agent message was not the last one: it is stable without a finish."""
        held, self.held = self.held, None
        return [] if held is None else [ReplyMessage(turn_id=self.key, text=held)]


Handler = Callable[[Run, dict[str, Any]], list[ProviderEvent]]


def ends_reading(method: str, params: dict[str, Any]) -> bool:
    """Whether nothing more of this turn is to be read after this notification:
    its end, or an error codex will not retry (no turn/completed may follow)."""
    return method == "turn/completed" or (method == "error" and params.get("willRetry") is False)


class CodexTurns:
    def __init__(self, log: Any, max_retries: int | None) -> None:
        self._log = log
        self._max_retries = max_retries
        self._handlers: dict[tuple[str, str | None], Handler] = {
            ("item/started", "userMessage"): self._user_message,
            ("item/started", "agentMessage"): lambda run, _: run.flush(),
            ("item/agentMessage/delta", None): self._delta,
            ("item/completed", "agentMessage"): self._message_completed,
            ("turn/completed", None): self._turn_completed,
            ("error", None): self._error,
            ("item/started", "reasoning"): lambda run, _: run.flush(),
            ("item/reasoning/summaryTextDelta", None): self._reasoning,
            ("item/reasoning/textDelta", None): self._reasoning,
            ("item/reasoning/summaryPartAdded", None): self._reasoning_part,
            ("item/completed", "reasoning"): self._reasoning_completed,
        }
        for kind in TOOL_ITEMS:
            self._handlers["item/started", kind] = self._tool_started
            self._handlers["item/completed", kind] = self._tool_completed

    def map(self, run: Run, method: str, params: dict[str, Any]) -> list[ProviderEvent]:
        """One codex notification of `run`'s turn -> the events it means."""
        if run.failed is not None:
            return []  # codex's own error ended it: what comes after means nothing
        kind = (params.get("item") or {}).get("type")
        handler = self._handlers.get((method, kind)) or self._handlers.get((method, None))
        return [] if handler is None else handler(run, params)

    def _user_message(self, run: Run, params: dict[str, Any]) -> list[ProviderEvent]:
        item = params["item"]
        client_id = item.get("clientId")
        return [
            UserMessageEcho(
                turn_id=run.key,
                text=_user_text(item),
                provider_message_id=client_id if isinstance(client_id, str) else None,
            )
        ]

    def _delta(self, run: Run, params: dict[str, Any]) -> list[ProviderEvent]:
        return [*run.flush(), ReplyDelta(turn_id=run.key, text=str(params.get("delta", "")))]

    def _reasoning(self, run: Run, params: dict[str, Any]) -> list[ProviderEvent]:
        run.reasoned.add(str(params.get("itemId", "")))
        return [ReplyReasoning(turn_id=run.key, text=str(params.get("delta", "")))]

    def _reasoning_part(self, run: Run, params: dict[str, Any]) -> list[ProviderEvent]:
        """A new part of a reasoning summary that streams: a paragraph break."""
        if params.get("summaryIndex", 0) and str(params.get("itemId", "")) in run.reasoned:
            return [ReplyReasoning(turn_id=run.key, text="\n\n")]
        return []

    def _reasoning_completed(self, run: Run, params: dict[str, Any]) -> list[ProviderEvent]:
        """A reasoning item whose text did not stream comes whole (invariant 4)."""
        item = params["item"]
        if str(item.get("id", "")) in run.reasoned:
            return []
        text = "\n\n".join(item.get("summary") or []) or "\n\n".join(item.get("content") or [])
        return [ReplyReasoning(turn_id=run.key, text=text)] if text else []

    def _message_completed(self, run: Run, params: dict[str, Any]) -> list[ProviderEvent]:
        events = run.flush()
        run.held = str(params["item"].get("text", ""))
        return events

    def _tool_started(self, run: Run, params: dict[str, Any]) -> list[ProviderEvent]:
        item = params["item"]
        events = run.flush()
        item_id = str(item.get("id", ""))
        if item_id not in run.announced:
            run.announced.add(item_id)
            events.append(tool_started(run.key, item))
        return events

    def _tool_completed(self, run: Run, params: dict[str, Any]) -> list[ProviderEvent]:
        item = params["item"]
        return [
            ToolCallCompleted(
                turn_id=run.key,
                tool_call_id=str(item.get("id", "")),
                result=str(item.get("aggregatedOutput") or ""),
                success=item.get("status") == "completed",
            )
        ]

    def _turn_completed(self, run: Run, params: dict[str, Any]) -> list[ProviderEvent]:
        turn = params.get("turn") or {}
        status = turn.get("status")
        final = ReplyMessage(
            turn_id=run.key, text=run.held or "", finish_reason=FINISH.get(str(status), "error")
        )
        run.held = None
        if status == "failed":
            reason = (turn.get("error") or {}).get("message") or "the codex turn failed"
            return [final, self._failed(run, str(reason))]
        return [final, Idle(turn_id=run.key)]

    def _error(self, run: Run, params: dict[str, Any]) -> list[ProviderEvent]:
        """Codex's own error report: a retry (logged), or the end (invariant 3)."""
        error = params.get("error") or {}
        words = str(error.get("message") or "codex reported an error")
        details = error.get("additionalDetails")
        if details and str(details) != words:
            words = f"{words} ({details})"
        if params.get("willRetry") is not False:
            run.retries += 1
            self._log.warning(
                "codex_retrying",
                turn_id=run.key,
                codex_turn_id=run.turn_id,
                attempt=run.retries,
                error=words,
            )
            if self._max_retries is None or run.retries <= self._max_retries:
                return []
            words = f"{words}; gave up after {run.retries} attempts"
        self._log.warning(
            "codex_turn_error", turn_id=run.key, codex_turn_id=run.turn_id, error=words
        )
        run.held = None
        run.interrupt = True  # codex may still hold the turn open (no turn/completed may come)
        return [self._failed(run, words)]

    def _failed(self, run: Run, words: str) -> CallSettled:
        run.failed = AgentHostError(code=ErrorCode.PROVIDER_ERROR, message=words)
        return CallSettled(turn_id=run.key, settlement=Settlement.REJECTED, error=run.failed)


def _user_text(item: dict[str, Any]) -> str:
    parts = item.get("content") or []
    return "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


def tool_started(key: str, item: dict[str, Any]) -> ToolCallStarted:
    kind = str(item.get("type"))
    name = TOOL_ITEMS[kind]
    if kind == "mcpToolCall":
        name = f"{item.get('server', 'mcp')}.{item.get('tool', 'tool')}"
    fields = ("command", "cwd", "changes", "arguments", "query")
    arguments = json.dumps({k: item[k] for k in fields if item.get(k) is not None})
    return ToolCallStarted(
        turn_id=key, tool_call_id=str(item.get("id", "")), name=name, arguments=arguments
    )
