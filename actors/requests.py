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

As AHP 1.1 has them: a permission for a tool call makes the call wait for
confirmation (chat/toolCallReady) with the options the provider offers; its
answer names one of those (approved follows its kind) and may carry an
edited tool input where the call takes one (chat/toolCallConfirmed with
selectedOptionId and editedToolInput); a permission is found by its tool
call's id too. A question is also the chat's input request
(chat/inputRequested, its questions with their choices; a bare question is
one text question) and its answer, checked against the questions
(actors/input_answers.py), completes it (chat/inputCompleted: accepted with
the answers, declined, or cancelled).

A client tool's call belongs to the client that executes it: only that client
reports its partial content (chat/toolCallContentChanged, while it runs) and
its result. A result that asks for confirmation is held: the call completes
pending the user's confirmation (chat/toolCallComplete with
requiresResultConfirmation), and only an approval (chat/toolCallResultConfirmed)
hands the result to the provider; a denial tells the provider the user kept
it back.

An authentication (an MCP server's call blocked on a token for a protected
resource) is parked and answered by the token a client gives for that
resource, never by an answer to its id: actors/tool_auth.py.
"""

import json
from collections.abc import Callable
from typing import Any

import attrs

from agenthost.actors import input_answers, tool_auth
from agenthost.actors.active_turn import ActiveTurn
from agenthost.messages.commands import (
    AnswerRequest,
    ChangeToolContent,
    ConfirmToolResult,
    SupplyToken,
)
from agenthost.messages.common import ConfirmationOptionKind, Markdown, StringOrMarkdown
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    ChatEvent,
    InputCompleted,
    InputRequested,
    RequestClosed,
    RequestOpened,
    RequestOutcome,
    ToolCallCompleted,
    ToolCallConfirmed,
    ToolCallContentChanged,
    ToolCallReady,
    ToolCallResultConfirmed,
)
from agenthost.messages.fields import Json
from agenthost.messages.inputs import (
    ChatInputRequest,
    InputQuestion,
    InputQuestionKind,
    InputResponseKind,
    chosen,
)
from agenthost.messages.provider import HostRequestOpened
from agenthost.messages.state import OpenRequest, RequestKind

AnswerProvider = Callable[..., None]
"""`answer(request_id, **fields)`: a ProviderAnswer with those fields."""
Apply = Callable[[ChatEvent], None]
"""An action for the chat (the tracker stamps and queues it)."""
TEXT_QUESTION = "answer"
"""The id of the one text question a bare question becomes."""
DECLINED = "The user declined to answer."
DISMISSED = "The user dismissed the question without answering."
RESULT_DENIED = "The user did not let the tool's result reach the model."


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
        if kind is RequestKind.AUTHENTICATION:
            tool_auth.opened(turn, event, self._answer_provider, self._apply, self._log)
            return
        questions = event.questions
        if kind is RequestKind.USER_INPUT and not questions:
            bare = InputQuestion(
                id=TEXT_QUESTION, kind=InputQuestionKind.TEXT, message=event.question or ""
            )
            questions = (bare,)
        request = OpenRequest(
            request_id=event.request_id,
            kind=kind,
            turn_id=turn.turn_id,
            tool_call_id=event.tool_call_id,
            tool_name=event.tool_name,
            question=event.question,
            arguments=event.arguments,
            options=event.options,
            editable=event.editable,
            questions=questions,
        )
        if kind is RequestKind.CLIENT_TOOL:
            early = turn.early.pop(event.request_id, None)
            if early is not None and early.confirm_result:  # it waits for the user still
                turn.requests[request.request_id] = request
                self._hold_result(turn, request, early)
                return
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
                    options=event.options or None,
                    editable=True if event.editable else None,
                )
            )
        self._apply(RequestOpened(request=request))
        if kind is RequestKind.USER_INPUT:
            asked = ChatInputRequest(
                id=request.request_id, message=event.question, questions=questions
            )
            self._apply(InputRequested(request=asked))

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

    def token_supplied(
        self, turn: ActiveTurn | None, message: SupplyToken
    ) -> AgentHostError | None:
        """A client's token for a resource calls of the turn wait on."""
        return tool_auth.supplied(turn, message, self._answer_provider, self._apply, self._log)

    def answer(self, turn: ActiveTurn | None, message: AnswerRequest) -> AgentHostError | None:
        """A client's answer; None when taken, else why it was refused."""
        request = None if turn is None else _find(turn, message.request_id)
        if request is None:
            return self._early_result(turn, message)
        assert turn is not None
        invalid = _check_answer(request, message)
        if invalid is not None:
            return invalid
        if request.kind is RequestKind.PERMISSION:
            outcome = self._confirm(turn, request, message)
        elif request.kind is RequestKind.USER_INPUT:
            outcome = self._reply(request, message)
        elif request.request_id in turn.held_results:
            return _invalid(f"the result of {request.request_id} waits for the user's confirmation")
        elif message.confirm_result:
            self._hold_result(turn, request, message)
            return None
        else:
            self._answer_provider(request.request_id, result=message.result)
            outcome = RequestOutcome.ANSWERED
        if isinstance(outcome, AgentHostError):
            return outcome
        del turn.requests[request.request_id]
        turn.answered.add(request.request_id)
        closed = RequestClosed(request_id=request.request_id, outcome=outcome, kind=request.kind)
        self._apply(closed)
        return None

    def _confirm(
        self, turn: ActiveTurn, request: OpenRequest, message: AnswerRequest
    ) -> RequestOutcome | AgentHostError:
        """A permission's answer: approval (or the option chosen), and an edited input."""
        option = None
        if message.option is not None:
            option = next((o for o in request.options if o.id == message.option), None)
            if option is None:
                offered = ", ".join(o.id for o in request.options) or "none"
                return _invalid(
                    f"request {request.request_id} offers no option {message.option!r}"
                    f" (it offers: {offered})"
                )
        approved = message.approved
        if option is not None:
            approves = option.kind == ConfirmationOptionKind.APPROVE
            if approved is not None and approved != approves:
                return _invalid(
                    f"option {option.id!r} does not {'approve' if approved else 'deny'}"
                )
            approved = approves
        assert approved is not None  # _check_answer saw to it
        edited = message.edited_input
        if edited is not None:
            if not request.editable:
                return _invalid(f"request {request.request_id} takes no edited tool input")
            if not approved:
                return _invalid("an edited tool input goes with an approval")
            if not _json_object(edited):
                return _invalid("edited_input must be a JSON object's text")
        # A denial says why (the user's reason and words); an approval has no reason.
        reason = None if approved else message.reason or "denied"
        words = None if approved else message.reason_message
        self._answer_provider(
            request.request_id,
            approved=approved,
            option=None if option is None else option.id,
            edited_input=edited,
            reason=reason,
            reason_message=_text(words),
        )
        if not approved and request.tool_call_id is not None:
            turn.running_mcp_calls.discard(request.tool_call_id)  # it never runs
        if request.tool_call_id is not None:
            self._apply(
                ToolCallConfirmed(
                    turn_id=turn.turn_id,
                    tool_call_id=request.tool_call_id,
                    approved=approved,
                    confirmed="user-action" if approved else None,
                    reason=reason,
                    reason_message=words,
                    selected_option_id=None if option is None else option.id,
                    edited_tool_input=edited,
                )
            )
        return RequestOutcome.ANSWERED if approved else RequestOutcome.DENIED

    def _reply(
        self, request: OpenRequest, message: AnswerRequest
    ) -> RequestOutcome | AgentHostError:
        """A question's answer, checked against its questions; or its decline."""
        request_id = request.request_id
        if message.approved is False or message.cancelled:
            cancelled = message.cancelled
            error = DISMISSED if cancelled else DECLINED
            self._answer_provider(request_id, approved=False, error=error)
            response = InputResponseKind.CANCEL if cancelled else InputResponseKind.DECLINE
            self._apply(InputCompleted(request_id=request_id, response=response))
            return RequestOutcome.CANCELLED if cancelled else RequestOutcome.DENIED
        answers = input_answers.resolve(
            request_id, request.questions, message.answer, message.answers
        )
        if isinstance(answers, AgentHostError):
            return answers
        first = request.questions[0] if request.questions else None
        by_id = dict(answers)
        text = ", ".join(chosen(first, by_id.get(first.id))) if first is not None else ""
        self._answer_provider(request_id, approved=True, answer=text, answers=answers)
        self._apply(
            InputCompleted(
                request_id=request_id, response=InputResponseKind.ACCEPT, answers=answers
            )
        )
        return RequestOutcome.ANSWERED

    # -- a client tool's content and held result --------------------------------------------
    def _hold_result(self, turn: ActiveTurn, request: OpenRequest, message: AnswerRequest) -> None:
        """The call completes pending the user's confirmation; the provider waits on."""
        assert request.tool_call_id is not None and message.result is not None
        turn.held_results[request.tool_call_id] = message.result
        self._apply(
            ToolCallCompleted(
                turn_id=turn.turn_id,
                tool_call_id=request.tool_call_id,
                content=Json.of([{"type": "text", "text": message.result}]),
                requires_result_confirmation=True,
            )
        )

    def content_changed(
        self, turn: ActiveTurn | None, message: ChangeToolContent
    ) -> AgentHostError | None:
        """The executing client's partial content for its running call."""
        request = None if turn is None else turn.requests.get(message.tool_call_id)
        if (
            turn is None
            or request is None
            or request.kind is not RequestKind.CLIENT_TOOL
            or message.tool_call_id in turn.held_results
        ):
            return _not_running(message.tool_call_id)
        if message.client_id is not None and message.client_id != request.client_id:
            return _invalid(
                f"only the client that executes {request.tool_name!r} reports its content"
            )
        if not _json_array(message.content):
            return _invalid("content must be a JSON array's text (AHP's ToolResultContent[])")
        self._apply(
            ToolCallContentChanged(
                turn_id=turn.turn_id,
                tool_call_id=message.tool_call_id,
                content=Json(text=message.content),
            )
        )
        return None

    def result_confirmed(
        self, turn: ActiveTurn | None, message: ConfirmToolResult
    ) -> AgentHostError | None:
        """The user's word on a held result: it reaches the provider, or not."""
        call_id = message.tool_call_id
        held = None if turn is None else turn.held_results.pop(call_id, None)
        if turn is None or held is None:
            return AgentHostError(
                code=ErrorCode.NOT_FOUND,
                message=f"tool call {call_id} has no result waiting for confirmation",
            )
        request = turn.requests.pop(call_id)
        turn.answered.add(call_id)
        turn.result_confirmed.add(call_id)
        if message.approved:
            self._answer_provider(request.request_id, result=held)
        else:
            self._answer_provider(request.request_id, error=RESULT_DENIED)
        self._apply(
            ToolCallResultConfirmed(
                turn_id=turn.turn_id, tool_call_id=call_id, approved=message.approved
            )
        )
        outcome = RequestOutcome.ANSWERED if message.approved else RequestOutcome.DENIED
        kind = RequestKind.CLIENT_TOOL
        self._apply(RequestClosed(request_id=request.request_id, outcome=outcome, kind=kind))
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
                    RequestClosed(
                        request_id=request.request_id,
                        outcome=RequestOutcome.FAILED,
                        kind=request.kind,
                    )
                )

    def turn_ended(self, turn: ActiveTurn) -> None:
        """Whatever the turn left open is refused to the provider and closed."""
        for request_id, request in list(turn.requests.items()):
            self._answer_provider(request_id, approved=False, error="The turn ended.")
            cancelled = RequestOutcome.CANCELLED
            self._apply(RequestClosed(request_id=request_id, outcome=cancelled, kind=request.kind))
        turn.requests.clear()


