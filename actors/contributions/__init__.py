"""Contributions: cross-cutting chat behaviour in lifecycle hooks, so the chat
and session actors stay routing and invariants only.

Seven hooks (see `Contribution`): on_incoming_request (synchronous, fails
closed, first non-accept wins), on_turn_end, on_did_apply_client_action,
on_did_dispatch_action, on_outgoing_turn, on_hydrate_turns, on_hydrate_chat.
Built-ins are registered in builtin.py; users add theirs with
`Host.start(..., contributions=[MyContribution])`. Each is one of a session's
customizations (customizations.py): a session may turn one off for itself
(unless it is `required`), and then none of its hooks run for that session.
"""

from agenthost.actors.contributions.base import (
    ACCEPT,
    Accept,
    ChatKey,
    ClientAction,
    Command,
    Contribution,
    Dispatch,
    Handled,
    IncomingRequest,
    Outgoing,
    OutgoingTurn,
    Reject,
    RequestKind,
    RequestSource,
    TurnEnd,
    TurnEndReason,
    Verdict,
)
from agenthost.actors.contributions.dispatcher import (
    ContributionError,
    Dispatcher,
    OutgoingResult,
    build_dispatcher,
    check_ids,
)
from agenthost.actors.contributions.services import (
    Chats,
    MementoCache,
    Mementos,
    Sessions,
    injectable,
)

__all__ = [
    "ACCEPT",
    "Accept",
    "ChatKey",
    "Chats",
    "ClientAction",
    "Command",
    "Contribution",
    "ContributionError",
    "Dispatch",
    "Dispatcher",
    "Handled",
    "IncomingRequest",
    "MementoCache",
    "Mementos",
    "Outgoing",
    "OutgoingResult",
    "OutgoingTurn",
    "Reject",
    "RequestKind",
    "RequestSource",
    "Sessions",
    "TurnEnd",
    "TurnEndReason",
    "Verdict",
    "build_dispatcher",
    "check_ids",
    "injectable",
]
