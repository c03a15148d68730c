"""session_flags (700): the session's read and archived flags, config values
and customizations' enablement, and a chat's IsRead and IsArchived status
flags, are persisted when an action changes them (never a rejected one): a
client's, or the host's own (a turn start, a resume and an input request
clear a chat's IsRead), so a chat restored after a restart has the flags it
had."""

from agenthost.actors.contributions.base import Contribution, Dispatch
from agenthost.actors.contributions.services import Chats, Sessions
from agenthost.messages.events import (
    ChatIsArchivedChanged,
    ChatIsReadChanged,
    ConfigChanged,
    CustomizationToggled,
    InputRequested,
    IsArchivedChanged,
    IsReadChanged,
    TurnResumed,
    TurnStarted,
)
from agenthost.messages.state import ChatState, ChatStatus, SessionState

_FLAGS = int(ChatStatus.IS_READ | ChatStatus.IS_ARCHIVED)


class SessionFlags(Contribution):
    id = "session_flags"
    order = 700
    description = "Keeps the session's flags, config and customizations durable."
    required = "it keeps the session's flags, config and customizations durable"
    observes = (
        IsReadChanged,
        IsArchivedChanged,
        ConfigChanged,
        CustomizationToggled,
        # what changes a chat's flags (messages/reducers.py, invariant 6)
        ChatIsReadChanged,
        ChatIsArchivedChanged,
        TurnStarted,
        TurnResumed,
        InputRequested,
    )

    def __init__(self, sessions: Sessions, chats: Chats) -> None:
        self._sessions = sessions
        self._chats = chats

    def on_did_dispatch_action(self, dispatch: Dispatch) -> None:
        if dispatch.rejection is not None or dispatch.state is dispatch.before:
            return
        match dispatch.state, dispatch.before:
            case SessionState() as state, _:
                if state != dispatch.before:
                    self._sessions.save(dispatch.chat.session_id, state)
            case ChatState(status=status), ChatState(status=before):
                if int(status) & _FLAGS != int(before) & _FLAGS:
                    read = bool(status & ChatStatus.IS_READ)
                    archived = bool(status & ChatStatus.IS_ARCHIVED)
                    self._chats.save_flags(dispatch.chat, read=read, archived=archived)
