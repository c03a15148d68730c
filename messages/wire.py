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
  on the wire;
- a few values have an AHP shape that is not their fields one to one (a
  pending message set is flat, a tool result is nested); `_ADAPTERS` reshapes
  them on the way out and back;
- unions of response parts and source locations are told apart by `kind`;
- unknown keys are ignored on the way in (AHP group B round trips); unknown
  enum values are kept (see OpenStrEnum); an unknown action type is an
  `UnknownAction` for `action_from_wire`, and an error for `from_wire`.
"""

import datetime
import enum
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from agenthost.messages import commands, events, protocol, provider, state
from agenthost.messages.errors import AgentHostError
from agenthost.messages.fields import ISO_TIME, OMIT_DEFAULT, WIRE_NAME, Json

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


def _make_unstructure(cls: type) -> Callable[[Any], dict[str, Any]]:
    base: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn(
        cls,
        converter,
        _cattrs_include_init_false=True,  # a part's fixed `kind`
        **_field_overrides(cls, structuring=False),
    )
    omit = _defaults_to_omit(cls)
    tag = _tag(cls) if cls in _TAGGED else None
    adapt = _ADAPTERS.get(cls, (None, None))[0]

    def unstructure(obj: Any) -> dict[str, Any]:
        data = base(obj)
        for key, default in omit:
            if key in data and data[key] == default:
                del data[key]
        if adapt is not None:
            data = adapt(data)
        return data if tag is None else {"type": tag, **data}

    return unstructure


def _make_structure(cls: type) -> Callable[[Mapping[str, Any], Any], Any]:
    base: Callable[[Mapping[str, Any], Any], Any] = make_dict_structure_fn(
        cls, converter, **_field_overrides(cls, structuring=True)
    )
    adapt = _ADAPTERS.get(cls, (None, None))[1]
    if adapt is None:
        return base

    def structure(data: Mapping[str, Any], cls: Any) -> Any:
        return base(adapt(data), cls)

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
    keys = ("id", "kind", "message")
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
    if (
        "inputNeededChats" not in out
        and isinstance(legacy, list)
        and all(isinstance(item, str) for item in legacy)
    ):
        out["inputNeededChats"] = legacy
    return out


_CHAT_CHANGES = ("title", "status", "modifiedAt")


def _chat_updated_out(data: dict[str, Any]) -> dict[str, Any]:
    changes = {key: data.pop(key) for key in _CHAT_CHANGES if key in data}
    return {**data, "changes": changes}


def _chat_updated_in(data: Mapping[str, Any]) -> Mapping[str, Any]:
    changes = data.get("changes")
    if not isinstance(changes, Mapping):
        return data
    return {**{k: v for k, v in data.items() if k != "changes"}, **changes}


_ADAPTERS: dict[type, tuple[Callable[..., Any] | None, Callable[..., Any] | None]] = {
    state.ChatState: (_chat_state_out, _chat_state_in),
    events.PendingMessageAdded: (_pending_set_out, _pending_set_in),
    events.ToolCallCompleted: (_tool_complete_out, _tool_complete_in),
    state.Usage: (None, _usage_in),
    state.SessionState: (_session_state_out, _session_state_in),
    events.ChatUpdated: (_chat_updated_out, _chat_updated_in),
}


# -- tags, unions and leaf values -------------------------------------------------

_MESSAGE_MODULES = (events, provider, commands)  # state values carry no tag
_TAGGED: dict[type, str] = {
    value: _tag(value)
    for module in _MESSAGE_MODULES
    for value in vars(module).values()
    if isinstance(value, type)
    and attrs.has(value)
    and value.__module__ == module.__name__
    and value not in (events.ChatEvent, events.SessionEvent)  # the bases, never sent
}
_BY_TAG: dict[str, type] = {tag: cls for cls, tag in _TAGGED.items()}


def _kind_of(cls: type) -> str:
    return str(attrs.fields_dict(cls)["kind"].default)


_KIND_UNIONS: list[dict[str, type]] = [
    {_kind_of(c): c for c in typing.get_args(union)}
    for union in (state.ResponsePart, state.SourceLocation)
]


def _kind_family(t: Any) -> dict[str, type] | None:
    if typing.get_origin(t) not in (typing.Union, types.UnionType):
        return None
    members = {a for a in typing.get_args(t) if a is not type(None)}
    for family in _KIND_UNIONS:
        if members == set(family.values()):
            return family
    return None


def _structure_by_kind(data: Any, t: Any) -> Any:
    if data is None and type(None) in typing.get_args(t):
        return None
    family = _kind_family(t) or {}
    kind = data.get("kind") if isinstance(data, Mapping) else None
    if kind not in family:
        raise ValueError(f"unknown kind {kind!r} (known: {sorted(family)})")
    return converter.structure(data, family[kind])


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


converter.register_unstructure_hook_factory(attrs.has, _make_unstructure)
converter.register_structure_hook_factory(attrs.has, _make_structure)
converter.register_unstructure_hook_func(
    lambda t: isinstance(t, type) and issubclass(t, enum.Enum), lambda value: value.value
)
converter.register_unstructure_hook(Json, lambda value: value.value)
converter.register_structure_hook(Json, _structure_json)
converter.register_structure_hook_func(lambda t: _kind_family(t) is not None, _structure_by_kind)
converter.register_structure_hook_func(_is_scalar_union, _structure_scalar)
converter.register_unstructure_hook(AgentHostError, _make_unstructure(AgentHostError))
converter.register_structure_hook(AgentHostError, _make_structure(AgentHostError))


# -- protocol frames and unions -----------------------------------------------------


def action_from_wire(data: Any) -> protocol.StateAction:
    """A chat or session action by its `type`; a type this host does not know
    is an UnknownAction, which every reducer ignores.

    Raises:
        AgentHostError: INVALID_ARGUMENT when the data does not fit.
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
    if not issubclass(cls, (events.ChatEvent, events.SessionEvent)):
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


