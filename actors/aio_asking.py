"""AsyncChat's twins of actors/surface_asking.py (a mixin of AsyncChat's):
the same calls, awaited, never blocking a thread."""

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


class AsyncChatAsking:
    async def _call(self, message: Any, timeout: float) -> Any:
        raise NotImplementedError

    async def answer(
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
        """As Chat.answer."""
        await self._call(
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

    async def set_flags(
        self,
        *,
        read: bool | None = None,
        archived: bool | None = None,
        client_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> ChatStatus:
        """As Chat.set_flags."""
        command = SetChatFlags(read=read, archived=archived, client_id=client_id)
        status: ChatStatus = await self._call(command, timeout)
        return status

    async def resume(
        self, turn_id: str, *, client_id: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        """As Chat.resume."""
        await self._call(ResumeTurn(turn_id=turn_id, client_id=client_id), timeout)

    async def set_input_answer(
        self,
        request_id: str,
        question_id: str,
        answer: Given | None,
        *,
        client_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """As Chat.set_input_answer."""
        command = SetInputAnswer(
            request_id=request_id,
            question_id=question_id,
            answer=None if answer is None else given(answer),
            client_id=client_id,
        )
        await self._call(command, timeout)

    async def change_tool_content(
        self,
        tool_call_id: str,
        content: str,
        *,
        client_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """As Chat.change_tool_content."""
        command = ChangeToolContent(tool_call_id=tool_call_id, content=content, client_id=client_id)
        await self._call(command, timeout)

    async def confirm_tool_result(
        self,
        tool_call_id: str,
        approved: bool,
        *,
        client_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """As Chat.confirm_tool_result."""
        command = ConfirmToolResult(
            tool_call_id=tool_call_id, approved=approved, client_id=client_id
        )
        await self._call(command, timeout)

    async def authenticate(
        self,
        resource: str,
        token: str,
        *,
        client_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """As Chat.authenticate."""
        await self._call(SupplyToken(resource=resource, token=token, client_id=client_id), timeout)
