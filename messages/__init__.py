"""Typed messages, state values and the pure reducers over them.

Belongs here: frozen, slotted, kw_only attrs values grouped by direction
(commands, events, provider protocol), state values, error codes, the pure
reducers and the wire conversion. Invariants:
1. Nothing here imports the rest of agenthost, does I/O or holds a callable.
2. Every value is immutable; change it with `attrs.evolve`.
3. Reducers are pure: the same state and action give the same state.
"""

from agenthost.messages.commands import OutcomeState, TurnOutcome
from agenthost.messages.errors import AgentHostError, ErrorCode
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
    "Worktree",
    "from_wire",
    "reduce",
    "reduce_chat",
    "to_wire",
]
