"""The wire's naming, and the values whose AHP shape is not their fields one to
one (messages/wire.py converts everything else field by field).

- `camel`: a field's wire name, camelCase (AHP's error shape renames `code`
  to `errorType`); `wire_name_of`: a field's, or its `wire_name` marker's;
- `ADAPTERS`: a class -> (out, in) reshaping of the dict cattrs makes or
  reads: a pending message set is flat, a tool result nested, a chat state's
  pending messages are two lists, and so on. `out` takes the field-by-field
  dict and returns the wire's; `in` takes the wire's and returns one cattrs
  can structure field by field.
"""

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from agenthost.messages import events, parts, state
from agenthost.messages.fields import WIRE_NAME, Json

_RENAMES = {"code": "errorType"}  # AHP's error shape: {errorType, message}


def camel(name: str) -> str:
    if name in _RENAMES:
        return _RENAMES[name]
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def wire_name_of(field: "attrs.Attribute[Any]") -> str:
    return str(field.metadata.get(WIRE_NAME) or camel(field.name))


_PENDING_LISTS = {
    "steeringMessages": state.PendingKind.STEERING,
    "queuedMessages": state.PendingKind.QUEUED,
}


def _chat_state_out(data: dict[str, Any]) -> dict[str, Any]:
    """Inside a chat state a pending message's kind is its list's; it is left off
    unless it disagrees (a value AHP cannot hold, kept so nothing is lost)."""
    for key, kind in (*_PENDING_LISTS.items(), ("steeringMessage", state.PendingKind.STEERING)):
        value = data.get(key)
        items = value if isinstance(value, list) else [value] if value else []
        for item in items:
            if item.get("kind") == kind.value:
                del item["kind"]
    return data


def _chat_state_in(data: Mapping[str, Any]) -> Mapping[str, Any]:
    out = dict(data)
    for key, kind in (*_PENDING_LISTS.items(), ("steeringMessage", state.PendingKind.STEERING)):
        value = out.get(key)
        if isinstance(value, list):
            out[key] = [{"kind": kind.value, **item} for item in value]
        elif isinstance(value, Mapping):
            out[key] = {"kind": kind.value, **value}
    return out


def _pending_set_out(data: dict[str, Any]) -> dict[str, Any]:
    pending = data.pop("pending")
    return {**data, **pending}


def _pending_set_in(data: Mapping[str, Any]) -> Mapping[str, Any]:
    if "pending" in data:
        return data
    keys = ("id", "kind", "message", "turnId")  # turnId: our extension of the message
    rest = {k: v for k, v in data.items() if k not in keys}
    return {**rest, "pending": {k: data[k] for k in keys if k in data}}


_RESULT_KEYS = ("success", "pastTenseMessage", "content", "structuredContent", "error")


def _tool_complete_out(data: dict[str, Any]) -> dict[str, Any]:
    result = {key: data.pop(key) for key in _RESULT_KEYS if key in data}
    return {**data, "result": result}


def _tool_complete_in(data: Mapping[str, Any]) -> Mapping[str, Any]:
    result = data.get("result")
    if not isinstance(result, Mapping):
        return data
    return {**{k: v for k, v in data.items() if k != "result"}, **result}


