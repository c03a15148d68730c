"""What the turn tracker sends its chat, held back until the tracker flushes.

A plain object the turn tracker holds (its thread only). Invariants:
1. Order is kept: the chat hears messages in the order they were queued.
2. Consecutive actions merge into one ApplyActions (a run of deltas is one
   message, reduced by the chat at once); a message in between starts a new run.
3. A flush delivers everything queued since the last one as one message (a
   ChatBatch when there are several), and nothing when nothing is queued.
Actions are stamped with the tracker's session and chat ids.
"""

from collections.abc import Callable
from typing import Any, TypeVar

from agenthost.actors.protocol import ApplyActions, ChatBatch
from agenthost.messages.events import ChatEvent
from agenthost.messages.reduction import replace

E = TypeVar("E", bound=ChatEvent)


class ChatOutbox:
    def __init__(self, session_id: str, chat_id: str, deliver: Callable[[object], Any]) -> None:
        self.session_id = session_id
        self.chat_id = chat_id
        self._deliver = deliver  # one message to the chat
        self._out: list[Any] = []  # messages, and runs of actions (lists)

    def stamp(self, event: E) -> E:
        """`event` naming this tracker's session and chat."""
        return replace(event, session_id=self.session_id, chat_id=self.chat_id)

    def message(self, message: object) -> None:
        """Queue `message` for the chat; an ApplyActions joins the last run of actions."""
        if isinstance(message, ApplyActions):
            self.actions(message.actions)
        else:
            self._out.append(message)

    def actions(self, actions: tuple[ChatEvent, ...]) -> None:
        """Queue actions, already stamped (they join the run of actions queued last)."""
        out = self._out
        if out and isinstance(out[-1], list):
            out[-1].extend(actions)
        else:
            out.append(list(actions))

    def apply(self, action: ChatEvent) -> None:
        """Queue one action, stamped."""
        self.actions((self.stamp(action),))

    def flush(self) -> None:
        """Deliver what was queued since the last flush, as one message."""
        out = self._out
        if not out:
            return
        self._out = []
        messages = [ApplyActions(actions=tuple(m)) if isinstance(m, list) else m for m in out]
        self._deliver(messages[0] if len(messages) == 1 else ChatBatch(messages=tuple(messages)))
