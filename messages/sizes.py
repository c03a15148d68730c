"""What a message weighs in bytes, estimated cheaply: for limits in bytes.

Pure functions over message values (no I/O, nothing of ours beyond messages/).

Invariants:
1. `utf8_bytes(text)` is exact: the length of `text` encoded as UTF-8, without
   encoding it when the text is ASCII (CPython knows that in O(1)).
2. `event_bytes(event)` bounds what an event holds that is its own: its
   strings (a delta's text, a started turn's message and attachments, a tool
   call's arguments), one character a byte, plus a fixed overhead for the
   objects. A chat snapshot weighs only the overhead: its state is the chat's
   own, shared, not a copy. A delta, most of a stream, is weighed without a walk.
3. `value_bytes(value)` weighs any value's strings alike (a fetched turn).
"""

from collections.abc import Callable
from typing import Any

import attrs

from agenthost.messages.events import AssistantDelta, ChatSnapshot, ReasoningDelta

EVENT_OVERHEAD = 200
"""Bytes an event costs beyond its strings (the objects, a queue slot)."""
_DEPTH = 4  # how deep the walk looks into an event's values (parts, messages, tool calls)


def utf8_bytes(text: str) -> int:
    """The exact UTF-8 length of `text`."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def event_bytes(event: object) -> int:
    """An estimate of the bytes `event` holds (see the module docstring)."""
    kind = type(event)
    if kind is AssistantDelta:
        return EVENT_OVERHEAD + len(event.text)  # type: ignore[attr-defined]
    weigh = _WEIGHTS.get(kind)
    if weigh is None:
        weigh = _WEIGHTS[kind] = _walker(kind)
    return EVENT_OVERHEAD + weigh(event)


def value_bytes(value: object) -> int:
    """An estimate of the bytes a value (a turn, a message) holds in its strings."""
    return _strings(value, _DEPTH + 2)


def _walker(kind: type) -> Callable[[Any], int]:
    if kind is ChatSnapshot:
        return lambda event: 0
    if kind is ReasoningDelta:
        return lambda event: len(event.content)
    return lambda event: _strings(event, _DEPTH)


def _strings(value: Any, depth: int) -> int:
    """The characters of the strings in `value`, `depth` levels of values down."""
    if isinstance(value, str):
        return len(value)
    if depth == 0:
        return 0
    if isinstance(value, tuple):
        return sum(_strings(item, depth - 1) for item in value)
    if attrs.has(type(value)):
        return sum(
            _strings(getattr(value, field.name), depth - 1) for field in attrs.fields(type(value))
        )
    return 0


_WEIGHTS: dict[type, Callable[[Any], int]] = {}