def _usage_in(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """Exports written before the AHP names used promptTokens / completionTokens."""
    out = dict(data)
    for old, new in (("promptTokens", "inputTokens"), ("completionTokens", "outputTokens")):
        if old in out:
            out.setdefault(new, out.pop(old))
    return out


_FLAG_BITS = {"read": state.ChatStatus.IS_READ, "archived": state.ChatStatus.IS_ARCHIVED}


def _session_state_out(data: dict[str, Any]) -> dict[str, Any]:
    """`read` and `archived` fold into the status bitset; config values and
    schema are AHP's `config: {schema?, values}`."""
    status = int(data["status"])
    for key, bit in _FLAG_BITS.items():
        if data.pop(key):
            status |= bit
    data["status"] = status
    schema = data.pop("configSchema", None)
    values = dict(data.pop("config"))
    if values or schema is not None:
        data["config"] = (
            {"values": values} if schema is None else {"schema": schema, "values": values}
        )
    return data


def _session_state_in(data: Mapping[str, Any]) -> Mapping[str, Any]:
    out = dict(data)
    if "status" in out and not any(key in out for key in _FLAG_BITS):
        status = int(out["status"])
        for key, bit in _FLAG_BITS.items():
            out[key] = bool(status & bit)
    config = out.get("config")
    if isinstance(config, Mapping):
        out["config"] = sorted(dict(config.get("values") or {}).items())
        if "schema" in config:
            out["configSchema"] = config["schema"]
    legacy = out.get("inputNeeded")  # exports before the AHP shape: a list of chat ids
    if isinstance(legacy, list) and legacy and all(isinstance(item, str) for item in legacy):
        out.setdefault("inputNeededChats", legacy)
        del out["inputNeeded"]
    return out


_CHAT_CHANGES = tuple(
    wire_name_of(f)
    for f in attrs.fields(events.ChatUpdated)
    if f.name not in ("session_id", "chat")
)


def _chat_updated_out(data: dict[str, Any]) -> dict[str, Any]:
    changes = {key: data.pop(key) for key in _CHAT_CHANGES if key in data}
    return {**data, "changes": changes}


def _chat_updated_in(data: Mapping[str, Any]) -> Mapping[str, Any]:
    changes = data.get("changes")
    if not isinstance(changes, Mapping) or "chat" not in data:
        return data
    return {**{k: v for k, v in data.items() if k != "changes"}, **changes}


def _chat_uri(chat_id: str) -> str:
    return chat_id if ":" in chat_id else state.chat_resource(chat_id)


def _chat_origin_out(data: dict[str, Any]) -> dict[str, Any]:
    """AHP names the source chat by its URI (`chat`); agenthost keeps its id."""
    chat_id = data.pop("chatId", None)
    return data if chat_id is None else {**data, "chat": _chat_uri(chat_id)}


def _chat_origin_in(data: Mapping[str, Any]) -> Mapping[str, Any]:
    chat = data.get("chat")
    if not isinstance(chat, str) or "chatId" in data:
        return data
    prefix = state.chat_resource("")
    chat_id = chat[len(prefix) :] if chat.startswith(prefix) else chat
    return {**{k: v for k, v in data.items() if k != "chat"}, "chatId": chat_id}


def _attachment_out(data: dict[str, Any]) -> dict[str, Any]:
    """A text attachment is AHP's simple attachment: its name the label, its
    text the model's representation."""
    return {
        "type": "simple",
        "label": data.pop("name"),
        "modelRepresentation": data.pop("text"),
        **data,
    }


def _attachment_in(data: Mapping[str, Any]) -> Mapping[str, Any]:
    if "name" in data:  # exports before the AHP shape: {name, text}
        return data
    rest = {k: v for k, v in data.items() if k not in ("label", "modelRepresentation")}
    return {**rest, "name": data.get("label"), "text": data.get("modelRepresentation", "")}


def _message_out(data: dict[str, Any]) -> dict[str, Any]:
    """Text attachments and references share AHP's `attachments` list."""
    references = data.pop("references", [])
    if references:
        data["attachments"] = [*data.get("attachments", []), *references]
    return data


def _is_text_attachment(item: object) -> bool:
    return isinstance(item, Mapping) and (item.get("type") == "simple" or "name" in item)


def _message_in(data: Mapping[str, Any]) -> Mapping[str, Any]:
    items = data.get("attachments")
    if not isinstance(items, list) or "references" in data:
        return data
    return {
        **data,
        "attachments": [item for item in items if _is_text_attachment(item)],
        "references": [item for item in items if not _is_text_attachment(item)],
    }


def _client_tool_out(data: dict[str, Any]) -> dict[str, Any]:
    """`parameters` (JSON text) is AHP's `inputSchema` (an object), absent while empty."""
    parameters = data.pop("parameters")
    if parameters != "{}":
        data["inputSchema"] = Json(parameters).value
    return data


def _client_tool_in(data: Mapping[str, Any]) -> Mapping[str, Any]:
    out = dict(data)
    schema = out.pop("inputSchema", None)
    if schema is not None and "parameters" not in out:
        out["parameters"] = Json.of(schema).text
    return out


ADAPTERS: dict[type, tuple[Callable[..., Any] | None, Callable[..., Any] | None]] = {
    state.ChatState: (_chat_state_out, _chat_state_in),
    events.PendingMessageAdded: (_pending_set_out, _pending_set_in),
    events.ToolCallCompleted: (_tool_complete_out, _tool_complete_in),
    state.Usage: (None, _usage_in),
    state.SessionState: (_session_state_out, _session_state_in),
    events.ChatUpdated: (_chat_updated_out, _chat_updated_in),
    state.ChatOrigin: (_chat_origin_out, _chat_origin_in),
    parts.Attachment: (_attachment_out, _attachment_in),
    parts.UserMessage: (_message_out, _message_in),
    state.ClientTool: (_client_tool_out, _client_tool_in),
}
