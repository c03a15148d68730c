"""session_flags (700): the session's read and archived flags, config values
and customizations' enablement are persisted when an action changes them
(never a rejected one)."""

from agenthost.actors.contributions.base import Contribution, Dispatch
from agenthost.actors.contributions.services import Sessions
from agenthost.messages.events import (
    ConfigChanged,
    CustomizationToggled,
    IsArchivedChanged,
    IsReadChanged,
)
from agenthost.messages.state import SessionState


class SessionFlags(Contribution):
    id = "session_flags"
    order = 700
    description = "Keeps the session's flags, config and customizations durable."
    required = "it keeps the session's flags, config and customizations durable"
    observes = (IsReadChanged, IsArchivedChanged, ConfigChanged, CustomizationToggled)

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    def on_did_dispatch_action(self, dispatch: Dispatch) -> None:
        if dispatch.rejection is not None or dispatch.state == dispatch.before:
            return
        assert isinstance(dispatch.state, SessionState)
        self._sessions.save(dispatch.chat.session_id, dispatch.state)
