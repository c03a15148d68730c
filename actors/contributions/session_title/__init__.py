"""session_title (400): a session's title comes from its first message until
the user names it; the user's title wins. Renaming the session's default
chat renames the session. Titles are persisted here.
"""

from agenthost.actors.contributions.base import Contribution, Dispatch
from agenthost.actors.contributions.services import Chats, Sessions
from agenthost.messages.events import ChatTitleChanged, SessionTitleChanged, TurnStarted
from agenthost.messages.state import SessionState

MAX_DERIVED = 60


HEAD = 16 * MAX_DERIVED  # what a title is looked for in: a message may be megabytes


def title_from(text: str) -> str:
    """The first line of a message (within its first HEAD characters), shortened
    to a title."""
    lines = text.lstrip()[:HEAD].splitlines()
    line = " ".join(lines[0].split()) if lines else ""
    return line if len(line) <= MAX_DERIVED else line[: MAX_DERIVED - 1].rstrip() + "…"


class SessionTitle(Contribution):
    id = "session_title"
    order = 400
    description = "Titles the session from its first message and keeps titles durable."
    required = "it keeps the titles a user gives durable"
    observes = (TurnStarted, ChatTitleChanged, SessionTitleChanged)

    def __init__(self, sessions: Sessions, chats: Chats) -> None:
        self._sessions = sessions
        self._chats = chats

    def on_did_dispatch_action(self, dispatch: Dispatch) -> None:
        if dispatch.rejection is not None:
            return
        session_id = dispatch.chat.session_id
        match dispatch.action:
            case TurnStarted(message=message) if dispatch.default_chat and not dispatch.subagent:
                if not dispatch.session.title and title_from(message.text):
                    derived = SessionTitleChanged(title=title_from(message.text), by_user=False)
                    self._sessions.apply(session_id, derived)
            case ChatTitleChanged(title=title, by_user=by_user):
                self._chats.save_title(dispatch.chat, title)
                if by_user and dispatch.default_chat:
                    self._sessions.apply(session_id, SessionTitleChanged(title=title))
            case SessionTitleChanged() if isinstance(dispatch.state, SessionState):
                if dispatch.state != dispatch.before:
                    self._sessions.save(session_id, dispatch.state)
