"""What `agenthost chat` knows of AHP: the chat as it last saw it, and the
JSON shapes of the actions it reads and sends.

Plain values and functions (the client's loop). `read_action` turns an
action into what the client acts on; `wire_*` make the actions it
dispatches. A request the chat waits on the user for can arrive in AHP's
form (chat/toolCallReady without `confirmed`, chat/inputRequested,
chat/toolCallAuthRequired) and in
ours (x-chat/requestOpened): the client keeps one prompt per request (by its
id, or its tool call's).
"""

from enum import StrEnum
from typing import Any

import attrs

HISTORY_TURNS = 20  # turns /open shows of a session's history


class ChatError(Exception):
    """A request the server refused, or a connection that ended."""


@attrs.define
class Pending:
    id: str
    kind: str
    text: str


@attrs.frozen
class Option:
    """A choice the user may answer with: a permission's confirmation option
    (`kind` approve or deny) or a question's choice (`kind` "")."""

    id: str
    label: str
    kind: str = ""


@attrs.frozen
class Question:
    id: str
    text: str
    choices: tuple[Option, ...] = ()
    freeform: bool = True


@attrs.define
class Request:
    """Something the chat waits on the user for: a permission (its tool call
    waits for confirmation, with `options`), a question (`questions`), or an
    authentication (its MCP tool call waits for a token for `resource`)."""

    id: str
    kind: str
    turn_id: str | None
    tool_call_id: str | None
    label: str
    options: tuple[Option, ...] = ()
    questions: tuple[Question, ...] = ()
    editable: bool = False  # a permission that takes an edited tool input
    resource: str | None = None  # an authentication: the resource a token is wanted for
    scopes: tuple[str, ...] = ()


@attrs.define
class Turn:
    """A finished turn as /open shows it."""

    text: str
    reply: str
    state: str
    error: str | None


@attrs.define
class ChatView:
    """The open chat as the client last saw it."""

    active_turn: str | None = None
    steering: list[Pending] = attrs.field(factory=list)
    queued: list[Pending] = attrs.field(factory=list)
    requests: list[Request] = attrs.field(factory=list)
    turns: int = 0
    history: list[Turn] = attrs.field(factory=list)  # as subscribed; not kept up to date
    active_text: str = ""  # the running turn's message and its reply so far, as subscribed
    active_reply: str = ""
    thinking: list[str] = attrs.field(factory=list)  # the latest turn's reasoning, by part
    resumable: str | None = None  # the latest turn, when it stopped at a resumable error
    unannounced: int = 0  # the reasoning characters streamed since the last "[thinking]" line

    @property
    def pending(self) -> list[Pending]:
        """Steering first, then the queue: the numbering /queue and /remove use."""
        return self.steering + self.queued


# -- the AHP JSON shapes ---------------------------------------------------------------------
def wire_turn_started(turn_id: str, text: str) -> dict[str, Any]:
    return {"type": "chat/turnStarted", "turnId": turn_id, "message": {"text": text}}


def wire_pending_set(kind: str, pending_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "chat/pendingMessageSet",
        "kind": kind,
        "id": pending_id,
        "message": {"text": text},
    }


def wire_pending_removed(kind: str, pending_id: str) -> dict[str, Any]:
    return {"type": "chat/pendingMessageRemoved", "kind": kind, "id": pending_id}


def wire_confirmed(
    request: Request, approved: bool, option: Option | None, edited: str | None = None
) -> dict[str, Any]:
    """chat/toolCallConfirmed, with the option chosen (AHP 1.1's selectedOptionId)
    and the tool input the user edited (editedToolInput)."""
    action: dict[str, Any] = {
        "type": "chat/toolCallConfirmed",
        "turnId": request.turn_id,
        "toolCallId": request.tool_call_id or request.id,
        "approved": approved,
    }
    if option is not None:
        action["selectedOptionId"] = option.id
    if edited is not None:
        action["editedToolInput"] = edited
    return action


def wire_input_completed(request: Request, answers: list[str]) -> dict[str, Any]:
    """chat/inputCompleted, accepted with AHP's answers (one per question, in
    order: a choice as selected, other text as text). `answer` (the first
    answer in words: a choice's label) is for a server that reads only that."""
    by_id: dict[str, Any] = {}
    words: list[str] = []
    for question, text in zip(request.questions, answers, strict=False):
        choice = _choice(question, text)
        words.append(text if choice is None else choice.label)
        value = (
            {"kind": "selected", "value": choice.id}
            if choice is not None
            else {"kind": "text", "value": text}
        )
        by_id[question.id] = {"state": "submitted", "value": value}
    return {
        "type": "chat/inputCompleted",
        "requestId": request.id,
        "response": "accept",
        "answers": by_id,
        "answer": words[0] if words else (answers[0] if answers else ""),
    }


