"""The tracker's record of the active turn, and a turn's assistant text as it streams.

A turn's response parts follow the stream: text goes to a markdown part and
reasoning to a reasoning part, each run of either to a part of its own, so
reasoning between two runs of text sits between their parts. Only the text
becomes stable (is persisted); reasoning lives in the turn's parts.
"""

from collections.abc import Sequence

import attrs

from agenthost.actors.history import history
from agenthost.actors.protocol import AssistantStable, BeginTurn
from agenthost.messages.commands import AnswerRequest
from agenthost.messages.events import (
    AssistantDelta,
    ChatEvent,
    ReasoningDelta,
    ResponsePartAdded,
)
from agenthost.messages.provider import CallSettled, HistoryMessage, ProviderSend
from agenthost.messages.state import (
    Attachment,
    MarkdownPart,
    OpenRequest,
    ReasoningPart,
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
    reasoning_id: str | None = None  # the reasoning part a run of reasoning goes to

    def text(self, pieces: Sequence[str]) -> ResponsePartAdded | None:
        """Note streamed pieces of text in a row; the part they start, if they
        start one (a new part starts after each stable point, and after
        reasoning). The pieces go to `part_id`."""
        self.unflushed.extend(pieces)
        self.reasoning_id = None
        if self.part_id is not None:
            return None
        self.parts += 1
        self.part_id = markdown_part_id(self.turn_id, self.parts)
        return ResponsePartAdded(
            session_id=self.session_id,
            chat_id=self.chat_id,
            turn_id=self.turn_id,
            part=MarkdownPart(id=self.part_id),
        )

    def delta(self, text: str) -> tuple[ChatEvent, ...]:
        """The actions one streamed piece of text makes (`text`, as actions)."""
        added = self.text((text,))
        assert self.part_id is not None
        delta = AssistantDelta(
            session_id=self.session_id,
            chat_id=self.chat_id,
            turn_id=self.turn_id,
            part_id=self.part_id,
            text=text,
        )
        return (delta,) if added is None else (added, delta)

    def reasoning(self, text: str) -> tuple[ChatEvent, ...]:
        """The actions one streamed piece of reasoning makes (a run of it is one
        reasoning part; text after it starts a new markdown part)."""
        self.part_id = None
        added: tuple[ChatEvent, ...] = ()
        if self.reasoning_id is None:
            self.parts += 1
            self.reasoning_id = f"{self.turn_id}-r{self.parts}"
            part = ReasoningPart(id=self.reasoning_id)
            added = (
                ResponsePartAdded(
                    session_id=self.session_id,
                    chat_id=self.chat_id,
                    turn_id=self.turn_id,
                    part=part,
                ),
            )
        delta = ReasoningDelta(
            session_id=self.session_id,
            chat_id=self.chat_id,
            turn_id=self.turn_id,
            part_id=self.reasoning_id,
            content=text,
        )
        return (*added, delta)

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
    streaming_calls: set[str] = attrs.field(factory=set)  # calls whose input streams
    running_mcp_calls: set[str] = attrs.field(factory=set)  # an MCP server's calls that run
    activity: str | None = None  # the chat's activity as last sent
    answered: set[str] = attrs.field(factory=set)
    early: dict[str, AnswerRequest] = attrs.field(factory=dict)
    held_results: dict[str, str] = attrs.field(factory=dict)  # call id -> result the user confirms
    result_confirmed: set[str] = attrs.field(factory=set)  # the host ended these calls itself
    last_event_at: float = 0.0
    predecessors: frozenset[str] = frozenset()  # turns this one took over (copilot steering)

    @classmethod
    def begin(cls, message: BeginTurn, session_id: str, chat_id: str, now: float) -> "ActiveTurn":
        """The record of a turn the chat starts (its provider run is keyed by its id)."""
        return cls(
            turn_id=message.turn_id,
            key=message.turn_id,
            text=message.text,
            stream=AssistantStream(session_id, chat_id, message.turn_id, parts=message.parts),
            history=message.history,
            instructions=message.instructions,
            model=message.model,
            attachments=message.attachments,
            last_event_at=now,
        )

    def send(self, session_id: str, chat_id: str, stateful_prompt: bool) -> ProviderSend:
        """The turn, as its provider gets it: a provider without a stateful prompt
        gets the earlier turns too. The turn counts as sent from now on."""
        past: tuple[HistoryMessage, ...] = () if stateful_prompt else history(self.history)
        self.sent = True
        return ProviderSend(
            session_id=session_id,
            chat_id=chat_id,
            turn_id=self.key,
            text=self.text,
            history=past,
            instructions=self.instructions,
            model=self.model,
            attachments=self.attachments,
        )