def _find(turn: ActiveTurn, request_id: str) -> OpenRequest | None:
    """The open request with this id, or the permission for the tool call with it."""
    found = turn.requests.get(request_id)
    if found is not None:
        return found
    return next(
        (
            r
            for r in turn.requests.values()
            if r.kind is RequestKind.PERMISSION and r.tool_call_id == request_id
        ),
        None,
    )


def _check_answer(request: OpenRequest, answer: AnswerRequest) -> AgentHostError | None:
    if request.kind is RequestKind.AUTHENTICATION:
        resource = "its resource" if request.auth is None else request.auth.resource.resource
        return _invalid(
            f"request {request.request_id} waits for a token: authenticate for {resource}"
        )
    if request.kind is RequestKind.PERMISSION and answer.approved is None and answer.option is None:
        return _invalid(
            f"request {request.request_id} asks for a permission: pass approved= or option="
        )
    if (
        request.kind is RequestKind.USER_INPUT
        and answer.answer is None
        and answer.answers is None
        and answer.approved is not False
        and not answer.cancelled
    ):
        return _invalid(
            f"request {request.request_id} asks the user a question: pass answer= or answers="
        )
    if request.kind is RequestKind.CLIENT_TOOL:
        if answer.result is None:
            return _invalid(f"request {request.request_id} waits for a tool result: pass result=")
        if answer.client_id is not None and answer.client_id != request.client_id:
            return _invalid(
                f"only the client that executes {request.tool_name!r} may answer this call"
            )
    return None


def _json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _json_array(text: str) -> bool:
    try:
        return isinstance(json.loads(text), list)
    except ValueError:
        return False


def _not_running(tool_call_id: str) -> AgentHostError:
    return AgentHostError(
        code=ErrorCode.NOT_FOUND,
        message=f"tool call {tool_call_id} is not a running client tool call",
    )


def _invalid(text: str) -> AgentHostError:
    return AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message=text)


def ids_of(requests: list[OpenRequest], kind: RequestKind) -> tuple[str, ...]:
    return tuple(r.request_id for r in requests if r.kind is kind)


def _text(value: StringOrMarkdown | None) -> str | None:
    """The words of a StringOrMarkdown, for a provider (which takes plain text)."""
    return value.markdown if isinstance(value, Markdown) else value
