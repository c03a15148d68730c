"""JSON conversion for every message and state value (cattrs), used by the
store and the server alike.

Rules:
- field names are camelCase on the wire (`turn_id` -> `turnId`), or the name a
  field's `wire_name` marker gives (`meta` -> `_meta`); only this module
  translates;
- a field whose default is None is omitted while it is None, and a field
  marked `extension` while it equals its default;
- every message carries a `type` tag: its AHP action type (`wire_type`)
  where it has one, else its class name, so `from_wire(data)` needs no hint;
- fields marked `iso_time` (ms since the epoch inside) are ISO-8601 strings
  on the wire; fields marked `as_object` (key/value pairs inside) are objects;
- a few values have an AHP shape that is not their fields one to one (a
  pending message set is flat, a tool result is nested); `_ADAPTERS` reshapes
  them on the way out and back;
- open unions (response parts, source locations, customizations, artifacts,
  origins, ...) are told apart by their `kind` or `type`; a variant this host
  does not know decodes to `Unknown` and re-encodes as it came. A value that
  is a string or an object (`str | ContentRef`, `str | DirectoryInfo`) is told
  apart by its JSON type;
- unknown keys are ignored on the way in (AHP group B round trips); unknown
  enum values are kept (see OpenStrEnum); an unknown action type is an
  `UnknownAction` for `action_from_wire`, and an error for `from_wire`;
- a value that does not fit raises ValidationError naming the offending field
  by its wire path (`params.action.turnId`, `items[2].status`).
"""

import datetime
import enum
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.errors import ClassValidationError, IterableValidationError
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from agenthost.messages import (
    commands,
    common,
    customizations,
    events,
    parts,
    protocol,
    provider,
    session_events,
    state,
)
from agenthost.messages.errors import AgentHostError, ValidationError
from agenthost.messages.fields import AS_OBJECT, IMPLICIT, ISO_TIME, OMIT_DEFAULT, WIRE_NAME, Json

T = TypeVar("T")

_RENAMES = {"code": "errorType"}  # AHP's error shape: {errorType, message}


def camel(name: str) -> str:
    if name in _RENAMES:
        return _RENAMES[name]
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def ms_to_iso(ms: int) -> str:
    moment = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(
        milliseconds=ms
    )
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_to_ms(text: str | int, _type: object = None) -> int:
    if isinstance(text, int):
        return text
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return round(moment.timestamp() * 1000)


def _iso_out(ms: int | None) -> str | int | None:
    """ISO-8601; a time outside years 1-9999 stays a number (iso_to_ms takes both)."""
    if ms is None:
        return None
    try:
        return ms_to_iso(ms)
    except OverflowError:
        return ms


def _iso_in(text: str | int | None, _type: object = None) -> int | None:
    return None if text is None else iso_to_ms(text)


def _tag(cls: type) -> str:
    return getattr(cls, "wire_type", "") or cls.__name__


def _wire_name(field: "attrs.Attribute[Any]") -> str:
    return str(field.metadata.get(WIRE_NAME) or camel(field.name))


converter = cattrs.Converter()