def _structure_reconnect_result(data: Any, _type: object) -> Any:
    kind = data.get("type") if isinstance(data, Mapping) else None
    classes = {"replay": protocol.ReconnectReplay, "snapshot": protocol.ReconnectSnapshot}
    if kind not in classes:
        raise ValueError(f"unknown reconnect result type {kind!r}")
    return converter.structure(data, classes[kind])


def _structure_snapshot(data: Any, _type: object) -> protocol.Snapshot:
    resource = data["resource"]
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
    lambda t: t == protocol.ReconnectResult, _structure_reconnect_result
)
converter.register_structure_hook(protocol.Snapshot, _structure_snapshot)


def to_wire(obj: Any) -> Any:
    """A JSON-safe value for a message or state value (dicts, lists, str, int, bool)."""
    return converter.unstructure(obj)


def from_wire(data: Any, cls: type[T] | None = None) -> T:
    """Decode `data` as `cls`, or, without one, by the `type` tag it carries.

    Raises:
        AgentHostError: INVALID_ARGUMENT when the data does not fit.
    """
    from agenthost.messages.errors import ErrorCode

    try:
        if cls is None:
            tag = data.get("type") if isinstance(data, Mapping) else None
            if tag not in _BY_TAG:
                raise AgentHostError(
                    code=ErrorCode.INVALID_ARGUMENT, message=f"unknown message type {tag!r}"
                )
            cls = _BY_TAG[tag]
        return converter.structure(data, cls)
    except (cattrs.BaseValidationError, KeyError, TypeError, ValueError) as exc:
        raise AgentHostError(
            code=ErrorCode.INVALID_ARGUMENT,
            message=f"cannot decode {getattr(cls, '__name__', cls)}: {exc}",
        ) from exc


def message_types() -> tuple[type, ...]:
    """Every tagged message class (events, commands, provider protocol)."""
    return tuple(_TAGGED)
