"""ChatInputs: what a chat hears from its clients about what the turn asks of
them, beside ChatActor's sends and queue (actors/chat.py), on top of ChatCore.

A client tool's partial content and the user's word on its held result go to
the turn tracker, which owns the turn's requests (actors/requests.py), and are
answered once it settled them, like an answer.
"""

from collections import deque
from typing import Any

from agenthost.actors.chat_core import ChatCore
from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.runtime import handles
from agenthost.messages.commands import ChangeToolContent, ConfirmToolResult


class ChatInputs(ChatCore):
    @handles(ChangeToolContent, ConfirmToolResult)
    def _tool_call_word(self, message: ChangeToolContent | ConfirmToolResult) -> Any:
        future = RuntimeFuture()
        self._waiting.answers.setdefault(message.tool_call_id, deque()).append(future)
        self.send(self._tracker, message)
        return future


INPUT_COMMANDS = (ChangeToolContent, ConfirmToolResult)
"""The client commands ChatInputs handles (held, like ChatActor's, while the
session decides to leave memory)."""
