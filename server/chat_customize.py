"""`agenthost chat`'s /customize: the open session's customizations (the
host's contributions, the hooks of its `agenthost` plugin) listed, and one
turned on or off for that session (session/customizationToggled).

Pure functions over the wire's JSON; ChatClient (server/chat_client.py)
keeps the list from the session snapshot and the actions that follow.
"""

from typing import Any

import attrs

REQUIRED_META = "agenthost.required"  # the host's word for why a hook stays on
USAGE = "/customize NAME on|off (/customize lists them)"


@attrs.define
class Hook:
    """One customization as the terminal shows it; `required`: why it stays on."""

    id: str
    description: str
    enabled: bool
    required: str = ""


def hooks_of(customizations: Any) -> list[Hook]:
    """The toggleable entries of a session state's `customizations`: the
    containers' children (and any entry without children)."""
    found = []
    for entry in customizations or ():
        children = entry.get("children")
        for item in children if isinstance(children, list) else [entry]:
            meta = item.get("_meta") if isinstance(item.get("_meta"), dict) else {}
            found.append(
                Hook(
                    id=str(item.get("id", "")),
                    description=str(item.get("description") or ""),
                    enabled=item.get("enabled") is not False,
                    required=str(meta.get(REQUIRED_META) or ""),
                )
            )
    return found


def listed(hooks: list[Hook]) -> list[str]:
    if not hooks:
        return ["[this session has no customizations]"]
    width = max(len(h.id) for h in hooks)
    return [
        f"{'on ' if h.enabled else 'off'}  {h.id:<{width}}  {h.description}"
        + (f" (always on: {h.required})" if h.required else "")
        for h in hooks
    ]


def toggle_action(rest: str, hooks: list[Hook]) -> dict[str, Any] | str:
    """The action `/customize NAME on|off` dispatches, or what is wrong with it."""
    name, _, state = rest.partition(" ")
    state = state.strip().lower()
    if state not in ("on", "off"):
        return USAGE
    known = {h.id: h for h in hooks}
    if name not in known:
        return f"no customization {name!r} in this session (/customize lists them)"
    if known[name].required:
        return f"{name} stays on: {known[name].required}"
    return {"type": "session/customizationToggled", "id": name, "enabled": state == "on"}


def toggled(hooks: list[Hook], action: dict[str, Any]) -> str | None:
    """A customizationToggled the session was sent, applied to `hooks`: the line
    that says so (None: not one of them)."""
    enablement = action.get("enablement")
    if isinstance(enablement, list):
        enabled = enablement[0].get("enabled") is not False if enablement else True
    else:
        enabled = action.get("enabled") is not False
    for hook in hooks:
        if hook.id == action.get("id"):
            hook.enabled = enabled
            return f"[customization] {hook.id} {'on' if enabled else 'off'}"
    return None