def wire_input_declined(request: Request) -> dict[str, Any]:
    return {"type": "chat/inputCompleted", "requestId": request.id, "response": "decline"}


def _choice(question: Question, text: str) -> Option | None:
    """A question's choice named by its number, id or label."""
    choices = question.choices
    if text.isdigit() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1]
    return next((c for c in choices if text in (c.id, c.label)), None)


def option_of(request: Request, named: str) -> Option | None:
    """A permission's option named by its number, id or label."""
    options = request.options
    if named.isdigit() and 1 <= int(named) <= len(options):
        return options[int(named) - 1]
    return next((o for o in options if named in (o.id, o.label)), None)


def _wire_options(data: Any) -> tuple[Option, ...]:
    return tuple(
        Option(
            id=str(o.get("id")),
            label=str(o.get("label", o.get("id"))),
            kind=str(o.get("kind") or ""),
        )
        for o in data or []
        if isinstance(o, dict)
    )


def _wire_questions(data: Any) -> tuple[Question, ...]:
    return tuple(
        Question(
            id=str(q.get("id")),
            text=str(q.get("message") or q.get("title") or ""),
            choices=_wire_options(q.get("options")),
            freeform=q.get("allowFreeformInput") is not False,
        )
        for q in data or []
        if isinstance(q, dict)
    )


def _wire_pending(data: dict[str, Any], kind: str | None = None) -> Pending:
    """A pending message; in a chat state's lists its kind is the list's."""
    message = data.get("message") or {}
    kind = str(data.get("kind") or kind)
    return Pending(id=str(data.get("id")), kind=kind, text=message.get("text", ""))


def _wire_request(data: dict[str, Any]) -> Request:
    if data.get("kind") == "authentication":
        return _wire_auth(data, str(data.get("requestId")), data.get("toolName"))
    label = (
        data.get("question") or f"{data.get('toolName') or 'a tool'} {data.get('arguments') or ''}"
    )
    return Request(
        id=str(data.get("requestId")),
        kind=str(data.get("kind")),
        turn_id=data.get("turnId"),
        tool_call_id=data.get("toolCallId"),
        label=label.strip(),
        options=_wire_options(data.get("options")),
        questions=_wire_questions(data.get("questions")),
    )


def _wire_ready(action: dict[str, Any]) -> Request:
    """chat/toolCallReady of a call that waits for confirmation, as its prompt."""
    tool_input = action.get("toolInput") or ""
    message = action.get("invocationMessage")
    label = message if isinstance(message, str) else (message or {}).get("markdown", "a tool")
    return Request(
        id=str(action.get("toolCallId")),
        kind="permission",
        turn_id=action.get("turnId"),
        tool_call_id=action.get("toolCallId"),
        label=f"{label} {tool_input}".strip(),
        options=_wire_options(action.get("options")),
        editable=action.get("editable") is True,
    )


def _wire_auth(data: dict[str, Any], request_id: str, tool: str | None) -> Request:
    """A tool call waiting for a token (x-chat/requestOpened or
    chat/toolCallAuthRequired, whose `auth` is the challenge), as its prompt."""
    auth = data.get("auth") or {}
    resource = str((auth.get("resource") or {}).get("resource") or "")
    return Request(
        id=request_id,
        kind="authentication",
        turn_id=data.get("turnId"),
        tool_call_id=data.get("toolCallId"),
        label=f"{tool or 'a tool call'} needs authorization for {resource}",
        resource=resource,
        scopes=tuple(str(s) for s in auth.get("requiredScopes") or ()),
    )


def _wire_input(request: dict[str, Any]) -> Request:
    """chat/inputRequested's request, as its prompt."""
    questions = _wire_questions(request.get("questions"))
    label = request.get("message") or (questions[0].text if questions else "")
    return Request(
        id=str(request.get("id")),
        kind="user_input",
        turn_id=None,
        tool_call_id=None,
        label=str(label),
        questions=questions,
    )


def _wire_reply(turn: dict[str, Any]) -> str:
    parts = turn.get("responseParts") or []
    return "".join(str(p.get("content") or "") for p in parts if p.get("kind") == "markdown")


