"""turn_admission (100): no turns in an archived session or a read-only chat."""

from agenthost.actors.contributions.base import (
    ACCEPT,
    Contribution,
    IncomingRequest,
    Reject,
    Verdict,
)
from agenthost.messages.errors import AgentHostError, ErrorCode

ARCHIVED = (
    "This session is archived and read-only. Restore the session to continue the conversation."
)
READ_ONLY = "This chat is read-only."


class TurnAdmission(Contribution):
    id = "turn_admission"
    order = 100
    description = "Starts no turn in an archived session or a read-only chat."
    required = "it enforces archived sessions and read-only chats"

    def on_incoming_request(self, request: IncomingRequest) -> Verdict:
        if request.session.archived:
            return Reject(error=AgentHostError(code=ErrorCode.READ_ONLY, message=ARCHIVED))
        if request.read_only:
            return Reject(error=AgentHostError(code=ErrorCode.READ_ONLY, message=READ_ONLY))
        return ACCEPT
