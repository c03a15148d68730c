"""How a turn ends when its send call settled while the turn is still active
(DESIGN.md rule 2), as a pure function of the tracker's record of the turn.

- resolved: for a provider whose call settles with its turn, its completion
  was lost: complete; otherwise the call only said the provider took the turn,
  and the turn goes on;
- rejected with the provider's error: the provider took the turn, which keeps
  its own error;
- refused before it took the turn (not started, or rejected without taking
  it): execution_abandoned, in the provider's own words where it gave any.
Never while a request the user can see or the provider tracks is open.
"""

from agenthost.actors.active_turn import ActiveTurn
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import TurnCompleted, TurnFailed
from agenthost.messages.provider import Settlement

NEVER_STARTED = "The provider never started this turn."


def settled_end(
    turn: ActiveTurn, call_settles_with_turn: bool
) -> TurnCompleted | TurnFailed | None:
    """The end the settled call gives `turn` (unstamped), or None: it goes on."""
    settled = turn.settled
    if settled is None or turn.requests:
        return None
    if settled.settlement is Settlement.RESOLVED:
        return TurnCompleted(turn_id=turn.turn_id) if call_settles_with_turn else None
    if settled.settlement is Settlement.REJECTED and settled.error is not None:
        error = settled.error  # the provider took the turn: it keeps its own error
    elif settled.error is not None:
        # Refused before it took the turn: abandoned, in the provider's own words.
        error = AgentHostError(code=ErrorCode.EXECUTION_ABANDONED, message=settled.error.message)
    else:
        error = AgentHostError(code=ErrorCode.EXECUTION_ABANDONED, message=NEVER_STARTED)
    return TurnFailed(turn_id=turn.turn_id, error=error)
