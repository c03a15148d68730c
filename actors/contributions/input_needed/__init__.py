"""input_needed (200): the session is input-needed while any chat waits on the user."""

from agenthost.actors.contributions.base import Contribution, Dispatch
from agenthost.actors.contributions.services import Sessions
from agenthost.messages.events import InputNeededRemoved, InputNeededSet
from agenthost.messages.reducers import STATUS_ACTIONS
from agenthost.messages.state import ChatState, ChatStatus

_INPUT_NEEDED = int(ChatStatus.INPUT_NEEDED)


def _waits(state: ChatState) -> bool:
    return int(state.status) & _INPUT_NEEDED == _INPUT_NEEDED


class InputNeeded(Contribution):
    id = "input_needed"
    order = 200
    observes = STATUS_ACTIONS  # not every streamed delta

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    def on_did_dispatch_action(self, dispatch: Dispatch) -> None:
        state, before = dispatch.state, dispatch.before
        if not isinstance(state, ChatState) or not isinstance(before, ChatState):
            return
        if state.status == before.status:  # most actions (every delta) stop here
            return
        chat_id = dispatch.chat.chat_id
        waits = _waits(state)
        if chat_id is None or dispatch.rejection is not None or waits == _waits(before):
            return
        action = InputNeededSet if waits else InputNeededRemoved
        self._sessions.apply(dispatch.chat.session_id, action(chat_id=chat_id))
