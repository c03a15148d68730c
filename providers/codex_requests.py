"""Codex's requests to its client (server requests: approvals) as the host's
requests, and the host's answers back.

Codex sends them on the SDK's reader thread, which waits for the answer:
while it waits, nothing else of codex is read. `on_server_request` (that
thread) hands each to the loop and blocks on its answer; on the loop it
becomes a HostRequestOpened (the approval's tool call announced first if its
item has not started yet). Invariants:
1. Every request is answered exactly once: by the host, or "cancel" when its
   turn is interrupted, the adapter closes or the connection fails.
2. A request that arrives before turn/start's answer waits for it, so it
   names the host's turn.
3. No timeout: a person answers it.
"""

import asyncio
import concurrent.futures
import json
import uuid
from collections.abc import Callable
from typing import Any

import attrs

from agenthost.messages.provider import (
    HostRequestKind,
    HostRequestOpened,
    ProviderAnswer,
    ToolCallStarted,
)
from agenthost.providers.base import Emit
from agenthost.providers.codex_turns import Run

APPROVALS = {
    "item/commandExecution/requestApproval": "shell",
    "item/fileChange/requestApproval": "apply_patch",
}
JsonObject = dict[str, Any]


@attrs.frozen
class _Waiting:
    """A request codex waits on: its answer, for the turn it belongs to."""

    answer: "concurrent.futures.Future[JsonObject]"
    codex_turn_id: str | None


class CodexRequests:
    def __init__(
        self,
        emit: Emit,
        runs: Callable[[str], Run | None],
        current: Callable[[], Run | None],
        closed: Callable[[], bool],
    ) -> None:
        self._emit = emit
        self._runs = runs  # the run of a codex turn id
        self._current = current  # the run last started
        self._closed = closed  # whether the adapter is closing or failed
        self.loop: asyncio.AbstractEventLoop | None = None
        self._waiting: dict[str, _Waiting] = {}

    @property
    def waiting_on(self) -> list[str]:
        return sorted(self._waiting)

    def on_server_request(self, method: str, params: JsonObject | None) -> JsonObject:
        """On the SDK's reader thread: wait for the host's answer. Requests other
        than approvals get the SDK's default, {}."""
        if method not in APPROVALS:
            return {}
        answer: concurrent.futures.Future[JsonObject] = concurrent.futures.Future()
        loop = self.loop
        try:
            if loop is None or self._closed():
                raise RuntimeError("closing")
            asyncio.run_coroutine_threadsafe(self._requested(method, params or {}, answer), loop)
        except RuntimeError:
            return {"decision": "decline"}
        return answer.result()

    async def _requested(
        self, method: str, params: JsonObject, answer: "concurrent.futures.Future[JsonObject]"
    ) -> None:
        turn_id = str(params.get("turnId"))
        current = self._current()
        if self._runs(turn_id) is None and current is not None and not current.started.is_set():
            await current.started.wait()  # it came before turn/start's answer reached us
        if self._closed():
            answer.set_result({"decision": "cancel"})
            return
        run = self._runs(turn_id)
        key = run.key if run is not None else turn_id
        item_id = str(params.get("itemId", ""))
        request_id = uuid.uuid4().hex
        self._waiting[request_id] = _Waiting(answer, None if run is None else run.turn_id)
        arguments = json.dumps(
            {k: params[k] for k in ("command", "cwd", "reason", "grantRoot") if params.get(k)}
        )
        if run is not None and item_id not in run.announced:  # the item's start comes later
            run.announced.add(item_id)
            self._emit(
                ToolCallStarted(
                    turn_id=key,
                    tool_call_id=item_id,
                    name=APPROVALS[method],
                    arguments=arguments,
                    needs_permission=True,
                )
            )
        self._emit(
            HostRequestOpened(
                turn_id=key,
                request_id=request_id,
                kind=HostRequestKind.PERMISSION,
                tool_call_id=item_id,
                tool_name=APPROVALS[method],
                arguments=arguments,
            )
        )

    def answer(self, message: ProviderAnswer) -> None:
        """The host's answer goes back to codex (a late or unknown one is dropped)."""
        waiting = self._waiting.pop(message.request_id, None)
        if waiting is None:
            return
        approved = bool(message.approved) and message.error is None
        waiting.answer.set_result({"decision": "accept" if approved else "decline"})

    def cancel_turn(self, codex_turn_id: str) -> None:
        """The turn is interrupted: what it waits on is answered "cancel"."""
        for request_id, waiting in list(self._waiting.items()):
            if waiting.codex_turn_id == codex_turn_id:
                del self._waiting[request_id]
                waiting.answer.set_result({"decision": "cancel"})

    def release_all(self) -> None:
        """The adapter closes or the connection failed: everything is answered "cancel"."""
        waiting, self._waiting = self._waiting, {}
        for entry in waiting.values():
            entry.answer.set_result({"decision": "cancel"})
