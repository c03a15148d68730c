"""Field markers that messages/wire.py reads, and the opaque JSON value.

A marker is attrs metadata, so the value types stay plain attrs classes:
- `wire_name(...)`: the field's AHP name is not the camelCase of its Python
  name (`meta` is `_meta`, `text` is `content`);
- `extension(...)`: a field of ours that AHP does not define, or an optional
  AHP field whose default means "absent": omitted while it equals its default;
- `iso_time(...)`: milliseconds since the epoch inside, ISO-8601 on the wire.
"""

import json
from typing import Any

import attrs

WIRE_NAME = "agenthost.wire_name"
OMIT_DEFAULT = "agenthost.omit_default"
ISO_TIME = "agenthost.iso_time"


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


def _is_json_text(instance: object, attribute: object, value: str) -> None:
    json.loads(value)


@attrs.frozen
class Json:
    """A JSON value AHP defines but agenthost does not interpret (`_meta`, tool
    result content, config schemas, capabilities). Held as compact text so it
    stays immutable; on the wire it is the JSON value itself."""

    text: str = attrs.field(validator=_is_json_text)

    @classmethod
    def of(cls, value: object) -> "Json":
        return cls(json.dumps(value, separators=(",", ":"), ensure_ascii=False))

    @property
    def value(self) -> object:
        return json.loads(self.text)
