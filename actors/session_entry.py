"""What a client's change to a session entry is, as session actions: pure
functions the SessionActor calls on its thread (it reduces the actions and
tells the contributions; a toggle's checks are
actors/contributions/customizations.py's `toggled`)."""

from agenthost.messages.commands import SetSessionFlags
from agenthost.messages.events import (
    ConfigChanged,
    IsArchivedChanged,
    IsReadChanged,
    SessionEvent,
    SessionTitleChanged,
)

MAX_TITLE = 200


def flag_actions(message: SetSessionFlags) -> list[tuple[SessionEvent, str]]:
    """Each field given is one session action, with why it is refused ("": it is not)."""
    actions: list[tuple[SessionEvent, str]] = []
    if message.title is not None:
        title = " ".join(message.title.split())
        bad = not title or len(title) > MAX_TITLE
        reason = f"A title is 1 to {MAX_TITLE} characters." if bad else ""
        actions.append((SessionTitleChanged(title=title), reason))
    if message.read is not None:
        actions.append((IsReadChanged(read=message.read), ""))
    if message.archived is not None:
        actions.append((IsArchivedChanged(archived=message.archived), ""))
    if message.config is not None:
        bad = any(not key for key, _ in message.config)
        actions.append((ConfigChanged(config=message.config), "empty config key" if bad else ""))
    return actions