def _field_overrides(cls: type, structuring: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in attrs.fields(cls):
        kwargs: dict[str, Any] = {"rename": _wire_name(field)}
        if field.metadata.get(ISO_TIME):
            kwargs["struct_hook" if structuring else "unstruct_hook"] = (
                _iso_in if structuring else _iso_out
            )
        out[field.name] = override(**kwargs)
    return out


def _defaults_to_omit(cls: type) -> list[tuple[str, Any]]:
    """(wire name, default as it is on the wire) of each field left off the
    wire at its default."""
    out = []
    for field in attrs.fields(cls):
        default = field.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = default.factory()  # type: ignore[attr-defined,unused-ignore]
        if field.metadata.get(OMIT_DEFAULT) or default is None:
            wire_default = None if default is None else converter.unstructure(default)
            out.append((_wire_name(field), wire_default))
    return out


def _object_keys(cls: type) -> tuple[str, ...]:
    return tuple(_wire_name(f) for f in attrs.fields(cls) if f.metadata.get(AS_OBJECT))


def _make_unstructure(cls: type) -> Callable[[Any], dict[str, Any]]:
    base: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn(
        cls,
        converter,
        _cattrs_include_init_false=True,  # a part's fixed `kind`
        **_field_overrides(cls, structuring=False),
    )
    omit = _defaults_to_omit(cls)
    implicit = [
        (f.name, _wire_name(f), f.metadata[IMPLICIT])
        for f in attrs.fields(cls)
        if IMPLICIT in f.metadata
    ]
    objects = _object_keys(cls)
    tag = _tag(cls) if cls in _TAGGED else None
    adapt = _ADAPTERS.get(cls, (None, None))[0]

    def unstructure(obj: Any) -> dict[str, Any]:
        data = base(obj)
        for key, default in omit:
            if key in data and data[key] == default:
                del data[key]
        for name, key, value in implicit:
            if getattr(obj, name) is value:
                del data[key]
        for key in objects:
            if isinstance(data.get(key), list):
                data[key] = dict(data[key])
        if adapt is not None:
            data = adapt(data)
        return data if tag is None else {"type": tag, **data}

    return unstructure


def _make_structure(cls: type) -> Callable[[Mapping[str, Any], Any], Any]:
    base: Callable[[Mapping[str, Any], Any], Any] = make_dict_structure_fn(
        cls, converter, **_field_overrides(cls, structuring=True)
    )
    objects = _object_keys(cls)
    adapt = _ADAPTERS.get(cls, (None, None))[1]

    def structure(data: Mapping[str, Any], cls: Any) -> Any:
        if not isinstance(data, Mapping):
            raise ValueError(f"expected an object, not {type(data).__name__}")
        if adapt is not None:
            data = adapt(data)
        if any(isinstance(data.get(key), Mapping) for key in objects):
            data = {k: list(v.items()) if k in objects else v for k, v in data.items()}
        return base(data, cls)

    return structure


# -- values whose AHP shape is not their fields one to one ----------------------

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
    _wire_name(f) for f in attrs.fields(events.ChatUpdated) if f.name not in ("session_id", "chat")
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


_ADAPTERS: dict[type, tuple[Callable[..., Any] | None, Callable[..., Any] | None]] = {
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


# -- tags, unions and leaf values -------------------------------------------------

_MESSAGE_MODULES = (events, session_events, provider, commands)  # state values carry no tag
_BASES = (events.ChatEvent, session_events.SessionEvent, session_events.RootEvent)
_TAGGED: dict[type, str] = {
    value: _tag(value)
    for module in _MESSAGE_MODULES
    for value in vars(module).values()
    if isinstance(value, type)
    and attrs.has(value)
    and value.__module__ == module.__name__
    and value not in _BASES  # the bases, never sent
}
_BY_TAG: dict[str, type] = {tag: cls for cls, tag in _TAGGED.items()}


def _fixed_tag(cls: type, key: str) -> str:
    return str(attrs.fields_dict(cls)[key].default)


def _union_members(t: Any) -> frozenset[Any] | None:
    if typing.get_origin(t) not in (typing.Union, types.UnionType):
        return None
    return frozenset(a for a in typing.get_args(t) if a is not type(None))


@attrs.frozen
class _OpenUnion:
    """An open union: its discriminator key and the class of each known tag."""

    key: str
    classes: Mapping[str, type]


_OPEN_UNIONS: dict[frozenset[Any], _OpenUnion] = {}


def _open_union(union: Any, key: str, classes: Mapping[str, type] | None = None) -> None:
    """Register `union` (ending in Unknown): its classes by their fixed `key` field,
    or as `classes` says (one class holding several tags in an open-enum field)."""
    members = _union_members(union)
    assert members is not None and common.Unknown in members
    known = classes or {_fixed_tag(c, key): c for c in members if c is not common.Unknown}
    _OPEN_UNIONS[members] = _OpenUnion(key=key, classes=known)


_open_union(state.ResponsePart, "kind")
_open_union(parts.SourceLocation, "kind")
_open_union(parts.Reference, "type")
_open_union(
    parts.MessageAttachment,
    "type",
    {
        "simple": parts.Attachment,
        **{
            _fixed_tag(c, "type"): c
            for c in typing.get_args(parts.Reference)
            if c is not common.Unknown
        },
    },
)
_open_union(common.SessionOrigin, "kind")
_open_union(common.Artifact, "type")
_open_union(
    common.DirectoryOrigin | common.Unknown,
    "kind",
    {kind.value: common.DirectoryOrigin for kind in common.DirectoryOriginKind},
)
_open_union(
    customizations.AnyCustomization,
    "type",
    {kind.value: customizations.Customization for kind in customizations.CustomizationType},
)


def _open_union_of(t: Any) -> _OpenUnion | None:
    members = _union_members(t)
    return None if members is None else _OPEN_UNIONS.get(members)


def _structure_open_union(data: Any, t: Any) -> Any:
    if data is None and type(None) in typing.get_args(t):
        return None
    union = _open_union_of(t)
    assert union is not None
    if not isinstance(data, Mapping):
        raise ValueError(f"expected an object with a {union.key!r}, not {type(data).__name__}")
    tag = data.get(union.key)
    cls = union.classes.get(tag) if isinstance(tag, str) else None
    if cls is None:
        return common.Unknown(data=Json.of(dict(data)))
    return converter.structure(data, cls)


def _str_or_class(t: Any) -> type | None:
    """The attrs class of a `str | SomeClass` (or `| None`) union."""
    members = _union_members(t)
    if members is None or str not in members or len(members) != 2:
        return None
    (other,) = members - {str}
    return other if isinstance(other, type) and attrs.has(other) else None


def _structure_str_or_class(data: Any, t: Any) -> Any:
    if data is None and type(None) in typing.get_args(t):
        return None
    if isinstance(data, str):
        return data
    cls = _str_or_class(t)
    assert cls is not None
    if not isinstance(data, Mapping):
        raise ValueError(f"expected a string or an object, not {type(data).__name__}")
    return converter.structure(data, cls)


def _structure_json(value: Any, _type: object) -> Json:
    return Json.of(value)


def _structure_scalar(value: Any, t: Any) -> Any:
    """`int | str` (a JSON-RPC id, a timestamp versions spell differently): kept as sent."""
    allowed = typing.get_args(t)
    if value is None and type(None) in allowed:
        return None
    if isinstance(value, bool) or not isinstance(
        value, tuple(a for a in allowed if a is not type(None))
    ):
        raise ValueError(f"{value!r} is not one of {allowed}")
    return value


def _is_scalar_union(t: Any) -> bool:
    args = set(typing.get_args(t))
    return typing.get_origin(t) in (typing.Union, types.UnionType) and {int, str} <= args <= {
        int,
        str,
        type(None),
    }


def _structure_strict(kind: type) -> Callable[[Any, Any], Any]:
    """JSON's own type, not a coercion: "3" is not an int, 1 is not a string."""

    def structure(value: Any, _type: object) -> Any:
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise ValueError(f"expected {_JSON_NAMES[kind]}, not {_json_name(value)}")
        return value

    return structure


_JSON_NAMES = {str: "a string", int: "an integer", bool: "a boolean", float: "a number"}


def _json_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    for kind, name in _JSON_NAMES.items():
        if isinstance(value, kind):
            return name
    return "an array" if isinstance(value, list) else "an object"


def _structure_float(value: Any, _type: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, not {_json_name(value)}")
    return float(value)


converter.register_unstructure_hook_factory(attrs.has, _make_unstructure)
converter.register_structure_hook_factory(attrs.has, _make_structure)
converter.register_unstructure_hook_func(
    lambda t: isinstance(t, type) and issubclass(t, enum.Enum), lambda value: value.value
)
converter.register_unstructure_hook(Json, lambda value: value.value)
converter.register_unstructure_hook(common.Unknown, lambda value: value.data.value)
converter.register_structure_hook(Json, _structure_json)
converter.register_structure_hook_func(
    lambda t: _open_union_of(t) is not None, _structure_open_union
)
converter.register_structure_hook_func(
    lambda t: _str_or_class(t) is not None, _structure_str_or_class
)
converter.register_structure_hook_func(_is_scalar_union, _structure_scalar)


def _structure_enum(value: Any, t: Any) -> Any:
    return t(value)


for _kind in (str, int, bool):
    converter.register_structure_hook(_kind, _structure_strict(_kind))
converter.register_structure_hook(float, _structure_float)
for _enum in (enum.IntFlag, enum.IntEnum, enum.StrEnum):  # nearer in their MRO than int, str
    converter.register_structure_hook(_enum, _structure_enum)
converter.register_unstructure_hook(AgentHostError, _make_unstructure(AgentHostError))
converter.register_structure_hook(AgentHostError, _make_structure(AgentHostError))


# -- protocol frames and unions -----------------------------------------------------


def action_from_wire(data: Any) -> protocol.StateAction:
    """A chat, session or root action by its `type`; a type this host does not
    know is an UnknownAction, which every reducer ignores.

    Raises:
        ValidationError: the data does not fit (an AgentHostError, INVALID_ARGUMENT).
    """
    action: protocol.StateAction = from_wire(data, protocol.StateAction)  # type: ignore[arg-type]
    return action


def _structure_action(data: Any, _type: object = None) -> Any:
    if not isinstance(data, Mapping):
        raise ValueError("an action is an object")
    if data.get("type") not in _BY_TAG:
        tag = data.get("type")
        if not isinstance(tag, str):
            raise ValueError(f"an action needs a string type, not {tag!r}")
        rest = {k: v for k, v in data.items() if k != "type"}
        return protocol.UnknownAction(type=tag, data=Json.of(rest))
    cls = _BY_TAG[data["type"]]
    if not issubclass(cls, _BASES):
        raise ValueError(f"{data['type']!r} is not an action")
    return converter.structure(data, cls)


def _unstructure_unknown_action(action: protocol.UnknownAction) -> dict[str, Any]:
    rest = action.data.value
    return {"type": action.type, **(rest if isinstance(rest, dict) else {})}


def _structure_jsonrpc(data: Any, _type: object) -> Any:
    if not isinstance(data, Mapping):
        raise ValueError("a JSON-RPC message is an object")
    if "method" in data:
        cls: type = protocol.JsonRpcRequest if "id" in data else protocol.JsonRpcNotification
    elif "error" in data:
        cls = protocol.JsonRpcErrorResponse
    else:
        cls = protocol.JsonRpcSuccess
    return converter.structure(data, cls)


def _structure_reconnect_params(data: Any, _type: object) -> Any:
    """The connection-wide form has one `lastSeenServerSeq`; the per-channel form
    a cursor per subscription."""
    if not isinstance(data, Mapping):
        raise ValueError("reconnect params are an object")
    subscriptions = data.get("subscriptions")
    per_channel = "lastSeenServerSeq" not in data and (
        isinstance(subscriptions, list) and any(isinstance(s, Mapping) for s in subscriptions)
    )
    cls = protocol.ChannelReconnectParams if per_channel else protocol.ConnectionReconnectParams
    return converter.structure(data, cls)


def _structure_reconnect_result(data: Any, _type: object) -> Any:
    if not isinstance(data, Mapping):
        raise ValueError("a reconnect result is an object")
    if "channels" in data and "type" not in data:
        return converter.structure(data, protocol.ChannelReconnectResult)
    kind = data.get("type")
    classes = {"replay": protocol.ReconnectReplay, "snapshot": protocol.ReconnectSnapshot}
    if kind not in classes:
        raise ValueError(f"unknown reconnect result type {kind!r}")
    return converter.structure(data, classes[kind])


def _structure_channel_recovery(data: Any, _type: object) -> Any:
    kind = data.get("kind") if isinstance(data, Mapping) else None
    classes = {
        "replay": protocol.ChannelReplay,
        "snapshot": protocol.ChannelSnapshot,
        "missing": protocol.ChannelMissing,
    }
    if kind not in classes:
        raise ValueError(f"unknown channel recovery kind {kind!r}")
    return converter.structure(data, classes[kind])


def _structure_snapshot(data: Any, _type: object) -> protocol.Snapshot:
    if not isinstance(data, Mapping):
        raise ValueError("a snapshot is an object")
    resource = data["resource"]
    if not isinstance(resource, str):
        raise ValueError("a snapshot's resource is a string")
    return protocol.Snapshot(
        resource=resource,
        state=converter.structure(data["state"], protocol.state_type_for(resource)),
        from_seq=converter.structure(data["fromSeq"], int),
    )


def _without_routing(action: dict[str, Any]) -> dict[str, Any]:
    """On AHP's wire the envelope's channel routes an action: the host's own
    routing ids stay home."""
    return {k: v for k, v in action.items() if k not in ("sessionId", "chatId")}


def _envelope_out(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "action": _without_routing(data["action"])}


_ADAPTERS[protocol.ActionEnvelope] = (_envelope_out, None)
_ADAPTERS[protocol.DispatchActionParams] = (_envelope_out, None)

converter.register_unstructure_hook(protocol.UnknownAction, _unstructure_unknown_action)
converter.register_structure_hook_func(lambda t: t == protocol.StateAction, _structure_action)
converter.register_structure_hook_func(lambda t: t == protocol.JsonRpcMessage, _structure_jsonrpc)
converter.register_structure_hook_func(
    lambda t: t == protocol.ReconnectParams, _structure_reconnect_params
)
converter.register_structure_hook_func(
    lambda t: t == protocol.ReconnectResult, _structure_reconnect_result
)
converter.register_structure_hook_func(
    lambda t: t == protocol.ChannelRecovery, _structure_channel_recovery
)
converter.register_structure_hook(protocol.Snapshot, _structure_snapshot)


# -- errors that name their field ----------------------------------------------------


def _field_wire_name(cls: type, name: str) -> str:
    fields = attrs.fields_dict(cls) if attrs.has(cls) else {}
    return _wire_name(fields[name]) if name in fields else name


def _first_failure(exc: BaseException, path: str) -> tuple[str, BaseException]:
    """The wire path to the first leaf failure inside a cattrs error, and the leaf."""
    while True:
        if isinstance(exc, ClassValidationError):
            owner = exc.cl
            failures, _ = exc.group_exceptions()
            if not failures:
                return path, exc
            exc, note = failures[0]
            path = f"{path}.{_field_wire_name(owner, note.name)}".lstrip(".")
        elif isinstance(exc, IterableValidationError):
            items, _ = exc.group_exceptions()
            if not items:
                return path, exc
            exc, item = items[0]
            path = f"{path}[{item.index}]"
        elif isinstance(exc, ExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        else:
            return path, exc


def _leaf_message(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return "is required"
    text = str(exc.args[0]) if exc.args else type(exc).__name__
    return text


def _validation_error(exc: Exception) -> ValidationError:
    path, leaf = _first_failure(exc, "")
    key = str(leaf.args[0]) if isinstance(leaf, KeyError) and leaf.args else None
    if key is not None and path.rsplit(".", 1)[-1] != key:  # a key a hook looked up
        path = f"{path}.{key}".lstrip(".")
    return ValidationError.of(path, _leaf_message(leaf))


def to_wire(obj: Any) -> Any:
    """A JSON-safe value for a message or state value (dicts, lists, str, int, bool)."""
    return converter.unstructure(obj)


def from_wire(data: Any, cls: type[T] | None = None) -> T:
    """Decode `data` as `cls`, or, without one, by the `type` tag it carries.

    Raises:
        ValidationError: the data does not fit; `.field` is the wire path of the
            offending field ("" for the value itself). It is an AgentHostError
            with code INVALID_ARGUMENT.
    """
    if cls is None:
        tag = data.get("type") if isinstance(data, Mapping) else None
        if tag not in _BY_TAG:
            raise ValidationError.of("type", f"unknown message type {tag!r}")
        cls = _BY_TAG[tag]
    try:
        return converter.structure(data, cls)
    except (cattrs.BaseValidationError, KeyError, TypeError, ValueError) as exc:
        raise _validation_error(exc) from exc


def message_types() -> tuple[type, ...]:
    """Every tagged message class (events, commands, provider protocol)."""
    return tuple(_TAGGED)
