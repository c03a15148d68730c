"""How a turn's parts and a message's origin become columns, and back.

Plain functions the SQL stores share (store/sql.py). Invariants:
1. A turn's response parts are kept only where they say more than its text:
   a turn whose parts are its text alone (one markdown part, named as the live
   turn names its first: `<turn>-md1`) keeps NULL, and comes back so.
2. An origin's kind is kept as its wire value; NULL is `user`.
3. A session's customizations are kept only where a decision was made: the
   ones with an `enablement`, flattened out of their containers, as AHP
   Customization[] JSON (NULL: none). The host lists the rest again from what
   it runs, and takes each decision back by id.
"""

import json

from agenthost.messages.customizations import AnyCustomization, Customization, flattened
from agenthost.messages.state import (
    MarkdownPart,
    MessageOrigin,
    OriginKind,
    ResponsePart,
    markdown_part_id,
)
from agenthost.messages.wire import from_wire, to_wire

_USER = MessageOrigin()
_ORIGINS = {kind.value: MessageOrigin(kind=kind) for kind in OriginKind}


def text_parts(turn_id: str, text: str) -> tuple[ResponsePart, ...]:
    """A turn's parts when they are its text alone."""
    return (MarkdownPart(id=markdown_part_id(turn_id), content=text),) if text else ()


def parts_column(turn_id: str, text: str, parts: tuple[ResponsePart, ...] | None) -> str | None:
    """A turn's response parts as stored (None: the parts are its text alone)."""
    if parts is None or parts == text_parts(turn_id, text):
        return None
    return json.dumps(to_wire(parts))


def parts_of(turn_id: str, text: str, column: str | None) -> tuple[ResponsePart, ...]:
    """A stored turn's response parts."""
    if column is None:
        return text_parts(turn_id, text)
    return from_wire(json.loads(column), tuple[ResponsePart, ...])


def origin_column(origin: MessageOrigin) -> str | None:
    return None if origin.kind == OriginKind.USER else str(origin.kind)


def origin_of(column: str | None) -> MessageOrigin:
    if column is None:
        return _USER
    return _ORIGINS.get(column) or MessageOrigin(kind=OriginKind(column))


def customizations_column(entries: tuple[AnyCustomization, ...] | None) -> str | None:
    """A session's customizations as stored (invariant 3)."""
    decided = [entry for entry in flattened(entries) if entry.enablement]
    return json.dumps(to_wire(tuple(decided))) if decided else None


def customizations_of(column: str | None) -> tuple[Customization, ...] | None:
    if column is None:
        return None
    return from_wire(json.loads(column), tuple[Customization, ...])
