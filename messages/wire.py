"""JSON conversion for every message and state value (cattrs), used by the
store and the server alike.

Rules:
- field names are camelCase on the wire (`turn_id` -> `turnId`); only this
  module translates;
- a field whose default is None is omitted while it is None;
- every message carries a `type` tag: its AHP action type (`wire_type`)
  where it has one, else its class name, so `from_wire(data)` needs no hint;
- `modified_at` (ms since the epoch inside) is an ISO-8601 string on the wire;
- unknown keys are ignored on the way in (AHP group B round trips).
"""

import datetime
import enum
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from agenthost.messages import commands, events, provider
from agenthost.messages.errors import AgentHostError

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


def _tag(cls: type) -> str:
    return getattr(cls, "wire_type", "") or cls.__name__


converter = cattrs.Converter()


def _field_overrides(cls: type, structuring: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in attrs.fields(cls):
        kwargs: dict[str, Any] = {"rename": camel(field.name)}
        if field.name == "modified_at":
            kwargs["struct_hook" if structuring else "unstruct_hook"] = (
                iso_to_ms if structuring else ms_to_iso
            )
        out[field.name] = override(**kwargs)
    return out


def _make_unstructure(cls: type) -> Callable[[Any], dict[str, Any]]:
    base: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn(
        cls, converter, **_field_overrides(cls, structuring=False)
    )
    omit_none = [camel(f.name) for f in attrs.fields(cls) if f.default is None]
    tag = _tag(cls) if cls in _TAGGED else None

    def unstructure(obj: Any) -> dict[str, Any]:
        data = base(obj)
        for key in omit_none:
            if data.get(key, 0) is None:
                del data[key]
        return data if tag is None else {"type": tag, **data}

    return unstructure


def _make_structure(cls: type) -> Callable[[Mapping[str, Any], Any], Any]:
    return make_dict_structure_fn(cls, converter, **_field_overrides(cls, structuring=True))


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

converter.register_unstructure_hook_factory(attrs.has, _make_unstructure)
converter.register_structure_hook_factory(attrs.has, _make_structure)
converter.register_unstructure_hook_func(
    lambda t: isinstance(t, type) and issubclass(t, enum.Enum), lambda value: value.value
)
converter.register_unstructure_hook(AgentHostError, _make_unstructure(AgentHostError))
converter.register_structure_hook(AgentHostError, _make_structure(AgentHostError))


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
