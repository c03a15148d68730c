"""The chat actions the active turn's provider events make (tool calls, usage).

Pure functions over the tracker's record of the active turn (they note the
turn's tool calls on it); the tracker stamps and queues what they return.
A tool call that needs no permission is ready (confirmed "not-needed") as it
starts; one that needs it waits for the permission request that follows. A
call whose input streams is started (status streaming, chat/toolCallDelta for
each piece) and is ready, or waits, once the provider starts it again whole.
A call of an MCP server (`mcp_server`) carries AHP's contributor {kind: mcp,
customizationId: the server}; the turn notes it while it runs, since only
such a call may wait for authentication (actors/tool_auth.py).

The chat's activity (chat/activityChanged) is what the host knows the turn is
doing: "Thinking" while reasoning streams, "Running <tool>" while a call that
needs no permission runs, "Preparing <tool>" while a call's input streams;
cleared by reply text, a call's end, a call that waits for permission (the
host is not told when it then runs) and the turn's end. The tracker sends it
only when it changes.
"""

from agenthost.actors.active_turn import ActiveTurn
from agenthost.messages.common import ContributorKind, ToolCallContributor
from agenthost.messages.events import (
    ChatEvent,
    ToolCallCompleted,
    ToolCallDelta,
    ToolCallReady,
    ToolCallStarted,
)
from agenthost.messages.provider import ToolCallCompleted as ProviderToolCallCompleted
from agenthost.messages.provider import ToolCallStarted as ProviderToolCallStarted
from agenthost.messages.provider import ToolInputDelta, UsageUpdated
from agenthost.messages.state import Usage


def tool_started(turn: ActiveTurn, event: ProviderToolCallStarted) -> tuple[ChatEvent, ...]:
    call_id = event.tool_call_id
    if call_id in turn.streaming_calls:  # its input is whole now: only ready follows
        started: tuple[ChatEvent, ...] = ()
        turn.streaming_calls.discard(call_id)
    else:
        turn.tool_calls[call_id] = event.name
        contributor = None
        if event.mcp_server is not None:
            contributor = ToolCallContributor(
                kind=ContributorKind.MCP, customization_id=event.mcp_server
            )
        started = (
            ToolCallStarted(
                turn_id=turn.turn_id,
                tool_call_id=call_id,
                tool_name=event.name,
                display_name=event.name,
                contributor=contributor,
            ),
        )
    if event.streaming:
        turn.streaming_calls.add(call_id)
        return started
    if event.mcp_server is not None:
        turn.running_mcp_calls.add(call_id)  # (once confirmed, where it asks first)
    if event.needs_permission:
        return started
    ready = ToolCallReady(
        turn_id=turn.turn_id,
        tool_call_id=event.tool_call_id,
        invocation_message=event.name,
        tool_input=event.arguments,
        confirmed="not-needed",
    )
    return (*started, ready)


def tool_input_delta(turn: ActiveTurn, event: ToolInputDelta) -> ToolCallDelta | None:
    """A piece of a streaming call's input; None for a call not streaming (the
    reducer would drop it too)."""
    if event.tool_call_id not in turn.streaming_calls:
        return None
    return ToolCallDelta(
        turn_id=turn.turn_id,
        tool_call_id=event.tool_call_id,
        content=event.content,
        invocation_message=event.invocation_message,
    )


def tool_completed(turn: ActiveTurn, event: ProviderToolCallCompleted) -> ToolCallCompleted:
    turn.running_mcp_calls.discard(event.tool_call_id)
    return ToolCallCompleted(
        turn_id=turn.turn_id, tool_call_id=event.tool_call_id, success=event.success
    )


def usage(event: UsageUpdated) -> Usage:
    """The turn's usage a provider's report gives (the chat gets it as UsageReported)."""
    return Usage(prompt_tokens=event.prompt_tokens, completion_tokens=event.completion_tokens)


THINKING = "Thinking"


def tool_activity(event: ProviderToolCallStarted) -> str | None:
    """The activity a call's start leaves the chat in (None: unknown, cleared)."""
    if event.streaming:
        return f"Preparing {event.name}"
    return None if event.needs_permission else f"Running {event.name}"