def _wire_turn(turn: dict[str, Any]) -> Turn:
    error = turn.get("error")
    return Turn(
        text=str((turn.get("message") or {}).get("text", "")),
        reply=_wire_reply(turn),
        state=str(turn.get("state") or "complete"),
        error=error.get("message") if isinstance(error, dict) else None,
    )


def wire_view(state: dict[str, Any]) -> ChatView:
    active = state.get("activeTurn")
    turns = state.get("turns") or []
    return ChatView(
        active_turn=active.get("id") if isinstance(active, dict) else None,
        steering=[_wire_pending(p, "steering") for p in state.get("steeringMessages") or []],
        queued=[_wire_pending(p, "queued") for p in state.get("queuedMessages") or []],
        requests=_unique(
            [_wire_request(r) for r in state.get("openRequests") or []]
            + [_wire_input(r) for r in state.get("inputRequests") or []]
        ),
        turns=len(turns),
        history=[_wire_turn(t) for t in turns[-HISTORY_TURNS:]],
        active_text=_wire_turn(active).text if isinstance(active, dict) else "",
        active_reply=_wire_reply(active) if isinstance(active, dict) else "",
        thinking=_wire_thinking(active) if isinstance(active, dict) else [],
        resumable=_resumable(turns[-1]) if turns and not isinstance(active, dict) else None,
    )


def _resumable(turn: dict[str, Any]) -> str | None:
    """The turn's id when it stopped at an error that allows chat/turnResume."""
    error = turn.get("error")
    parts = turn.get("responseParts") or []
    last = parts[-1] if parts else {}
    if turn.get("state") != "error":
        return None
    if (isinstance(error, dict) and error.get("resumable")) or (
        last.get("kind") == "error" and last.get("resumable")
    ):
        return str(turn.get("id"))
    return None


def _wire_thinking(turn: dict[str, Any]) -> list[str]:
    parts = turn.get("responseParts") or []
    return [str(p.get("content") or "") for p in parts if p.get("kind") == "reasoning"]


def _unique(requests: list[Request]) -> list[Request]:
    """One prompt per request (its x- and its AHP form name the same one)."""
    kept: list[Request] = []
    for request in requests:
        if not any(same(r, request) for r in kept):
            kept.append(request)
    return kept


def same(a: Request, b: Request) -> bool:
    return a.id == b.id or (a.tool_call_id is not None and a.tool_call_id == b.tool_call_id)


def how_to_answer(request: Request) -> str:
    """How to answer a request, with the options or choices it offers."""
    if request.kind == "permission":
        edit = "; /edit JSON changes its input" if request.editable else ""
        if not request.options:
            return f"/approve or /deny{edit}"
        listed = ", ".join(f"{n}. {o.label}" for n, o in enumerate(request.options, 1))
        return f"/approve OPTION or /deny: {listed}{edit}"
    if request.kind == "authentication":
        scopes = f" with scopes {', '.join(request.scopes)}" if request.scopes else ""
        return f"/authorize TOKEN: a token for {request.resource}{scopes}"
    if request.kind != "user_input":
        return "another client answers it"
    asked = []
    for question in request.questions:
        if question.choices:
            choices = ", ".join(f"{n}. {c.label}" for n, c in enumerate(question.choices, 1))
            more = " or text" if question.freeform else ""
            asked.append(
                f"{question.text}: a choice{more}: {choices}"
                if len(request.questions) > 1
                else f"a choice{more}: {choices}"
            )
        elif len(request.questions) > 1:
            asked.append(f"{question.text}: text")
    if not asked:
        return "/answer text"
    if len(request.questions) > 1:
        return "/answer one answer each, separated by ';': " + "; ".join(asked)
    return "/answer " + asked[0]


class Seen(StrEnum):
    """What an action told the client."""

    STARTED = "started"
    RESUMED = "resumed"
    DELTA = "delta"
    ENDED = "ended"
    PENDING_SET = "pending_set"
    PENDING_REMOVED = "pending_removed"
    STEERING_FOLDED = "steering_folded"
    RENAMED = "renamed"
    TOOL = "tool"
    REQUEST_OPENED = "request_opened"
    REQUEST_CLOSED = "request_closed"
    REASONING_PART = "reasoning_part"
    REASONING = "reasoning"
    DRAFT = "draft"
    OTHER = "other"


