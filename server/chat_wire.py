"""What `agenthost chat` knows of AHP's JSON: the records its view is made of,
and the functions between them and the wire.

`wire_*` build or read one JSON shape; `read_action` turns an action into
what happened and the fields the client uses. Nothing else in the terminal
client reads or writes AHP's JSON, so a change of shape is a change here.
"""

from typing import Any

import attrs

HISTORY_TURNS = 20  # turns /open shows of a session's history


@attrs.define
class Pending:
    id: str
    kind: str
    text: str


@attrs.define
class Request:
    id: str
    kind: str
    turn_id: str | None
    tool_call_id: str | None
    label: str


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


def wire_pending(data: dict[str, Any], kind: str | None = None) -> Pending:
    """A pending message; in a chat state's lists its kind is the list's."""
    message = data.get("message") or {}
    kind = str(data.get("kind") or kind)
    return Pending(id=str(data.get("id")), kind=kind, text=message.get("text", ""))


def wire_request(data: dict[str, Any]) -> Request:
    label = (
        data.get("question") or f"{data.get('toolName') or 'a tool'} {data.get('arguments') or ''}"
    )
    return Request(
        id=str(data.get("requestId")),
        kind=str(data.get("kind")),
        turn_id=data.get("turnId"),
        tool_call_id=data.get("toolCallId"),
        label=label.strip(),
    )


def wire_reply(turn: dict[str, Any]) -> str:
    parts = turn.get("responseParts") or []
    return "".join(str(p.get("content") or "") for p in parts if p.get("kind") == "markdown")


def wire_turn(turn: dict[str, Any]) -> Turn:
    error = turn.get("error")
    return Turn(
        text=str((turn.get("message") or {}).get("text", "")),
        reply=wire_reply(turn),
        state=str(turn.get("state") or "complete"),
        error=error.get("message") if isinstance(error, dict) else None,
    )


def wire_view(state: dict[str, Any]) -> ChatView:
    active = state.get("activeTurn")
    turns = state.get("turns") or []
    return ChatView(
        active_turn=active.get("id") if isinstance(active, dict) else None,
        steering=[wire_pending(p, "steering") for p in state.get("steeringMessages") or []],
        queued=[wire_pending(p, "queued") for p in state.get("queuedMessages") or []],
        requests=[wire_request(r) for r in state.get("openRequests") or []],
        turns=len(turns),
        history=[wire_turn(t) for t in turns[-HISTORY_TURNS:]],
        active_text=wire_turn(active).text if isinstance(active, dict) else "",
        active_reply=wire_reply(active) if isinstance(active, dict) else "",
    )


def read_action(action: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """An action as (what happened, the fields the client uses)."""
    kind = action.get("type")
    message = action.get("message") or {}
    if kind == "chat/turnStarted":
        return "started", {
            "turn_id": action.get("turnId"),
            "text": message.get("text", ""),
            "pending_id": action.get("queuedMessageId"),
        }
    if kind == "chat/delta":
        text = action.get("text", action.get("content", ""))  # AHP names it content
        return "delta", {"turn_id": action.get("turnId"), "text": text}
    if kind in ("chat/turnComplete", "chat/turnCancelled", "chat/error"):
        outcome = {"chat/turnComplete": "complete", "chat/turnCancelled": "cancelled"}
        error = action.get("error") or {}
        return "ended", {
            "turn_id": action.get("turnId"),
            "outcome": outcome.get(kind, "error"),
            "error": error.get("message") if isinstance(error, dict) else None,
        }
    if kind == "chat/pendingMessageSet":
        return "pending_set", {"pending": wire_pending(action.get("pending") or action)}
    if kind == "chat/pendingMessageRemoved":
        pending_id = action.get("pendingId") or action.get("id")
        return "pending_removed", {"id": pending_id, "reason": action.get("reason") or "client"}
    if kind == "x-chat/steeringRecorded":
        return "steering_folded", {"pending": wire_pending(action.get("pending") or {})}
    if kind == "x-chat/titleChanged":
        return "renamed", {"title": action.get("title") or "untitled"}
    if kind == "chat/toolCallStart":
        return "tool", {"name": action.get("displayName") or action.get("toolName")}
    if kind == "x-chat/requestOpened":
        return "request_opened", {"request": wire_request(action.get("request") or {})}
    if kind == "x-chat/requestClosed":
        return "request_closed", {"id": action.get("requestId")}
    return "other", {}
