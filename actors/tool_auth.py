"""The active turn's authentications: an MCP server's tool call blocked on a
token for a protected resource, and the token a client gives for it.

Plain functions over the tracker's record of the active turn (its thread
only), used by the request desk (actors/requests.py), which holds the
callbacks: an answer to the provider, and actions for the chat.

As AHP 1.1 has it: a running call of an MCP server that the backend refused
(a 401/403 challenge) waits for authentication (chat/toolCallAuthRequired
with the challenge: the resource, its scopes, why); the client pushes a token
for that resource (`authenticate`, routed by the server to the chat as
SupplyToken); the host hands it to the provider and the call runs again
(chat/toolCallAuthResolved). Rules:
1. Only a running call of an MCP server can wait for authentication, one
   challenge at a time: any other request is refused to the provider at once
   and never parked (nobody could see it, so nobody could ever answer it).
2. A waiting authentication is an open request the user can see (the chat is
   input-needed, the session lists it as toolAuthentication): no host-side
   end treats the turn as lost while it waits (DESIGN.md rule 2), and the
   turn's end refuses it to the provider (actors/requests.py `turn_ended`).
3. A token goes to every call of the turn that waits on its resource, and to
   no other; a token for a resource nothing waits on is refused (NOT_FOUND),
   an empty one too (INVALID_ARGUMENT). The host's check is the resource: if
   the backend finds the token wanting, the provider asks again (a new
   challenge: the call waits once more).
4. The token is never logged, stored or shown: it rides only in the
   ProviderAnswer (kept out of its repr); what the chat records is the
   challenge and its resolution.
"""

from collections.abc import Callable
from typing import Any

from agenthost.actors.active_turn import ActiveTurn
from agenthost.messages.commands import SupplyToken
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    ChatEvent,
    RequestClosed,
    RequestOpened,
    RequestOutcome,
    ToolCallAuthRequired,
    ToolCallAuthResolved,
)
from agenthost.messages.provider import HostRequestOpened
from agenthost.messages.state import OpenRequest, RequestKind

AnswerProvider = Callable[..., None]
Apply = Callable[[ChatEvent], None]


def settle_key(resource: str) -> str:
    """The key the chat waits under for a SupplyToken's settling (AnswerSettled):
    apart from every request id."""
    return f"authenticate {resource}"


def refusal(turn: ActiveTurn, event: HostRequestOpened) -> str | None:
    """Why the provider's request for authentication cannot wait (rule 1); None
    when it can."""
    call_id = event.tool_call_id
    if event.auth is None:
        return "An authentication request must carry the challenge (auth)."
    if call_id is None or call_id not in turn.running_mcp_calls:
        return "Only a running tool call of an MCP server can wait for authentication."
    if any(r.tool_call_id == call_id for r in turn.requests.values()):
        return f"The tool call {call_id} already waits on the user."
    return None


def opened(
    turn: ActiveTurn,
    event: HostRequestOpened,
    answer_provider: AnswerProvider,
    apply: Apply,
    log: Any,
) -> None:
    """The provider's call waits for a token: parked, and shown to the user; or
    refused at once (rule 1)."""
    why = refusal(turn, event)
    if why is not None:
        log.warning("auth_request_refused", request_id=event.request_id, reason=why)
        turn.answered.add(event.request_id)
        answer_provider(event.request_id, error=why)
        return
    assert event.auth is not None and event.tool_call_id is not None
    request = OpenRequest(
        request_id=event.request_id,
        kind=RequestKind.AUTHENTICATION,
        turn_id=turn.turn_id,
        tool_call_id=event.tool_call_id,
        tool_name=event.tool_name or turn.tool_calls.get(event.tool_call_id),
        auth=event.auth,
    )
    turn.requests[request.request_id] = request
    apply(
        ToolCallAuthRequired(turn_id=turn.turn_id, tool_call_id=event.tool_call_id, auth=event.auth)
    )
    apply(RequestOpened(request=request))
    log.info(
        "tool_auth_required",
        tool_call_id=event.tool_call_id,
        resource=event.auth.resource.resource,
        reason=str(event.auth.reason),
    )


def waiting_on(turn: ActiveTurn | None, resource: str) -> list[OpenRequest]:
    """The turn's authentications that wait on `resource`, oldest first."""
    if turn is None:
        return []
    return [
        r
        for r in turn.requests.values()
        if r.kind is RequestKind.AUTHENTICATION
        and r.auth is not None
        and r.auth.resource.resource == resource
    ]


def supplied(
    turn: ActiveTurn | None,
    message: SupplyToken,
    answer_provider: AnswerProvider,
    apply: Apply,
    log: Any,
) -> AgentHostError | None:
    """A client's token for `message.resource`: every call waiting on it gets it
    and runs again (rule 3); None when taken, else why it was refused."""
    waiting = waiting_on(turn, message.resource)
    if not waiting:
        return AgentHostError(
            code=ErrorCode.NOT_FOUND,
            message=f"no tool call waits for a token for {message.resource}",
        )
    if not message.token:
        return AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message="the token is empty")
    assert turn is not None
    for request in waiting:
        assert request.tool_call_id is not None
        del turn.requests[request.request_id]
        turn.answered.add(request.request_id)
        answer_provider(request.request_id, token=message.token)
        apply(ToolCallAuthResolved(turn_id=turn.turn_id, tool_call_id=request.tool_call_id))
        apply(
            RequestClosed(
                request_id=request.request_id,
                outcome=RequestOutcome.ANSWERED,
                kind=RequestKind.AUTHENTICATION,
            )
        )
        log.info(
            "tool_auth_resolved",
            tool_call_id=request.tool_call_id,
            resource=message.resource,
            client_id=message.client_id,
        )
    return None
