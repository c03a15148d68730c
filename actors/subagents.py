"""Subagents a tool call spawned: each gets a chat of its own, driven by its
parent's provider stream.

A plain object the turn tracker holds (its thread only). A subagent's turn
ends once: with its own idle, or with its parent's turn (read spawn state
before the parent's terminal action: a cancel ends every subagent of the
turn; otherwise resolved ones end with it and background ones run on), or
when the connection that produced it dies.
"""

from collections.abc import Callable
from typing import Any

import attrs

from agenthost.actors.active_turn import ActiveTurn, AssistantStream
from agenthost.actors.protocol import (
    ApplyActions,
    EndTurn,
    Ref,
    SpawnSubagentChat,
    StartProviderTurn,
)
from agenthost.messages.errors import AgentHostError
from agenthost.messages.events import (
    ChatEvent,
    ToolCallSubagentStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
)
from agenthost.messages.ids import new_id
from agenthost.messages.provider import (
    Idle,
    ReplyDelta,
    ReplyMessage,
    ReplyReasoning,
    SubagentStarted,
)

Terminal = TurnCompleted | TurnCancelled | TurnFailed


@attrs.define
class Spawn:
    """A subagent a tool call spawned, and its chat's running turn."""

    subagent_id: str
    chat_id: str
    tool_call_id: str
    parent_turn_id: str
    turn_id: str
    background: bool
    stream: AssistantStream
    ref: Ref | None = None
    waiting: list[object] = attrs.field(factory=list)  # for its chat, until the chat runs
    resolved: bool = False  # the spawning call finished with the subagent's work


class Subagents:
    def __init__(
        self,
        session_id: str,
        chat_id: str,
        tracker: Ref,
        to_chat: Callable[[object], None],
        apply: Callable[[ChatEvent], None],
        send: Callable[[Ref | None, Any], bool],
    ) -> None:
        self._session_id = session_id
        self._chat_id = chat_id
        self._tracker = tracker
        self._to_chat = to_chat
        self._apply = apply
        self._send = send
        self._spawns: dict[str, Spawn] = {}
        self._unstarted: dict[str, Spawn] = {}  # ended before their chat started

    def spawn(self, turn: ActiveTurn, event: SubagentStarted) -> None:
        chat_id = new_id()
        turn_id = new_id()
        spawn = Spawn(
            subagent_id=event.subagent_id,
            chat_id=chat_id,
            tool_call_id=event.tool_call_id,
            parent_turn_id=turn.turn_id,
            turn_id=turn_id,
            background=event.background,
            stream=AssistantStream(self._session_id, chat_id, turn_id),
        )
        self._spawns[spawn.subagent_id] = spawn
        self._to_chat(
            SpawnSubagentChat(
                subagent_id=spawn.subagent_id,
                chat_id=spawn.chat_id,
                parent_chat_id=self._chat_id,
                tool_call_id=spawn.tool_call_id,
                tracker=self._tracker,
            ),
        )
        self._apply(
            ToolCallSubagentStarted(
                turn_id=turn.turn_id, tool_call_id=spawn.tool_call_id, subagent_chat_id=chat_id
            )
        )
        self._to_spawn(spawn, StartProviderTurn(turn_id=spawn.turn_id, text=event.prompt))

    def started(self, subagent_id: str, ref: Ref) -> None:
        """Its chat runs: what waited for it goes now."""
        spawn = self._spawns.get(subagent_id) or self._unstarted.pop(subagent_id, None)
        if spawn is None:
            return
        spawn.ref = ref
        waiting, spawn.waiting = spawn.waiting, []
        for item in waiting:
            self._send(spawn.ref, item)

    def tool_completed(self, tool_call_id: str) -> None:
        """The spawning call finished: a foreground subagent ends with its parent's turn."""
        for spawn in self._spawns.values():
            if spawn.tool_call_id == tool_call_id and not spawn.background:
                spawn.resolved = True

    def event(self, event: ReplyDelta | ReplyReasoning | ReplyMessage | Idle) -> None:
        spawn = self._spawns.get(event.subagent_id or "")
        if spawn is None:
            return  # its turn already ended
        match event:
            case ReplyDelta():
                self._to_spawn(spawn, ApplyActions(actions=spawn.stream.delta(event.text)))
            case ReplyReasoning():
                self._to_spawn(spawn, ApplyActions(actions=spawn.stream.reasoning(event.text)))
            case ReplyMessage():
                self._flush(spawn)
            case Idle():
                self._end(spawn, TurnCompleted(turn_id=spawn.turn_id))

    def end_with(self, turn: ActiveTurn, action: Terminal) -> None:
        """The parent's turn ends (see the module docstring)."""
        for spawn in [s for s in self._spawns.values() if s.parent_turn_id == turn.turn_id]:
            if isinstance(action, TurnCancelled):
                self._end(spawn, TurnCancelled(turn_id=spawn.turn_id))
            elif spawn.resolved:
                self._end(spawn, attrs.evolve(action, turn_id=spawn.turn_id))

    def abandon(self, error: AgentHostError) -> None:
        """Their producer died with the connection."""
        for spawn in list(self._spawns.values()):
            self._end(spawn, TurnFailed(turn_id=spawn.turn_id, error=error))

    def _to_spawn(self, spawn: Spawn, message: object) -> None:
        if spawn.ref is None:
            spawn.waiting.append(message)
        else:
            self._send(spawn.ref, message)

    def _flush(self, spawn: Spawn) -> None:
        stable = spawn.stream.stable()
        if stable is not None:
            self._to_spawn(spawn, stable)

    def _end(self, spawn: Spawn, action: Terminal) -> None:
        """A subagent's turn ends once: its record goes with it."""
        if self._spawns.pop(spawn.subagent_id, None) is None:
            return
        self._flush(spawn)
        stamped = attrs.evolve(action, session_id=self._session_id, chat_id=spawn.chat_id)
        self._to_spawn(spawn, EndTurn(action=stamped))
        if spawn.ref is None:
            self._unstarted[spawn.subagent_id] = spawn  # its chat still starts: tell it then
