"""Messages of the queue drain and its steering ledger with the chat and the turn
tracker (actors/queue_drain.py, actors/steering.py); actors/protocol.py
re-exports them with the rest of the actors' messages.

Frozen values like everything in messages/; the only non-value fields are
actor refs (addresses), which are immutable handles.
"""

import enum
from typing import Any

import attrs
from pykka import ActorRef

from agenthost.actors.queue_policy import NextKind
from agenthost.messages.provider import ProviderEvent
from agenthost.messages.state import ChatState

Ref = ActorRef[Any]


@attrs.frozen
class TrackSteering:
    """chat -> queue drain: a client steered; the tracker is handing it over."""

    pending_id: str
    text: str


@attrs.frozen
class HandOverSteering:
    """chat -> tracker: hand this steering message to the provider (after the turn
    it is for was sent), or hold it where the provider takes no input mid-turn.
    `for_turn`: the turn that ran when the client sent it (None: none did)."""

    pending_id: str
    text: str
    for_turn: str | None = None


class Handled(enum.Enum):
    """tracker -> queue drain: what became of a steering message it was given."""

    HANDED = "handed"  # sent to the provider
    HELD = "held"  # the provider takes no input mid-turn: it runs as the next turn
    CANCELLED = "cancelled"  # meant for a turn a cancel ended
    REQUEUED = "requeued"  # the connection was lost before it could be handed over
    DROPPED = "dropped"  # a client removed it before it was handed over (`Unpark`)


@attrs.frozen
class SteeringHandled:
    pending_id: str
    how: Handled


@attrs.frozen
class UseTracker:
    """chat -> queue drain: its tracker (started after it)."""

    tracker: Ref


@attrs.frozen
class Unpark:
    """queue drain -> tracker: a client removes this steering message; drop it if it
    was not handed over yet (reported DROPPED; otherwise its earlier report stands)."""

    pending_id: str


@attrs.frozen
class ProviderConnected:
    """tracker -> queue drain: where withdraws go, and whether the provider can withdraw."""

    ref: Ref
    generation: int
    can_withdraw: bool


@attrs.frozen
class ProviderGone:
    """tracker -> queue drain: the provider that had the steering is gone."""


@attrs.frozen
class RunCancelled:
    """tracker -> queue drain: a cancel ended the provider's run; its steering goes too."""


@attrs.frozen
class MatchEcho:
    """tracker -> queue drain: which steering message did this echo consume? The
    tracker holds the provider's later events until it knows."""

    token: int
    echo: ProviderEvent
    reply_to: Ref


@attrs.frozen
class SteeringConsumed:
    """tracker -> queue drain: it applied the echo that consumed this message."""

    pending_id: str


@attrs.frozen
class EchoMatched:
    """queue drain -> tracker: the answer (pending_id None: none; the echo is foreign)."""

    token: int
    pending_id: str | None = None
    text: str = ""


@attrs.frozen
class RemoveSteering:
    """chat -> queue drain: a client removes a steering message."""

    pending_id: str


class RemovalOutcome(enum.StrEnum):
    DROPPED = "dropped"  # never reached the provider: simply removed
    WITHDRAWN = "withdrawn"  # the provider gave it back (removed: true)
    NOT_WITHDRAWN = "not_withdrawn"  # the model had it (removed: false)
    REJECTED = "rejected"  # the provider cannot withdraw
    GONE = "gone"  # no longer pending (consumed meanwhile)


@attrs.frozen
class SteeringRemovalSettled:
    """queue drain -> chat: how a client's removal of steering ended."""

    pending_id: str
    outcome: RemovalOutcome


@attrs.frozen
class SteeringCancelled:
    """queue drain -> chat: a cancel ended the turn these were for. The host's own
    removal: never a withdraw."""

    pending_ids: tuple[str, ...]


@attrs.frozen
class RequeueSteering:
    """queue drain -> chat: the provider could not take it; it heads the queue."""

    pending_id: str


@attrs.frozen
class RecordSteering:
    """tracker -> chat: the provider folded it into the running turn."""

    turn_id: str
    pending_id: str
    text: str


@attrs.frozen
class StartSteeringTurn:
    """tracker -> chat: the provider started a new turn for this steering message."""

    turn_id: str
    pending_id: str
    text: str


@attrs.frozen
class DrainNow:
    """chat -> queue drain: the chat may be idle with messages pending; its state now."""

    state: ChatState


@attrs.frozen
class TurnEndedWithPending:
    """(the queue_drain contribution) -> queue drain: a turn ended while messages
    were pending. A success releases a held queue (and drains when `drain`); any
    other end holds it."""

    state: ChatState
    succeeded: bool | None  # None: a local command or a refusal (no change)
    drain: bool


@attrs.frozen
class StartNext:
    """queue drain -> chat: start this pending message now (the chat re-checks)."""

    kind: NextKind
    pending_id: str
    text: str = ""
