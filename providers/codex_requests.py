"""Codex's requests to its client (server requests: approvals, and its
request_user_input tool's questions) as the host's requests, and the host's
answers back.

Codex sends them on the SDK's reader thread, which waits for the answer:
while it waits, nothing else of codex is read. `on_server_request` (that
thread) hands each to the loop and blocks on its answer; on the loop it
becomes a HostRequestOpened (the approval's tool call announced first if its
item has not started yet). Invariants:
1. Every request is answered exactly once: by the host, or as cancelled when
   its turn is interrupted, the adapter closes or the connection fails (an
   approval "cancel", a question no answers).
2. A request that arrives before turn/start's answer waits for it, so it
   names the host's turn.
3. No timeout: a person answers it.
4. An approval offers codex's decisions as confirmation options: accept,
   acceptForSession, acceptWithExecpolicyAmendment (a command's, where codex
   proposes one), decline, and cancel (a denial that also ends the turn); the
   option chosen is the decision codex gets.
5. A question is one host question per codex question (its options, other
   text where codex takes it); codex gets the chosen labels by question id.
"""

import asyncio
import concurrent.futures
import functools
import json
import uuid
from collections.abc import Callable
from typing import Any

import attrs

from agenthost.messages.common import ConfirmationOption, ConfirmationOptionKind
from agenthost.messages.inputs import InputOption, InputQuestion, InputQuestionKind, chosen
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
USER_INPUT = "item/tool/requestUserInput"
JsonObject = dict[str, Any]


def _option(decision: str, label: str, kind: ConfirmationOptionKind) -> ConfirmationOption:
    return ConfirmationOption(id=decision, label=label, kind=kind)


ACCEPT = _option("accept", "Allow once", ConfirmationOptionKind.APPROVE)
FOR_SESSION = _option("acceptForSession", "Allow for this session", ConfirmationOptionKind.APPROVE)
AMEND = "acceptWithExecpolicyAmendment"
DECLINE = _option("decline", "Deny", ConfirmationOptionKind.DENY)
CANCEL = _option("cancel", "Deny and stop the turn", ConfirmationOptionKind.DENY)
CANCELLED: JsonObject = {"decision": "cancel"}


@attrs.frozen
class _Waiting:
    """A request codex waits on: its answer, for the turn it belongs to, and
    how the host's answer becomes codex's (`reply`); `cancelled` is codex's
    answer when nobody will answer."""

    answer: "concurrent.futures.Future[JsonObject]"
    codex_turn_id: str | None
    reply: Callable[[ProviderAnswer], JsonObject]
    cancelled: JsonObject = CANCELLED


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
        if method not in APPROVALS and method != USER_INPUT:
            return {}
        answer: concurrent.futures.Future[JsonObject] = concurrent.futures.Future()
        loop = self.loop
        try:
            if loop is None or self._closed():
                raise RuntimeError("closing")
            asyncio.run_coroutine_threadsafe(self._requested(method, params or {}, answer), loop)
        except RuntimeError:
            return {"answers": {}} if method == USER_INPUT else {"decision": "decline"}
        return answer.result()

    async def _requested(
        self, method: str, params: JsonObject, answer: "concurrent.futures.Future[JsonObject]"
    ) -> None:
        turn_id = str(params.get("turnId"))
        current = self._current()
        if self._runs(turn_id) is None and current is not None and not current.started.is_set():
            await current.started.wait()  # it came before turn/start's answer reached us
        if self._closed():
            answer.set_result({"answers": {}} if method == USER_INPUT else CANCELLED)
            return
        run = self._runs(turn_id)
        key = run.key if run is not None else turn_id
        codex_turn = None if run is None else run.turn_id
        request_id = uuid.uuid4().hex
        if method == USER_INPUT:
            self._asked(key, request_id, codex_turn, params, answer)
            return
        item_id = str(params.get("itemId", ""))
        options = _decisions(method, params)
        reply = functools.partial(_decision, params)
        self._waiting[request_id] = _Waiting(answer, codex_turn, reply)
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
                options=options,
            )
        )

    def _asked(
        self,
        key: str,
        request_id: str,
        codex_turn: str | None,
        params: JsonObject,
        answer: "concurrent.futures.Future[JsonObject]",
    ) -> None:
        """codex's request_user_input: its questions, as the host's (rule 5)."""
        questions = tuple(
            _question(q) for q in params.get("questions") or [] if isinstance(q, dict)
        )
        reply = functools.partial(_answers, questions)
        self._waiting[request_id] = _Waiting(answer, codex_turn, reply, cancelled={"answers": {}})
        self._emit(
            HostRequestOpened(
                turn_id=key,
                request_id=request_id,
                kind=HostRequestKind.USER_INPUT,
                questions=questions,
            )
        )

    def answer(self, message: ProviderAnswer) -> None:
        """The host's answer goes back to codex (a late or unknown one is dropped)."""
        waiting = self._waiting.pop(message.request_id, None)
        if waiting is None:
            return
        waiting.answer.set_result(waiting.reply(message))

    def cancel_turn(self, codex_turn_id: str) -> None:
        """The turn is interrupted: what it waits on is answered as cancelled."""
        for request_id, waiting in list(self._waiting.items()):
            if waiting.codex_turn_id == codex_turn_id:
                del self._waiting[request_id]
                waiting.answer.set_result(waiting.cancelled)

    def release_all(self) -> None:
        """The adapter closes or the connection failed: everything is answered as cancelled."""
        waiting, self._waiting = self._waiting, {}
        for entry in waiting.values():
            entry.answer.set_result(entry.cancelled)


