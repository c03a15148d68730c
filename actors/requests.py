"""The active turn's requests to the host: permissions, questions, client tools.

A plain object the turn tracker holds (its thread only). It keeps who
executes which client tool, parks requests on the active turn's record,
checks answers, and says what to send through the two callbacks it is
given: an answer to the provider, and actions for the chat.

Rules: a client tool's result may arrive before its request (the early
result wins); a call to a tool no client provides is answered with an error
at once, never parked (nobody could ever answer it); removing a client fails
every call it left parked (DESIGN.md rule 6); a request for a turn that is
no longer active is denied, not dropped.
"""

from collections.abc import Callable
from typing import Any

import attrs

from agenthost.actors.active_turn import ActiveTurn
from agenthost.messages.commands import AnswerRequest
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    ChatEvent,
    RequestClosed,
    RequestOpened,
    RequestOutcome,
    ToolCallConfirmed,
    ToolCallReady,
)
from agenthost.messages.provider import HostRequestOpened
from agenthost.messages.state import OpenRequest, RequestKind

AnswerProvider = Callable[..., None]
"""`answer(request_id, approved=, answer=, result=, error=)`: a ProviderAnswer."""
Apply = Callable[[ChatEvent], None]
"""An action for the chat (the tracker stamps and queues it)."""


class RequestDesk:
    def __init__(
        self,
        owners: dict[str, str],
        answer_provider: AnswerProvider,
        apply: Apply,
        log: Any,
    ) -> None:
        self.owners = owners  # tool name -> the client that executes it
        self._answer_provider = answer_provider
        self._apply = apply
        self._log = log

    def opened(self, turn: ActiveTurn, event: HostRequestOpened) -> None:
        """The provider asks the host (for the active turn)."""
        kind = RequestKind(event.kind.value)
        request = OpenRequest(
            request_id=event.request_id,
            kind=kind,
            turn_id=turn.turn_id,
            tool_call_id=event.tool_call_id,
            tool_name=event.tool_name,
            question=event.question,
            arguments=event.arguments,
        )
        if kind is RequestKind.CLIENT_TOOL:
            early = turn.early.pop(event.request_id, None)
            if early is not None:  # the result arrived before its handler: it wins
                turn.answered.add(event.request_id)
                self._answer_provider(event.request_id, result=early.result)
                return
            owner = self.owners.get(event.tool_name or "")
            if owner is None:  # never parked: nobody could ever answer it
                self._log.warning("client_tool_unowned", tool=event.tool_name)
                turn.answered.add(event.request_id)
                self._answer_provider(
                    event.request_id,
                    error=f"No connected client provides the tool {event.tool_name!r}.",
                )
                return
            request = attrs.evolve(request, client_id=owner)
        turn.requests[request.request_id] = request
        if kind is RequestKind.PERMISSION and event.tool_call_id is not None:
            self._apply(
                ToolCallReady(
                    turn_id=turn.turn_id,
                    tool_call_id=event.tool_call_id,
                    invocation_message=event.tool_name or "",
                    tool_input=event.arguments,
                )
            )
        self._apply(RequestOpened(request=request))

    def stale(self, event: HostRequestOpened) -> None:
        """A request for a turn that is no longer active is denied, never dropped."""
        self._log.warning(
            "stale_request_denied", request_id=event.request_id, kind=event.kind.value
        )
        self._answer_provider(
            event.request_id,
            approved=False,
            error="The turn this request belongs to is no longer active.",
        )

    def answer(self, turn: ActiveTurn | None, message: AnswerRequest) -> AgentHostError | None:
        """A client's answer; None when taken, else why it was refused."""
        request_id = message.request_id
        request = None if turn is None else turn.requests.get(request_id)
        if request is None:
            return self._early_result(turn, message)
        assert turn is not None
        invalid = _check_answer(request, message)
        if invalid is not None:
            return invalid
        del turn.requests[request_id]
        turn.answered.add(request_id)
        if request.kind is RequestKind.PERMISSION:
            approved = bool(message.approved)
            self._answer_provider(request_id, approved=approved)
            if request.tool_call_id is not None:
                self._apply(
                    ToolCallConfirmed(
                        turn_id=turn.turn_id,
                        tool_call_id=request.tool_call_id,
                        approved=approved,
                        confirmed="user-action" if approved else None,
                        reason=None if approved else "denied",
                    )
                )
            outcome = RequestOutcome.ANSWERED if approved else RequestOutcome.DENIED
        elif request.kind is RequestKind.USER_INPUT:
            self._answer_provider(request_id, answer=message.answer)
            outcome = RequestOutcome.ANSWERED
        else:
            self._answer_provider(request_id, result=message.result)
            outcome = RequestOutcome.ANSWERED
        self._apply(RequestClosed(request_id=request_id, outcome=outcome))
        return None

    def _early_result(
        self, turn: ActiveTurn | None, message: AnswerRequest
    ) -> AgentHostError | None:
        """A client tool's result ahead of its request is kept for it; anything
        else for a request that is not open is refused."""
        request_id = message.request_id
        if (
            turn is not None
            and message.result is not None
            and request_id in turn.tool_calls
            and request_id not in turn.answered
            and request_id not in turn.early
        ):
            owner = self.owners.get(turn.tool_calls[request_id])
            if message.client_id is not None and message.client_id != owner:
                return AgentHostError(
                    code=ErrorCode.INVALID_ARGUMENT,
                    message="only the client that executes this tool may answer its call",
                )
            turn.early[request_id] = message
            return None
        return AgentHostError(
            code=ErrorCode.NOT_FOUND,
            message=f"request {request_id} is not open (it was answered, or its turn ended)",
        )

    def client_removed(self, turn: ActiveTurn | None, client_id: str) -> None:
        """Every call the client left parked fails now; new ones are never parked."""
        self.owners = {t: c for t, c in self.owners.items() if c != client_id}
        if turn is None:
            return
        for request in list(turn.requests.values()):
            if request.kind is RequestKind.CLIENT_TOOL and request.client_id == client_id:
                del turn.requests[request.request_id]
                turn.answered.add(request.request_id)
                self._answer_provider(
                    request.request_id, error=f"The client {client_id!r} is gone."
                )
                self._apply(
                    RequestClosed(request_id=request.request_id, outcome=RequestOutcome.FAILED)
                )

    def turn_ended(self, turn: ActiveTurn) -> None:
        """Whatever the turn left open is refused to the provider and closed."""
        for request_id in list(turn.requests):
            self._answer_provider(request_id, approved=False, error="The turn ended.")
            self._apply(RequestClosed(request_id=request_id, outcome=RequestOutcome.CANCELLED))
        turn.requests.clear()


def _check_answer(request: OpenRequest, answer: AnswerRequest) -> AgentHostError | None:
    def invalid(text: str) -> AgentHostError:
        return AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message=text)

    if request.kind is RequestKind.PERMISSION and answer.approved is None:
        return invalid(f"request {request.request_id} asks for a permission: pass approved=")
    if request.kind is RequestKind.USER_INPUT and answer.answer is None:
        return invalid(f"request {request.request_id} asks the user a question: pass answer=")
    if request.kind is RequestKind.CLIENT_TOOL:
        if answer.result is None:
            return invalid(f"request {request.request_id} waits for a tool result: pass result=")
        if answer.client_id is not None and answer.client_id != request.client_id:
            return invalid(
                f"only the client that executes {request.tool_name!r} may answer this call"
            )
    return None


def ids_of(requests: list[OpenRequest], kind: RequestKind) -> tuple[str, ...]:
    return tuple(r.request_id for r in requests if r.kind is kind)
