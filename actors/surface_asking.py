"""What a Chat (actors/surface_chat.py) says to what its turn asks: answers to
permissions, questions and client tools, a client tool's content and held
result, input answers synced while a request is open, resuming a turn that
stopped at a resumable error, a token for tool calls blocked on
authentication, and the chat's read and archived flags. A
mixin of Chat's, apart so each module stays one concern; every call waits at
most `timeout` (the built-in TimeoutError) and raises AgentHostError as the
host refuses.
"""

from collections.abc import Mapping
from typing import Any

from agenthost.actors.input_answers import Given, given, given_all
from agenthost.actors.runtime import ASK_TIMEOUT_S as DEFAULT_TIMEOUT
from agenthost.messages.commands import (
    AnswerRequest,
    ChangeToolContent,
    ConfirmToolResult,
    ResumeTurn,
    SetChatFlags,
    SetInputAnswer,
    SupplyToken,
)
from agenthost.messages.common import StringOrMarkdown
from agenthost.messages.state import ChatStatus


class ChatAsking:
    def _call(self, message: Any, timeout: float) -> Any:
        raise NotImplementedError

    def answer(
        self,
        request_id: str,
        approved: bool | None = None,
        answer: str | None = None,
        result: str | None = None,
        *,
        client_id: str | None = None,
        option: str | None = None,
        edited_input: str | None = None,
        answers: Mapping[str, Given] | None = None,
        cancelled: bool = False,
        confirm_result: bool = False,
        reason: str | None = None,
        reason_message: StringOrMarkdown | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """Answer an open request (its `request_id`; a permission's tool call id
        will do too).

        A permission: `approved`, or the `option` chosen among those the request
        offers (`request.options`; approved follows its kind), with
        `edited_input` (JSON object text) where the tool call is editable. A
        question: `answer` (text for its first question) or `answers` by
        question id (`request.questions`): text, a choice's id or label, a list
        of them, a number, a bool, or an InputAnswer; `approved=False` declines
        it. A client tool: `result` (from the client that executes it). A
        denial may say why: `reason` (AHP's cancellation reason; `denied`
        when not given) and `reason_message` (the user's words); both reach
        the provider.

        Raises:
            AgentHostError: NOT_FOUND when it is not open (answered already, or
                its turn ended); INVALID_ARGUMENT for the wrong kind of answer,
                an option it does not offer, an answer outside its choices.
        """
        self._call(
            AnswerRequest(
                request_id=request_id,
                approved=approved,
                answer=answer,
                result=result,
                client_id=client_id,
                option=option,
                edited_input=edited_input,
                answers=given_all(answers),
                cancelled=cancelled,
                confirm_result=confirm_result,
                reason=reason,
                reason_message=reason_message,
            ),
            timeout,
        )

    def set_flags(
        self,
        *,
        read: bool | None = None,
        archived: bool | None = None,
        client_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> ChatStatus:
        """Mark the chat read or unread (`read`), archived or not (`archived`);
        None leaves a flag as it is. Returns the chat's status. Kept in memory
        only: a chat restored from the store starts read and unarchived.
        """
        command = SetChatFlags(read=read, archived=archived, client_id=client_id)
        status: ChatStatus = self._call(command, timeout)
        return status

    def resume(
        self, turn_id: str, *, client_id: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        """Run again the latest turn, which stopped at a resumable error (its
        parts are kept; its message goes to the provider once more).

        Raises:
            AgentHostError: INVALID_ARGUMENT saying why it cannot be resumed (a
                turn runs, it is not the latest, its error is not resumable).
        """
        self._call(ResumeTurn(turn_id=turn_id, client_id=client_id), timeout)

    def set_input_answer(
        self,
        request_id: str,
        question_id: str,
        answer: Given | None,
        *,
        client_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """Sync one answer of an open input request (its `request_id`, a
        `question_id` it asks): a Given value is a submitted answer, an
        InputAnswer may be a draft or skipped one, None clears it. Other
        clients see it (chat/inputAnswerChanged); the answer that completes the
        request takes the synced ones, its own replacing those of the same
        questions.

        Raises:
            AgentHostError: NOT_FOUND when the request is not open;
                INVALID_ARGUMENT for a question it does not ask.
        """
        command = SetInputAnswer(
            request_id=request_id,
            question_id=question_id,
            answer=None if answer is None else given(answer),
            client_id=client_id,
        )
        self._call(command, timeout)

    def change_tool_content(
        self,
        tool_call_id: str,
        content: str,
        *,
        client_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """A client tool's partial content while its call runs (AHP's
        ToolResultContent[] as JSON array text), from the client that executes it.

        Raises:
            AgentHostError: NOT_FOUND when no client tool call of the running turn
                has this id; INVALID_ARGUMENT from another client, or for content
                that is not a JSON array.
        """
        command = ChangeToolContent(tool_call_id=tool_call_id, content=content, client_id=client_id)
        self._call(command, timeout)

    def confirm_tool_result(
        self,
        tool_call_id: str,
        approved: bool,
        *,
        client_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """Let a client tool's result held for confirmation (answered with
        `confirm_result=True`) reach the model, or (`approved=False`) keep it back.

        Raises:
            AgentHostError: NOT_FOUND when no result of this call waits.
        """
        command = ConfirmToolResult(
            tool_call_id=tool_call_id, approved=approved, client_id=client_id
        )
        self._call(command, timeout)

    def authenticate(
        self,
        resource: str,
        token: str,
        *,
        client_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """Give the token for a protected `resource` that tool calls of the
        running turn wait on (a tool call part of status auth-required names it
        in `auth.resource.resource`): each of them gets it and runs again. The
        token goes to the provider only: it is never logged or stored.

        Raises:
            AgentHostError: NOT_FOUND when no tool call waits on that resource;
                INVALID_ARGUMENT for an empty token.
        """
        self._call(SupplyToken(resource=resource, token=token, client_id=client_id), timeout)
