"""The tracker's record of the active turn, and a turn's assistant text as it streams."""

import attrs

from agenthost.actors.protocol import AssistantStable
from agenthost.messages.commands import AnswerRequest
from agenthost.messages.events import AssistantDelta, ChatEvent, ResponsePartAdded
from agenthost.messages.provider import CallSettled
from agenthost.messages.state import (
    Attachment,
    MarkdownPart,
    OpenRequest,
    Turn,
    markdown_part_id,
)


@attrs.define
class AssistantStream:
    """A turn's assistant text as it streams: its markdown parts, and what has
    not become stable (persisted) yet. Used for turns and subagents alike."""

    session_id: str
    chat_id: str
    turn_id: str
    unflushed: list[str] = attrs.field(factory=list)
    part_id: str | None = None
    parts: int = 0

    def delta(self, text: str) -> tuple[ChatEvent, ...]:
        """The actions one streamed piece of text makes (a new part starts after
        each stable point)."""
        self.unflushed.append(text)
        if self.part_id is not None:
            return (
                AssistantDelta(
                    session_id=self.session_id,
                    chat_id=self.chat_id,
                    turn_id=self.turn_id,
                    part_id=self.part_id,
                    text=text,
                ),
            )
        ids = {"session_id": self.session_id, "chat_id": self.chat_id, "turn_id": self.turn_id}
        self.parts += 1
        self.part_id = markdown_part_id(self.turn_id, self.parts)
        return (
            ResponsePartAdded(**ids, part=MarkdownPart(id=self.part_id)),
            AssistantDelta(**ids, part_id=self.part_id, text=text),
        )

    def stable(self) -> AssistantStable | None:
        """What became stable (a message ended, or the stream did), to persist."""
        text = "".join(self.unflushed)
        self.unflushed.clear()
        self.part_id = None
        return AssistantStable(turn_id=self.turn_id, text=text) if text else None


@attrs.define
class ActiveTurn:
    """The tracker's record of the active turn; dropped when the turn ends.
    `key` is the provider's run (a steering turn's run is the one its echo named)."""

    turn_id: str
    key: str
    text: str
    stream: AssistantStream
    history: tuple[Turn, ...] = ()
    instructions: str = ""
    model: str | None = None
    attachments: tuple[Attachment, ...] = ()
    sent: bool = False
    own_echo_seen: bool = False
    finish_reason: str | None = None
    settled: CallSettled | None = None
    requests: dict[str, OpenRequest] = attrs.field(factory=dict)
    tool_calls: dict[str, str] = attrs.field(factory=dict)  # tool call id -> tool name
    answered: set[str] = attrs.field(factory=set)
    early: dict[str, AnswerRequest] = attrs.field(factory=dict)
    last_event_at: float = 0.0
    predecessors: frozenset[str] = frozenset()  # turns this one took over (copilot steering)
