"""ChatInputs: what a chat hears from its clients about what the turn asks of
them, beside ChatActor's sends and queue (actors/chat.py), on top of ChatCore.

A client tool's partial content, the user's word on its held result and a
token for a resource tool calls wait on go to the turn tracker, which owns
the turn's requests (actors/requests.py), and are answered once it settled
them, like an answer.

An input request's answers are synced in the chat state while it is open
(AHP's chat/inputAnswerChanged: a draft, a submitted or skipped answer, or
none): only for a request the chat has open and a question it asks. The
answer that completes the request takes them, its own replacing those of the
same questions (`synced_into`).

Resuming (AHP's chat/turnResume): only the latest turn, only when it stopped
at a resumable error and nothing runs or waits to (the reducer's invariant 7).
The turn becomes the active one again, its parts kept, and runs again on the
provider: its message is sent once more (a stateful backend sees it again),
its new parts numbered after the old ones; it then ends once, as any turn.
"""

from collections import deque
from typing import Any

import attrs

from agenthost.actors import tool_auth
from agenthost.actors.admission import Origin
from agenthost.actors.chat_core import ChatCore
from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.runtime import handles
from agenthost.messages.commands import (
    AnswerRequest,
    ChangeToolContent,
    ConfirmToolResult,
    ResumeTurn,
    SetChatFlags,
    SetInputAnswer,
    SupplyToken,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    ChatIsArchivedChanged,
    ChatIsReadChanged,
    InputAnswerChanged,
    TurnResumed,
)
from agenthost.messages.reducers import resumable
from agenthost.messages.state import ChatState


def not_resumable(state: ChatState, turn_id: str) -> AgentHostError | None:
    """Why the chat cannot resume `turn_id` now; None when it can."""
    latest = state.turns[-1] if state.turns else None
    if state.active_turn is not None:
        reason = f"turn {state.active_turn.id} is running"
    elif state.steering_messages:
        reason = "a steering message waits to run"
    elif latest is None or latest.id != turn_id:
        known = any(t.id == turn_id for t in state.turns)
        reason = f"turn {turn_id} is not the latest turn" if known else f"no turn {turn_id}"
    elif not resumable(latest):
        reason = f"turn {turn_id} did not stop at a resumable error ({latest.state.value})"
    else:
        return None
    return AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message=f"cannot resume: {reason}")


def synced_into(state: ChatState, message: AnswerRequest) -> AnswerRequest:
    """An answer to an input request with the answers clients synced for it
    (AHP: the completion's answers replace those of the same questions). An
    answer given as one text, a decline or a dismissal stays as it is."""
    if message.approved is False or message.cancelled:
        return message
    if message.answers is None and message.answer is not None:
        return message
    request = next((r for r in state.input_requests if r.id == message.request_id), None)
    if request is None or not request.answers:
        return message
    return attrs.evolve(message, answers=request.with_answers(message.answers).answers)


class ChatInputs(ChatCore):
    @handles(ChangeToolContent, ConfirmToolResult)
    def _tool_call_word(self, message: ChangeToolContent | ConfirmToolResult) -> Any:
        future = RuntimeFuture()
        self._waiting.answers.setdefault(message.tool_call_id, deque()).append(future)
        self.send(self._tracker, message)
        return future

    @handles(SupplyToken)
    def _token(self, message: SupplyToken) -> Any:
        """A token for tool calls that wait on its resource (actors/tool_auth.py),
        answered once the turn tracker took it or refused it."""
        future = RuntimeFuture()
        key = tool_auth.settle_key(message.resource)
        self._waiting.answers.setdefault(key, deque()).append(future)
        self.send(self._tracker, message)
        return future

    @handles(SetInputAnswer)
    def _set_input_answer(self, message: SetInputAnswer) -> Any:
        request = next((r for r in self._state.input_requests if r.id == message.request_id), None)
        if request is None:
            return self._reply(
                AgentHostError(
                    code=ErrorCode.NOT_FOUND,
                    message=f"input request {message.request_id} is not open",
                )
            )
        if all(q.id != message.question_id for q in request.questions or ()):
            return self._reply(
                AgentHostError(
                    code=ErrorCode.INVALID_ARGUMENT,
                    message=f"input request {request.id} asks no question {message.question_id!r}",
                )
            )
        changed = InputAnswerChanged(
            request_id=request.id, question_id=message.question_id, answer=message.answer
        )
        self._apply(self._stamp(changed), origin=Origin(message.client_id))
        return self._reply(None)

    @handles(SetChatFlags)
    def _set_flags(self, message: SetChatFlags) -> Any:
        """Read and archived are the chat's status bits (the session_flags
        contribution stores them as they change)."""
        origin = Origin(message.client_id)
        if message.read is not None:
            self._apply(self._stamp(ChatIsReadChanged(read=message.read)), origin=origin)
        if message.archived is not None:
            archived = ChatIsArchivedChanged(archived=message.archived)
            self._apply(self._stamp(archived), origin=origin)
        return self._reply(self._state.status)

    @handles(ResumeTurn)
    def _resume(self, message: ResumeTurn) -> Any:
        resume = self._stamp(TurnResumed(turn_id=message.turn_id))
        origin = Origin(message.client_id)
        refusal = not_resumable(self._state, message.turn_id)
        if refusal is None and self.driven:
            refusal = AgentHostError(
                code=ErrorCode.INVALID_ARGUMENT,
                message="cannot resume: a subagent's turns come from its parent",
            )
        if refusal is not None:
            self._admission.refused(resume, self._state, origin, refusal)
            return self._reply(refusal)
        turn = self._state.turns[-1]
        history = self._state.turns[:-1]
        self._apply(resume, origin=origin)
        self._log.info("turn_resumed", turn_id=turn.id)
        # What it said before stays its text; the run adds to it.
        self._writes.stable[turn.id] = [turn.assistant_text] if turn.assistant_text else []
        self._begin_on_provider(turn.id, turn.message, history, parts=len(turn.response_parts))
        return self._reply(None)


INPUT_COMMANDS = (
    ChangeToolContent,
    ConfirmToolResult,
    SetInputAnswer,
    ResumeTurn,
    SetChatFlags,
    SupplyToken,
)
"""The client commands ChatInputs handles (held, like ChatActor's, while the
session decides to leave memory)."""