def _decisions(method: str, params: JsonObject) -> tuple[ConfirmationOption, ...]:
    """The decisions codex takes for this approval (rule 4)."""
    amendment = params.get("proposedExecpolicyAmendment") or []
    if method == "item/commandExecution/requestApproval" and amendment:
        prefix = " ".join(str(part) for part in amendment)
        amend = _option(
            AMEND, f"Always allow commands like: {prefix}", ConfirmationOptionKind.APPROVE
        )
        return (ACCEPT, FOR_SESSION, amend, DECLINE, CANCEL)
    return (ACCEPT, FOR_SESSION, DECLINE, CANCEL)


def _decision(params: JsonObject, message: ProviderAnswer) -> JsonObject:
    """The host's answer as codex's decision."""
    approved = bool(message.approved) and message.error is None
    option = message.option
    if option == AMEND and approved:
        amendment = [str(part) for part in params.get("proposedExecpolicyAmendment") or []]
        return {"decision": {AMEND: {"execpolicy_amendment": amendment}}}
    if option in (FOR_SESSION.id, CANCEL.id, DECLINE.id, ACCEPT.id):
        return {"decision": option}
    return {"decision": "accept" if approved else "decline"}


def _question(raw: JsonObject) -> InputQuestion:
    question_id = str(raw.get("id", ""))
    options = tuple(
        InputOption(
            id=f"{question_id}-{i}",
            label=str(option.get("label", "")),
            description=option.get("description"),
        )
        for i, option in enumerate(raw.get("options") or [], 1)
        if isinstance(option, dict)
    )
    return InputQuestion(
        id=question_id,
        kind=InputQuestionKind.SINGLE_SELECT if options else InputQuestionKind.TEXT,
        message=str(raw.get("question", "")),
        title=raw.get("header"),
        options=options or None,
        allow_freeform_input=bool(raw.get("isOther")) if options else None,
    )


def _answers(questions: tuple[InputQuestion, ...], message: ProviderAnswer) -> JsonObject:
    """The host's answers as codex's: the chosen labels (or text) by question id."""
    if message.approved is False or message.error is not None:
        return {"answers": {}}
    given = dict(message.answers or ())
    return {
        "answers": {
            q.id: {"answers": list(chosen(q, given.get(q.id)))} for q in questions if q.id in given
        }
    }
