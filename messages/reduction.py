"""The chat reducer's table and what its handlers share (reducers.py and
tool_reducer.py register into it; reducers.py's module docstring lists the
invariants). Pure functions over frozen values, like every reducer here."""

from collections.abc import Callable
from typing import Any, TypeVar

import attrs
from attrs import AttrsInstance

from agenthost.messages.events import ChatEvent
from agenthost.messages.state import ChatState, ChatStatus, ToolCallPart, with_activity

ChatReducer = Callable[[ChatState, Any, int], ChatState]
CHAT_REDUCERS: dict[type, ChatReducer] = {}


def handles(action_type: type) -> Callable[[ChatReducer], ChatReducer]:
    def register(fn: ChatReducer) -> ChatReducer:
        CHAT_REDUCERS[action_type] = fn
        return fn

    return register


def reduce_chat(state: ChatState, action: ChatEvent, now_ms: int = 0) -> ChatState:
    """Apply one chat action. Unknown actions leave the state as it is."""
    reducer = CHAT_REDUCERS.get(type(action))
    return state if reducer is None else reducer(state, action, now_ms)


T = TypeVar("T", bound=AttrsInstance)


@attrs.frozen
class _Layout:
    names: tuple[str, ...]
    checked: dict[str, "attrs.Attribute[Any]"]  # fields with a converter or a validator
    plain: bool  # every field is set by __init__: a copy is a faithful evolve


_LAYOUTS: dict[type, _Layout] = {}


def _layout(cls: type) -> _Layout:
    layout = _LAYOUTS.get(cls)
    if layout is None:
        fields = attrs.fields(cls)
        layout = _LAYOUTS[cls] = _Layout(
            names=tuple(f.name for f in fields),
            checked={f.name: f for f in fields if f.validator or f.converter},
            plain=all(f.init for f in fields),
        )
    return layout


def replace(value: T, **changes: Any) -> T:
    """`attrs.evolve`, fast (it ran several times a turn): the unchanged fields
    are copied as they are, without attrs' per-call field lookup; a changed
    field's converter and validator run as evolve would run them."""
    cls = type(value)
    layout = _layout(cls)
    if not layout.plain:  # evolve resets fields __init__ does not take: its path
        return attrs.evolve(value, **changes)  # type: ignore[misc]  # the plugin wants a class
    copy = object.__new__(cls)
    for name in layout.names:
        object.__setattr__(copy, name, changes[name] if name in changes else getattr(value, name))
    for name in changes.keys() & layout.checked.keys():
        field = layout.checked[name]
        if field.converter is not None:
            object.__setattr__(copy, name, field.converter(changes[name]))  # type: ignore[operator]
        if field.validator is not None:
            field.validator(copy, field, getattr(copy, name))
    return copy


# -- status ----------------------------------------------------------------------


def _waits_for_user(state: ChatState) -> bool:
    if state.input_requests or state.open_requests:
        return True
    active = state.active_turn
    return active is not None and any(
        isinstance(p, ToolCallPart) and p.tool_call.status.waits_for_user
        for p in active.response_parts
    )


def derived_status(state: ChatState, *, failed: bool = False) -> ChatStatus:
    """The activity bits from the chat's work (invariant 6); the flags kept."""
    if failed:
        activity = ChatStatus.ERROR
    elif _waits_for_user(state):
        activity = ChatStatus.INPUT_NEEDED
    elif state.active_turn is not None:
        activity = ChatStatus.IN_PROGRESS
    else:
        activity = ChatStatus.IDLE
    return with_activity(state.status, activity)


def with_status(state: ChatState, *, unread: bool = False) -> ChatState:
    status = derived_status(state)
    if unread:
        status = with_activity(status, status, read=False)
    return state if state.status == status else replace(state, status=status)


def with_active(state: ChatState, turn_id: str, **changes: Any) -> ChatState:
    active = state.active_turn
    if active is None or active.id != turn_id:
        return state
    return replace(state, active_turn=replace(active, **changes))
