"""Typed messages, state values and the pure reducers over them.

Belongs here: frozen, slotted, kw_only attrs values grouped by direction
(commands, events and session_events, provider protocol), state values
(state, parts, inputs, customizations, common), error codes, the pure
reducers (reducers, session_reducer), the wire conversion (wire), and AHP's
frames, methods and versions (protocol, rpc, versions). Invariants:
1. Nothing here imports the rest of agenthost, does I/O or holds a callable.
2. Every value is immutable; change it with `attrs.evolve`.
3. Reducers are pure: the same state and action give the same state.
4. What a newer peer sends survives: an unknown enum value, action type or
   union variant decodes and re-encodes as it came; a value that does not
   fit is a ValidationError naming its field.
"""

from agenthost.messages.commands import OutcomeState, TurnOutcome
from agenthost.messages.errors import AgentHostError, ErrorCode, JsonRpcErrorCode, ValidationError
from agenthost.messages.fields import Json
from agenthost.messages.reducers import reduce, reduce_chat
from agenthost.messages.state import (
    ActiveClient,
    ActiveTurn,
    ChatOrigin,
    ChatState,
    ChatStatus,
    ChatSummary,
    ClientTool,
    OpenRequest,
    PendingKind,
    PendingMessage,
    ReasoningPart,
    RequestKind,
    SessionLifecycle,
    SessionState,
    SessionSummary,
    ToolCall,
    ToolCallStatus,
    Turn,
    TurnState,
    UserMessage,
    Worktree,
)
from agenthost.messages.wire import from_wire, to_wire

__all__ = [
    "ActiveClient",
    "ActiveTurn",
    "AgentHostError",
    "ChatOrigin",
    "ChatState",
    "ChatStatus",
    "ChatSummary",
    "ClientTool",
    "ErrorCode",
    "Json",
    "JsonRpcErrorCode",
    "OpenRequest",
    "OutcomeState",
    "PendingKind",
    "PendingMessage",
    "ReasoningPart",
    "RequestKind",
    "SessionLifecycle",
    "SessionState",
    "SessionSummary",
    "ToolCall",
    "ToolCallStatus",
    "Turn",
    "TurnOutcome",
    "TurnState",
    "UserMessage",
    "ValidationError",
    "Worktree",
    "from_wire",
    "reduce",
    "reduce_chat",
    "to_wire",
]
