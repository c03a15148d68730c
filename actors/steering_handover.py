"""Steering the queue drain handed the tracker, until the provider has it.

A plain object the turn tracker holds (its thread only). The tracker calls
`hand_over` once there is a connection and the active turn (if any) was sent;
every message is reported to the queue drain once, through `report`, before
anything about it reaches the provider. Rules (DESIGN.md rule 1):
1. Steering never overtakes its turn: it waits here until `hand_over`.
2. Where the provider takes no input mid-turn, a message is held (reported
   HELD) and never sent to it.
3. A message a client removes before it was handed over is dropped, never sent.
4. A message meant for the turn a cancel ended, arriving after the cancel, is
   reported CANCELLED (the provider drops its steering with the run).
5. Whatever waits when the connection dies goes back to the queue (REQUEUED);
   when the user cancels, it is cancelled with the run.
"""

from collections.abc import Callable

from agenthost.actors.protocol import Handled, HandOverSteering
from agenthost.messages.provider import ProviderSteer

Report = Callable[[str, Handled], None]
"""`report(pending_id, how)`: a SteeringHandled for the queue drain."""
Steer = Callable[[ProviderSteer], None]
"""Send a ProviderSteer to the connection."""


class SteeringHandOver:
    def __init__(self, session_id: str, chat_id: str, report: Report, steer: Steer) -> None:
        self._session_id = session_id
        self._chat_id = chat_id
        self._report = report
        self._steer = steer
        self._parked: list[HandOverSteering] = []
        self.cancelled: str | None = None  # the last turn, if a cancel ended it

    @property
    def parked(self) -> tuple[str, ...]:
        """The pending ids waiting to be handed over, in order."""
        return tuple(h.pending_id for h in self._parked)

    def take(self, message: HandOverSteering) -> None:
        """Park a message from the queue drain (rule 4 first)."""
        if message.for_turn is not None and message.for_turn == self.cancelled:
            self._report(message.pending_id, Handled.CANCELLED)
            return
        self._parked.append(message)

    def hand_over(self, key: str, accepts_steering: bool) -> None:
        """Everything parked goes to the provider's run `key`, or is held (rule 2)."""
        parked, self._parked = self._parked, []
        for hand_over in parked:
            if not accepts_steering:
                self._report(hand_over.pending_id, Handled.HELD)
                continue
            self._report(hand_over.pending_id, Handled.HANDED)  # the drain hears it first
            self._steer(
                ProviderSteer(
                    session_id=self._session_id,
                    chat_id=self._chat_id,
                    turn_id=key,
                    pending_id=hand_over.pending_id,
                    text=hand_over.text,
                )
            )

    def unpark(self, pending_id: str) -> None:
        """A client removed it: dropped if it was not handed over yet (rule 3)."""
        kept = [h for h in self._parked if h.pending_id != pending_id]
        if len(kept) < len(self._parked):
            self._parked = kept
            self._report(pending_id, Handled.DROPPED)

    def give_back(self, how: Handled) -> None:
        """Everything parked is reported `how` and forgotten (rule 5)."""
        parked, self._parked = self._parked, []
        for hand_over in parked:
            self._report(hand_over.pending_id, how)
