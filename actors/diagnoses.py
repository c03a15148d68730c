"""Why the active turn is where it is: the host's view, and the provider's on top.

A plain object the turn tracker holds (its thread only). A diagnosis is the
host's snapshot of the turn, completed with the provider's own view when the
provider answers. Invariant: every caller gets an answer; when the provider
will not answer (no connection, or it died), the host's view alone.
"""

import attrs

from agenthost.actors.active_turn import ActiveTurn
from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.requests import ids_of
from agenthost.messages.commands import CallState, TurnDiagnostics
from agenthost.messages.provider import Settlement
from agenthost.messages.state import RequestKind


@attrs.frozen
class _Waiting:
    """A caller waiting for the provider's view, and the host's view it gets meanwhile."""

    future: RuntimeFuture
    snapshot: TurnDiagnostics


def snapshot(turn: ActiveTurn, now: float) -> TurnDiagnostics:
    """The host's view of `turn` at `now` (the host clock)."""
    requests = list(turn.requests.values())
    return TurnDiagnostics(
        turn_id=turn.turn_id,
        call_state=call_state(turn),
        provider_started=turn.own_echo_seen,
        parked_permissions=ids_of(requests, RequestKind.PERMISSION),
        parked_user_input=ids_of(requests, RequestKind.USER_INPUT),
        parked_client_tools=ids_of(requests, RequestKind.CLIENT_TOOL),
        quiet_s=now - turn.last_event_at,
    )


def call_state(turn: ActiveTurn) -> CallState:
    """Where the turn's send call is: not sent, waiting, or settled how."""
    if not turn.sent:
        return CallState.NOT_STARTED
    if turn.settled is None:
        return CallState.PENDING
    if turn.settled.settlement is Settlement.RESOLVED:
        return CallState.RESOLVED
    return CallState.REJECTED


class Diagnoses:
    def __init__(self) -> None:
        self._waiting: list[_Waiting] = []

    def wait(self, snapshot: TurnDiagnostics) -> RuntimeFuture:
        """A future for the diagnosis, once the provider answered (or will not)."""
        future = RuntimeFuture()
        self._waiting.append(_Waiting(future, snapshot))
        return future

    def answered(self, details: tuple[tuple[str, str], ...]) -> None:
        """The provider's view arrived: every waiting caller gets it."""
        waiting, self._waiting = self._waiting, []
        for entry in waiting:
            entry.future.set(attrs.evolve(entry.snapshot, provider=details))

    def unanswered(self) -> None:
        """The provider will not answer: every waiting caller gets the host's view."""
        waiting, self._waiting = self._waiting, []
        for entry in waiting:
            entry.future.set(entry.snapshot)
