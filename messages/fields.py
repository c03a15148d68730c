"""Field markers that messages/wire.py reads, and the opaque JSON value.

A marker is attrs metadata, so the value types stay plain attrs classes:
- `wire_name(...)`: the field's AHP name is not the camelCase of its Python
  name (`meta` is `_meta`, `text` is `content`);
- `extension(...)`: a field of ours that AHP does not define, or an optional
  AHP field whose default means "absent": omitted while it equals its default;
- `iso_time(...)`: milliseconds since the epoch inside, ISO-8601 on the wire;
- `as_object(...)`: key/value pairs inside (a tuple, so the value stays
  immutable), a JSON object on the wire;
- `implicit(value)`: defaults to `value` itself, which stays off the wire; an
  equal value a peer sent is another object and is sent back (AHP keeps
  "absent" and "present with its default" apart).
"""

import json
from typing import Any, TypeVar

import attrs

WIRE_NAME = "agenthost.wire_name"
OMIT_DEFAULT = "agenthost.omit_default"
ISO_TIME = "agenthost.iso_time"
AS_OBJECT = "agenthost.as_object"
IMPLICIT = "agenthost.implicit"
K = TypeVar("K")
V = TypeVar("V")


def extension(**kwargs: Any) -> Any:
    """A field omitted on the wire while it equals its default."""
    return attrs.field(metadata={OMIT_DEFAULT: True}, **kwargs)


def wire_name(name: str, **kwargs: Any) -> Any:
    """A field whose wire name is `name`."""
    metadata = {WIRE_NAME: name, **kwargs.pop("metadata", {})}
    return attrs.field(metadata=metadata, **kwargs)


def iso_time(**kwargs: Any) -> Any:
    """Milliseconds since the epoch, an ISO-8601 string on the wire."""
    return attrs.field(metadata={ISO_TIME: True}, **kwargs)


def as_object(**kwargs: Any) -> Any:
    """Key/value pairs, a JSON object on the wire."""
    metadata = {AS_OBJECT: True, **kwargs.pop("metadata", {})}
    return attrs.field(metadata=metadata, **kwargs)


def implicit(value: Any, **kwargs: Any) -> Any:
    """A field defaulting to `value` (that very object), left off the wire while it is it."""
    return attrs.field(factory=lambda: value, metadata={IMPLICIT: value}, **kwargs)


def is_json_text(instance: object, attribute: object, value: str) -> None:
    """An attrs validator: `value` is JSON text."""
    json.loads(value)


def unique_pairs(pairs: tuple[tuple[K, V], ...]) -> tuple[tuple[K, V], ...]:
    """Key/value pairs as a mapping has them: one per key (the last given wins),
    in first-seen order."""
    return tuple(dict(pairs).items())


@attrs.frozen
class Json:
    """A JSON value AHP defines but agenthost does not interpret (`_meta`, tool
    result content, config schemas, capabilities). Held as compact text so it
    stays immutable; on the wire it is the JSON value itself."""

    text: str = attrs.field(validator=is_json_text)

    @classmethod
    def of(cls, value: object) -> "Json":
        return cls(json.dumps(value, separators=(",", ":"), ensure_ascii=False))

    @property
    def value(self) -> object:
        return json.loads(self.text)
