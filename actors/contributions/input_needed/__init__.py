"""input_needed (200): the session is input-needed while any chat waits on the user.

Observes the actions that may change a chat's status (STATUS_ACTIONS). Two
views of one fact, both the session's:
1. `InputNeededSet/Removed(chat_id)` (ours): a chat starts or stops waiting
   on the user (its status's input-needed bits).
2. AHP's `inputNeeded` list (session/inputNeededSet and Removed): one entry
   per thing a chat waits on the user for, so a client can answer it from the
   session channel: each of the chat's input requests (kind chatInput, the
   request with its questions), each tool call of its running turn that
   waits for confirmation (kind toolConfirmation, the call with its options)
   and each that waits for authentication (kind toolAuthentication, the call
   with its challenge: the resource a token is wanted for).
   An entry's id is `<chat resource>#<request or tool call id>`; it is set when
   it appears or changes and removed when it goes (answered, or its turn
   ended). Only a chat whose status shows it waiting, before or after the
   action, is looked into: every other action costs one comparison.
"""

from agenthost.actors.contributions.base import Contribution, Dispatch
from agenthost.actors.contributions.services import Sessions
from agenthost.messages.events import (
    InputNeededRemoved,
    InputNeededSet,
    SessionInputNeededRemoved,
    SessionInputNeededSet,
)
from agenthost.messages.reducers import STATUS_ACTIONS
from agenthost.messages.state import (
    ChatState,
    ChatStatus,
    SessionInputKind,
    SessionInputRequest,
    ToolCallPart,
    ToolCallStatus,
)

_INPUT_NEEDED = int(ChatStatus.INPUT_NEEDED)
_ASKS = {
    ToolCallStatus.PENDING_CONFIRMATION: SessionInputKind.TOOL_CONFIRMATION,
    ToolCallStatus.AUTH_REQUIRED: SessionInputKind.TOOL_AUTHENTICATION,
}


def _waits(state: ChatState) -> bool:
    return int(state.status) & _INPUT_NEEDED == _INPUT_NEEDED


def entries(state: ChatState) -> dict[str, SessionInputRequest]:
    """What the chat waits on the user for, as the session's inputNeeded entries."""
    found: dict[str, SessionInputRequest] = {}
    turn_id = state.active_turn_id
    for request in state.input_requests:
        entry_id = f"{state.resource}#{request.id}"
        found[entry_id] = SessionInputRequest(
            kind=SessionInputKind.CHAT_INPUT,
            id=entry_id,
            chat=state.resource,
            turn_id=turn_id,
            request=request,
        )
    if state.active_turn is not None:
        for part in state.active_turn.response_parts:
            if not isinstance(part, ToolCallPart):
                continue
            kind = _ASKS.get(part.tool_call.status)
            if kind is not None:
                entry_id = f"{state.resource}#{part.tool_call.tool_call_id}"
                found[entry_id] = SessionInputRequest(
                    kind=kind,
                    id=entry_id,
                    chat=state.resource,
                    turn_id=turn_id,
                    tool_call=part.tool_call,
                )
    return found


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
        chat_id = dispatch.chat.chat_id
        if chat_id is None or dispatch.rejection is not None:
            return
        waits, waited = _waits(state), _waits(before)
        if not waits and not waited:  # most actions stop here
            return
        session_id = dispatch.chat.session_id
        if waits != waited:
            action = InputNeededSet if waits else InputNeededRemoved
            self._sessions.apply(session_id, action(chat_id=chat_id))
        now, then = entries(state), entries(before)
        for entry_id in then.keys() - now.keys():
            self._sessions.apply(session_id, SessionInputNeededRemoved(id=entry_id))
        for entry_id, entry in now.items():
            if then.get(entry_id) != entry:
                self._sessions.apply(session_id, SessionInputNeededSet(request=entry))