def read_action(action: dict[str, Any]) -> tuple[Seen, dict[str, Any]]:
    """An action as (what happened, the fields the client uses)."""
    kind = action.get("type")
    if kind == "chat/responsePart" and (action.get("part") or {}).get("kind") == "reasoning":
        return Seen.REASONING_PART, {"turn_id": action.get("turnId")}
    if kind == "chat/reasoning":
        return Seen.REASONING, {"turn_id": action.get("turnId"), "text": action.get("content", "")}
    if kind == "chat/toolCallReady" and not action.get("confirmed"):
        return Seen.REQUEST_OPENED, {"request": _wire_ready(action)}
    if kind == "chat/toolCallAuthRequired":
        request = _wire_auth(action, str(action.get("toolCallId")), None)
        return Seen.REQUEST_OPENED, {"request": request}
    if kind == "chat/toolCallAuthResolved":
        return Seen.REQUEST_CLOSED, {"id": action.get("toolCallId")}
    if kind == "chat/inputRequested":
        return Seen.REQUEST_OPENED, {"request": _wire_input(action.get("request") or {})}
    if kind == "chat/toolCallConfirmed":
        return Seen.REQUEST_CLOSED, {"id": action.get("toolCallId")}
    if kind == "chat/inputCompleted":
        return Seen.REQUEST_CLOSED, {"id": action.get("requestId")}
    if kind == "chat/inputAnswerChanged":
        return Seen.DRAFT, {
            "id": action.get("requestId"),
            "question": action.get("questionId"),
            "text": answer_text(action.get("answer")),
        }
    message = action.get("message") or {}
    if kind == "chat/turnStarted":
        return Seen.STARTED, {
            "turn_id": action.get("turnId"),
            "text": message.get("text", ""),
            "pending_id": action.get("queuedMessageId"),
        }
    if kind == "chat/delta":
        text = action.get("text", action.get("content", ""))  # AHP names it content
        return Seen.DELTA, {"turn_id": action.get("turnId"), "text": text}
    if kind in ("chat/turnComplete", "chat/turnCancelled", "chat/error"):
        outcome = {"chat/turnComplete": "complete", "chat/turnCancelled": "cancelled"}
        error = action.get("error") or {}
        part = action.get("part") or {}
        return Seen.ENDED, {
            "turn_id": action.get("turnId"),
            "outcome": outcome.get(kind, "error"),
            "error": error.get("message") if isinstance(error, dict) else None,
            "resumable": bool(
                (isinstance(error, dict) and error.get("resumable"))
                or (isinstance(part, dict) and part.get("resumable"))
            ),
        }
    if kind == "chat/turnResume":
        return Seen.RESUMED, {"turn_id": action.get("turnId")}
    if kind == "chat/pendingMessageSet":
        return Seen.PENDING_SET, {"pending": _wire_pending(action.get("pending") or action)}
    if kind == "chat/pendingMessageRemoved":
        pending_id = action.get("pendingId") or action.get("id")
        return Seen.PENDING_REMOVED, {"id": pending_id, "reason": action.get("reason") or "client"}
    if kind == "x-chat/steeringRecorded":
        return Seen.STEERING_FOLDED, {"pending": _wire_pending(action.get("pending") or {})}
    if kind == "x-chat/titleChanged":
        return Seen.RENAMED, {"title": action.get("title") or "untitled"}
    if kind == "chat/toolCallStart":
        return Seen.TOOL, {"name": action.get("displayName") or action.get("toolName")}
    if kind == "x-chat/requestOpened":
        return Seen.REQUEST_OPENED, {"request": _wire_request(action.get("request") or {})}
    if kind == "x-chat/requestClosed":
        return Seen.REQUEST_CLOSED, {"id": action.get("requestId")}
    return Seen.OTHER, {}


def answer_text(answer: Any) -> str | None:
    """An InputAnswer as words (its values and free text); None for none."""
    if not isinstance(answer, dict):
        return None
    if answer.get("state") == "skipped":
        return "(skipped)"
    value = (answer.get("value") or {}).get("value")
    values = (
        [str(v) for v in value]
        if isinstance(value, list)
        else []
        if value is None
        else [str(value)]
    )
    return ", ".join(map(str, [*values, *(answer.get("freeformValues") or [])]))


def draft_line(requests: list[Request], fields: dict[str, Any]) -> str:
    """Another client's draft answer (chat/inputAnswerChanged), as a line."""
    request = next((r for r in requests if r.id == fields["id"]), None)
    asked = (
        next((q.text for q in request.questions if q.id == fields["question"]), None)
        if request
        else None
    )
    about = asked or (request.label if request else fields["question"])
    if fields["text"] is None:
        return f"[another client cleared its draft] {about}"
    return f"[another client's draft] {about}: {fields['text']}"
