"""The chat reducer's table and what its handlers share (reducers.py and
tool_reducer.py register into it; reducers.py's module docstring lists the
invariants). Pure functions over frozen values, like every reducer here."""

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import attrs
from attrs import AttrsInstance

from agenthost.messages.events import ChatEvent
from agenthost.messages.state import ActiveTurn, ChatState, ChatStatus, ToolCallPart, with_activity

ChatReducer = Callable[[ChatState, Any, int], ChatState]
CHAT_REDUCERS: dict[type, ChatReducer] = {}
ActiveReducer = Callable[[ActiveTurn, Any], ActiveTurn]
ACTIVE_REDUCERS: dict[type, ActiveReducer] = {}
"""The actions that change only the active turn they name (its parts, its
usage): reduced on the active turn alone, so a run of them costs one copy of
the chat's state (`reduce_active_run`)."""


def handles(action_type: type) -> Callable[[ChatReducer], ChatReducer]:
    def register(fn: ChatReducer) -> ChatReducer:
        CHAT_REDUCERS[action_type] = fn
        return fn

    return register


def handles_active(action_type: type) -> Callable[[ActiveReducer], ActiveReducer]:
    """Register a reducer of the active turn: the action's chat reducer applies
    it to the active turn the action names (any other leaves the state as it is)."""

    def register(fn: ActiveReducer) -> ActiveReducer:
        def on_chat(state: ChatState, action: Any, now_ms: int) -> ChatState:
            active = state.active_turn
            if active is None or active.id != action.turn_id:
                return state
            changed = fn(active, action)
            return state if changed is active else replace(state, active_turn=changed)

        ACTIVE_REDUCERS[action_type] = fn
        CHAT_REDUCERS[action_type] = on_chat
        return fn

    return register


def reduce_active_run(state: ChatState, actions: Iterable[Any]) -> ChatState:
    """Reduce actions of the types in ACTIVE_REDUCERS, in order, with one copy of
    the state: the state reducing them one by one gives."""
    active = state.active_turn
    if active is None:
        return state
    changed = active
    for action in actions:
        if action.turn_id == changed.id:
            changed = ACTIVE_REDUCERS[type(action)](changed, action)
    return state if changed is active else replace(state, active_turn=changed)


def reduce_chat(state: ChatState, action: ChatEvent, now_ms: int = 0) -> ChatState:
    """Apply one chat action. Unknown actions leave the state as it is."""
    reducer = CHAT_REDUCERS.get(type(action))
    return state if reducer is None else reducer(state, action, now_ms)


T = TypeVar("T", bound=AttrsInstance)


@attrs.frozen
class _Layout:
    copy: Callable[[Any, dict[str, Any]], Any] | None  # None: evolve's path
    checked: dict[str, "attrs.Attribute[Any]"]  # fields with a converter or a validator


_LAYOUTS: dict[type, _Layout] = {}


def _copier(cls: type) -> Callable[[Any, dict[str, Any]], Any] | None:
    """A function made for `cls` that copies an instance with some fields changed,
    setting each slot through its descriptor (a third of the cost of a generic
    loop over the fields). None where a copy would not be a faithful evolve: a
    class without slots, or with a field __init__ does not take that is not a
    constant (a part's `kind`: evolve sets it to its default, which the copy keeps)."""
    fields = attrs.fields(cls)
    if not all(f.init or _constant(f) for f in fields) or "__slots__" not in vars(cls):
        return None
    names = [f.name for f in fields]
    setters: dict[str, Callable[[Any, Any], None]] = {}
    env: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_set": setters}
    lines = ["def copy(value, changes):", "    new = _new(_cls)"]
    for index, name in enumerate(names):
        slot = next((vars(k)[name] for k in cls.__mro__ if name in vars(k)), None)
        if slot is None or not hasattr(slot, "__set__"):
            return None  # a field not kept in a slot
        env[f"_s{index}"] = slot.__set__
        if fields[index].init:  # (evolve takes no change to a field __init__ does not take)
            setters[name] = slot.__set__
        lines.append(f"    _s{index}(new, value.{name})")
    # Every slot copied straight, then the few changed ones set again: cheaper than
    # looking each field up in `changes` (a copy changes one to three fields).
    lines.append("    for name, v in changes.items():")
    lines.append("        _set[name](new, v)")
    lines.append("    return new")
    exec("\n".join(lines), env)
    copy: Callable[[Any, dict[str, Any]], Any] = env["copy"]
    return copy


_FACTORY: type = type(attrs.Factory(list))  # attrs types Factory as a function


def _constant(field: "attrs.Attribute[Any]") -> bool:
    """A field __init__ does not take, with a plain default: every instance holds it."""
    default = field.default
    return not field.init and default is not attrs.NOTHING and not isinstance(default, _FACTORY)


def _layout(cls: type) -> _Layout:
    layout = _LAYOUTS.get(cls)
    if layout is None:
        layout = _LAYOUTS[cls] = _Layout(
            copy=_copier(cls),
            checked={f.name: f for f in attrs.fields(cls) if f.validator or f.converter},
        )
    return layout


def replace(value: T, **changes: Any) -> T:
    """`attrs.evolve`, fast (it runs several times a turn): the unchanged fields are
    copied as they are, by a copier made once per class; a changed field's
    converter and validator run as evolve would run them."""
    layout = _LAYOUTS.get(type(value)) or _layout(type(value))
    if layout.copy is None:
        return attrs.evolve(value, **changes)  # type: ignore[misc]  # the plugin wants a class
    copy: T = layout.copy(value, changes)
    checked = layout.checked
    if checked:
        for name in changes:
            field = checked.get(name)
            if field is None:
                continue
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
    if active is None:
        return False
    for part in active.response_parts:  # (a loop, not any(): it runs for every turn's start)
        if isinstance(part, ToolCallPart) and part.tool_call.status.waits_for_user:
            return True
    return False


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


def settle_status(fresh: ChatState, *, failed: bool = False, unread: bool = False) -> ChatState:
    """`with_status` for a state this reducer call just made (no other reference to
    it exists yet): the status is set in it, saving a copy of the whole state."""
    status = derived_status(fresh, failed=failed)
    if unread:
        status = with_activity(status, status, read=False)
    if status != fresh.status:
        object.__setattr__(fresh, "status", status)
    return fresh


def with_active(state: ChatState, turn_id: str, **changes: Any) -> ChatState:
    active = state.active_turn
    if active is None or active.id != turn_id:
        return state
    return replace(state, active_turn=replace(active, **changes))
