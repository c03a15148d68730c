"""mark_unread (500): a turn's end marks its session unread (not a local
command's, not a rejected request's, not a subagent's). A session already
unread, as its session last reduced it, is not told again (a turn's end
costs no message to the session then)."""

from agenthost.actors.contributions.base import Contribution, TurnEnd, TurnEndReason
from agenthost.actors.contributions.services import Sessions
from agenthost.messages.events import IsReadChanged


class MarkUnread(Contribution):
    id = "mark_unread"
    order = 500
    description = "Marks the session unread when a turn ends."

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    def on_turn_end(self, end: TurnEnd) -> None:
        if end.subagent or end.reason in (TurnEndReason.LOCAL_COMMAND, TurnEndReason.REJECTED):
            return
        entry = self._sessions.entry(end.chat.session_id)
        if entry is not None and not entry.read:
            return  # unread already
        self._sessions.apply(end.chat.session_id, IsReadChanged(read=False))
