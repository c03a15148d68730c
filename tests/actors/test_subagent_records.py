"""actors/subagents.py without actors: a spawn's chat gets what its stream
makes, in order, once it runs; its turn ends once (its own idle, its parent's
end, a cancel, or a dead connection)."""

from typing import Any

from agenthost.actors.active_turn import ActiveTurn, AssistantStream
from agenthost.actors.protocol import (
    ApplyActions,
    AssistantStable,
    EndTurn,
    SpawnSubagentChat,
    StartProviderTurn,
)
from agenthost.actors.subagents import Subagents
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    ChatEvent,
    ToolCallSubagentStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
)
from agenthost.messages.provider import Idle, ReplyDelta, ReplyMessage, SubagentStarted

TRACKER: Any = object()
CHILD: Any = object()


class Spawns:
    def __init__(self) -> None:
        self.to_chat: list[object] = []
        self.applied: list[ChatEvent] = []
        self.sent: list[tuple[Any, Any]] = []
        self.subagents = Subagents(
            "s", "c", TRACKER, self.to_chat.append, self.applied.append, self._send
        )
        self.turn = ActiveTurn(
            turn_id="t", key="run", text="go", stream=AssistantStream("s", "c", "t")
        )

    def _send(self, ref: Any, message: Any) -> bool:
        self.sent.append((ref, message))
        return True

    def spawn(self, background: bool = False) -> SpawnSubagentChat:
        self.subagents.spawn(
            self.turn,
            SubagentStarted(
                turn_id="run",
                tool_call_id="call",
                subagent_id="sub",
                prompt="look it up",
                background=background,
            ),
        )
        [spawned] = [m for m in self.to_chat if isinstance(m, SpawnSubagentChat)]
        return spawned

    def to_child(self) -> list[Any]:
        return [m for ref, m in self.sent if ref is CHILD]


def test_a_spawn_asks_the_chat_for_a_chat_of_its_own_and_marks_the_tool_call() -> None:
    s = Spawns()
    spawned = s.spawn()
    assert (spawned.parent_chat_id, spawned.tool_call_id, spawned.tracker) == ("c", "call", TRACKER)
    assert s.applied == [
        ToolCallSubagentStarted(turn_id="t", tool_call_id="call", subagent_chat_id=spawned.chat_id)
    ]


def test_what_the_subagent_streams_before_its_chat_runs_waits_and_then_goes_in_order() -> None:
    s = Spawns()
    s.spawn()
    s.subagents.event(ReplyDelta(turn_id="run", text="hi", subagent_id="sub"))
    assert s.sent == []
    s.subagents.started("sub", CHILD)
    start, deltas = s.to_child()
    assert isinstance(start, StartProviderTurn) and start.text == "look it up"
    assert isinstance(deltas, ApplyActions)
    assert [getattr(a, "text", None) for a in deltas.actions] == [None, "hi"]


def test_the_subagents_own_idle_ends_its_turn_once() -> None:
    s = Spawns()
    s.spawn()
    s.subagents.started("sub", CHILD)
    s.subagents.event(ReplyDelta(turn_id="run", text="done", subagent_id="sub"))
    s.subagents.event(ReplyMessage(turn_id="run", text="done", subagent_id="sub"))
    s.subagents.event(Idle(turn_id="run", subagent_id="sub"))
    s.subagents.event(Idle(turn_id="run", subagent_id="sub"))
    stable, end = s.to_child()[2:]
    assert isinstance(stable, AssistantStable) and stable.text == "done"
    assert isinstance(end, EndTurn) and isinstance(end.action, TurnCompleted)
    assert len(s.to_child()) == 4


def test_a_resolved_subagent_ends_with_its_parents_turn_and_a_background_one_runs_on() -> None:
    resolved, background = Spawns(), Spawns()
    resolved.spawn()
    background.spawn(background=True)
    for s in (resolved, background):
        s.subagents.started("sub", CHILD)
        s.subagents.tool_completed("call")
        s.subagents.end_with(s.turn, TurnCompleted(turn_id="t"))
    [end] = [m for m in resolved.to_child() if isinstance(m, EndTurn)]
    assert isinstance(end.action, TurnCompleted) and end.action.chat_id != "c"
    assert not [m for m in background.to_child() if isinstance(m, EndTurn)]


def test_a_cancel_of_the_parent_cancels_every_subagent_it_spawned() -> None:
    s = Spawns()
    s.spawn(background=True)
    s.subagents.started("sub", CHILD)
    s.subagents.end_with(s.turn, TurnCancelled(turn_id="t"))
    [end] = [m for m in s.to_child() if isinstance(m, EndTurn)]
    assert isinstance(end.action, TurnCancelled)


def test_a_dead_connection_fails_every_subagent() -> None:
    s = Spawns()
    s.spawn(background=True)
    s.subagents.started("sub", CHILD)
    error = AgentHostError(code=ErrorCode.EXECUTION_ABANDONED, message="gone")
    s.subagents.abandon(error)
    [end] = [m for m in s.to_child() if isinstance(m, EndTurn)]
    assert end.action == TurnFailed(
        session_id="s", chat_id=end.action.chat_id, turn_id=end.action.turn_id, error=error
    )


def test_a_subagent_that_ended_before_its_chat_ran_is_told_when_it_runs() -> None:
    s = Spawns()
    s.spawn()
    s.subagents.tool_completed("call")
    s.subagents.end_with(s.turn, TurnCompleted(turn_id="t"))
    assert s.sent == []
    s.subagents.started("sub", CHILD)
    start, end = s.to_child()
    assert isinstance(start, StartProviderTurn) and isinstance(end, EndTurn)
