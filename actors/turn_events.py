"""The chat actions the active turn's provider events make (tool calls, usage).

Pure functions over the tracker's record of the active turn (they note the
turn's tool calls on it); the tracker stamps and queues what they return.
A tool call that needs no permission is ready (confirmed "not-needed") as it
starts; one that needs it waits for the permission request that follows.
"""

from agenthost.actors.active_turn import ActiveTurn
from agenthost.messages.events import (
    ChatEvent,
    ToolCallCompleted,
    ToolCallReady,
    ToolCallStarted,
    UsageReported,
)
from agenthost.messages.provider import ToolCallCompleted as ProviderToolCallCompleted
from agenthost.messages.provider import ToolCallStarted as ProviderToolCallStarted
from agenthost.messages.provider import UsageUpdated
from agenthost.messages.state import Usage


def tool_started(turn: ActiveTurn, event: ProviderToolCallStarted) -> tuple[ChatEvent, ...]:
    turn.tool_calls[event.tool_call_id] = event.name
    started = ToolCallStarted(
        turn_id=turn.turn_id,
        tool_call_id=event.tool_call_id,
        tool_name=event.name,
        display_name=event.name,
    )
    if event.needs_permission:
        return (started,)
    ready = ToolCallReady(
        turn_id=turn.turn_id,
        tool_call_id=event.tool_call_id,
        invocation_message=event.name,
        tool_input=event.arguments,
        confirmed="not-needed",
    )
    return (started, ready)


def tool_completed(turn: ActiveTurn, event: ProviderToolCallCompleted) -> ToolCallCompleted:
    return ToolCallCompleted(
        turn_id=turn.turn_id, tool_call_id=event.tool_call_id, success=event.success
    )


def usage(turn: ActiveTurn, event: UsageUpdated) -> UsageReported:
    reported = Usage(prompt_tokens=event.prompt_tokens, completion_tokens=event.completion_tokens)
    return UsageReported(turn_id=turn.turn_id, usage=reported)
