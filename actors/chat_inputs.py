"""ChatInputs: what a chat hears from its clients about what the turn asks of
them, beside ChatActor's sends and queue (actors/chat.py), on top of ChatCore.

A client tool's partial content and the user's word on its held result go to
the turn tracker, which owns the turn's requests (actors/requests.py), and are
answered once it settled them, like an answer.

An input request's answers are synced in the chat state while it is open
(AHP's chat/inputAnswerChanged: a draft, a submitted or skipped answer, or
none): only for a request the chat has open and a question it asks. The
answer that completes the request takes them, its own replacing those of the
same questions (`synced_into`).
"""

from collections import deque
from typing import Any

import attrs

from agenthost.actors.admission import Origin
from agenthost.actors.chat_core import ChatCore
from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.runtime import handles
from agenthost.messages.commands import (
    AnswerRequest,
    ChangeToolContent,
    ConfirmToolResult,
    SetInputAnswer,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import InputAnswerChanged
from agenthost.messages.state import ChatState


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


INPUT_COMMANDS = (ChangeToolContent, ConfirmToolResult, SetInputAnswer)
"""The client commands ChatInputs handles (held, like ChatActor's, while the
session decides to leave memory)."""
