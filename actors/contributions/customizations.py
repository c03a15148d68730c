"""A session's customizations: the host's contributions, as AHP shows them.

AHP's session state lists `customizations`; here they are the contributions
that run for the session (no provider adapter reports agents, skills or MCP
servers of its own). Pure functions over values, called on the session
actor's thread (and the chats' for `disabled`). Invariants:

1. The contributions are one `plugin`, `agenthost`, always on and loaded;
   its children are `hook`s, one per contribution in the order they run (id
   and name: the contribution's id; description: its `description`). The
   plugin itself is not toggled: its hooks are, one by one.
2. A hook is on unless its session turned it off: its `enablement` is then
   one `session` decision, enabled False. Turned on again it has none, the
   default, as AHP's `customizationToggled {enablement: []}` leaves it
   (`toggled` is the action the host applies and sends).
3. A contribution with `required` cannot be turned off: its hook says why in
   `_meta` (`agenthost.required`), and a toggle of it is refused.
4. The store keeps the hooks that carry a decision (store/columns.py); a session
   loaded again takes each decision by id (`customizations`), so a
   contribution added since starts on and one removed since is forgotten.
5. `disabled` is the set of ids turned off, which picks the session's
   dispatcher (`Dispatcher.without`): resolved when the list changes, never
   per turn.
6. The lists are frozen values, shared: every session that turned the same
   contributions off holds the same tuple, so a thousand sessions cost no
   thousand copies (nor the collector's time walking them).
"""

import threading
import weakref

from agenthost.actors.contributions.base import Contribution
from agenthost.actors.contributions.dispatcher import Dispatcher
from agenthost.messages.customizations import (
    AnyCustomization,
    Customization,
    CustomizationType,
    Enablement,
    EnablementKind,
    LoadState,
    LoadStatus,
    flattened,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.fields import Json
from agenthost.messages.session_events import CustomizationToggled

__all__ = [
    "PLUGIN_ID",
    "REQUIRED_META",
    "customizations",
    "disabled",
    "toggled",
]

PLUGIN_ID = "agenthost"
PLUGIN_URI = "agenthost:contributions"
REQUIRED_META = "agenthost.required"
_OFF = (Enablement(kind=EnablementKind.SESSION, enabled=False),)
_LOCK = threading.Lock()
_Listed = tuple[AnyCustomization, ...]
_LISTS: weakref.WeakKeyDictionary[Dispatcher, dict[frozenset[str], _Listed]] = (
    weakref.WeakKeyDictionary()
)  # by host, by the ids turned off


def _hook(contribution: Contribution, off: bool) -> Customization:
    hook = Customization(
        type=CustomizationType.HOOK,
        id=contribution.id,
        uri=f"{PLUGIN_URI}/{contribution.id}",
        name=contribution.id,
        description=contribution.description or None,
        meta=Json.of({REQUIRED_META: contribution.required}) if contribution.required else None,
    )
    return hook.with_enablement(_OFF if off and not contribution.required else ())


def customizations(
    dispatcher: Dispatcher, stored: tuple[AnyCustomization, ...] | None = None
) -> tuple[AnyCustomization, ...]:
    """The session's customizations: every contribution's hook, with the
    decisions `stored` holds (by id; invariant 4). Sessions that turned the
    same contributions off share one list (invariant 6). Called on any thread."""
    off = frozenset(
        entry.id
        for entry in flattened(stored)
        if entry.enablement and not entry.enablement[0].enabled
    )
    with _LOCK:
        lists = _LISTS.setdefault(dispatcher, {})
        found = lists.get(off)
        if found is None:
            found = lists[off] = _listed(dispatcher, off)
    return found


def _listed(dispatcher: Dispatcher, off: frozenset[str]) -> _Listed:
    plugin = Customization(
        type=CustomizationType.PLUGIN,
        id=PLUGIN_ID,
        uri=PLUGIN_URI,
        name=PLUGIN_ID,
        description="The host's own behaviours for this session's chats.",
        enabled=True,
        load=LoadState(kind=LoadStatus.LOADED),
        children=tuple(_hook(c, c.id in off) for c in dispatcher.contributions),
    )
    return (plugin,)


def disabled(entries: tuple[AnyCustomization, ...] | None) -> frozenset[str]:
    """The ids of the customizations turned off."""
    return frozenset(entry.id for entry in flattened(entries) if entry.enabled is False)


def _refused(message: str, code: ErrorCode = ErrorCode.INVALID_ARGUMENT) -> AgentHostError:
    return AgentHostError(code=code, message=message)


def toggled(
    entries: tuple[AnyCustomization, ...] | None, action: CustomizationToggled
) -> CustomizationToggled:
    """The action the host applies for a client's toggle: `enabled` and
    `enablement` both set, so peers that read either agree (invariant 2).

    Raises:
        AgentHostError: NOT_FOUND for an id the session does not list;
            INVALID_ARGUMENT for the plugin, a required hook, a toggle that
            says neither on nor off, or a decision other than one per session.
    """
    found = {entry.id: entry for entry in flattened(entries)}
    entry = found.get(action.id)
    if entry is None:
        raise _refused(f"this session has no customization {action.id!r}", ErrorCode.NOT_FOUND)
    if entry.children is not None:
        raise _refused(f"{action.id!r} is always on: its hooks are turned on and off one by one")
    required = entry.meta.value if entry.meta is not None else None
    if isinstance(required, dict) and required.get(REQUIRED_META):
        raise _refused(f"{action.id!r} cannot be turned off: {required[REQUIRED_META]}")
    if action.enablement is not None:
        if len(action.enablement) > 1 or any(
            decision.kind != EnablementKind.SESSION for decision in action.enablement
        ):
            raise _refused("this host keeps one decision per session: enablement [{kind: session}]")
        enabled = action.enablement[0].enabled if action.enablement else True
    elif action.enabled is not None:
        enabled = action.enabled
    else:
        raise _refused("a toggle says enabled or enablement")
    return CustomizationToggled(
        session_id=action.session_id,
        id=action.id,
        enabled=enabled,
        enablement=() if enabled else _OFF,
    )
