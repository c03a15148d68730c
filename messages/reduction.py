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
_Layout = tuple[tuple[str, ...], frozenset[str]]
_LAYOUTS: dict[type, _Layout] = {}


def replace(value: T, **changes: Any) -> T:
    """`attrs.evolve` for the streaming path (three per delta): the unchanged
    fields are copied as they are, without attrs' per-call field lookup. A
    change to a field with a validator or converter goes through evolve."""
    cls = type(value)
    layout = _LAYOUTS.get(cls)
    if layout is None:
        fields = attrs.fields(cls)
        names = tuple(f.name for f in fields)
        checked = frozenset(f.name for f in fields if f.validator or f.converter)
        if not all(f.init for f in fields):  # evolve resets those: always take its path
            checked = frozenset(names)
        layout = _LAYOUTS[cls] = (names, checked)
    names, checked = layout
    if not checked.isdisjoint(changes):
        return attrs.evolve(value, **changes)  # type: ignore[misc]  # the plugin wants a class
    copy = object.__new__(cls)
    for name in names:
        object.__setattr__(copy, name, changes[name] if name in changes else getattr(value, name))
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
    return state if state.status == status else attrs.evolve(state, status=status)


def with_active(state: ChatState, turn_id: str, **changes: Any) -> ChatState:
    active = state.active_turn
    if active is None or active.id != turn_id:
        return state
    return replace(state, active_turn=replace(active, **changes))
