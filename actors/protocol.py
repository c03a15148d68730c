"""Messages between agenthost's own actors (not part of the public surface).

Frozen values like everything in messages/; the only non-value fields are
actor refs (addresses), which are immutable handles.
"""

import enum
from typing import Any

import attrs
from pykka import ActorRef

from agenthost.actors.queue_policy import NextKind
from agenthost.messages.errors import AgentHostError
from agenthost.messages.events import ChatEvent, SessionEvent
from agenthost.messages.provider import Capabilities, ProviderEvent
from agenthost.messages.state import Attachment, ChatState, SessionState, Turn
from agenthost.store.records import SessionRecord, StoreOp

Ref = ActorRef[Any]


# -- store ----------------------------------------------------------------------
@attrs.frozen
class Write:
    """Apply `op`; after it is committed, tell `ack` to `ack_to` (if given)."""

    op: StoreOp
    ack_to: Ref | None = None
    ack: Any = None


@attrs.frozen
class WriteMany:
    """Apply `ops` in order, each alone (one failing is undone alone); after
    they are committed, tell `ack` to `ack_to` (if given), carrying an error
    if any of them failed."""

    ops: tuple[StoreOp, ...]
    ack_to: Ref | None = None
    ack: Any = None


@attrs.frozen
class LoadSession:
    session_id: str


@attrs.frozen
class ListSessionRows:
    pass


@attrs.frozen
class FindSession:
    """The stored summary of a session, by its id or by one of its chats."""

    session_id: str | None = None
    chat_id: str | None = None


@attrs.frozen
class LoadProviderRef:
    """The provider reference stored with a chat, answered to `reply_to` as
    ProviderRefLoaded (a tell: the asker is an actor that must not block)."""

    chat_id: str
    reply_to: Ref


@attrs.frozen
class ProviderRefLoaded:
    chat_id: str
    provider_ref: str | None
    error: AgentHostError | None = None


@attrs.frozen
class Flush:
    """Commit now and answer once committed (used by stop paths and tests)."""


# -- host / session ---------------------------------------------------------------
@attrs.frozen
class SessionSaved:
    session_id: str
    error: AgentHostError | None = None


@attrs.frozen
class AdoptSession:
    """Make a loaded session resident (the surface loaded it from the store)."""

    record: SessionRecord


@attrs.frozen
class SessionReady:
    session_id: str
    error: AgentHostError | None = None


@attrs.frozen
class ChatReady:
    chat_id: str
    error: AgentHostError | None = None


@attrs.frozen
class GetChat:
    chat_id: str | None = None


@attrs.frozen
class ListChats:
    pass


@attrs.frozen
class SubscribersChanged:
    """chat -> session: how many subscribers the chat has now."""

    chat_id: str
    count: int


@attrs.frozen
class SessionActivity:
    """session -> host (only while it bounds resident sessions): whether the session
    is idle (unwatched, no turn running), for releasing the least recently used."""

    session_id: str
    watched: bool
    active: bool
    unused_draft: bool


@attrs.frozen
class IdleTimerFired:
    """A session's idle timer fired (the session re-checks)."""

    session_id: str


@attrs.frozen
class GetCounters:
    """What an operator watches: releases, GC disposals, restarts, resume fallbacks."""


@attrs.frozen
class ResumeFellBack:
    """connection -> supervisor: a resume found no history and started afresh."""

    session_id: str


@attrs.frozen
class ImportRecord:
    """Make a whole session (imported, or forked) durable and resident."""

    record: SessionRecord


@attrs.frozen
class SessionDisposed:
    session_id: str
    error: AgentHostError | None = None


@attrs.frozen
class ReleaseIfIdle:
    """host -> session: release now if still idle; with `collect`, dispose it
    instead if it is still an unused draft. The session re-checks both."""

    collect: bool


@attrs.frozen
class PrepareRelease:
    """session -> chat: may the session leave memory (or, `collect`, be deleted)?
    A chat that agrees holds every client command until the answer is known."""

    collect: bool


@attrs.frozen
class ReleaseVote:
    chat_id: str
    ok: bool


@attrs.frozen
class ReleaseAborted:
    """session -> chat: it stays after all; run the commands held meanwhile."""


@attrs.frozen
class SessionReleased:
    """session -> host: it stopped; `disposed`: its rows were deleted too."""

    session_id: str
    disposed: bool


# -- chat <-> turn tracker -----------------------------------------------------------
@attrs.frozen
class BeginTurn:
    turn_id: str
    text: str
    history: tuple[Turn, ...] = ()
    instructions: str = ""
    model: str | None = None
    attachments: tuple[Attachment, ...] = ()


@attrs.frozen
class CancelActiveTurn:
    turn_id: str


@attrs.frozen
class ApplyActions:
    """Provider-derived actions for the chat to reduce and publish."""

    actions: tuple[ChatEvent, ...]


@attrs.frozen
class ChatBatch:
    """What a tracker queued for the chat until its flush, handled in one go and in order."""

    messages: tuple[object, ...]


@attrs.frozen
class AssistantStable:
    """Assistant text of the turn that became stable: persist it."""

    turn_id: str
    text: str


@attrs.frozen
class EndTurn:
    """The one way a turn ends: a terminal action from the tracker's end helper."""

    action: ChatEvent
    finish_reason: str | None = None


@attrs.frozen
class Committed:
    """The store committed the chat's writes up to this sequence number, or, with
    `error`, failed to: they are not durable."""

    seq: int
    error: AgentHostError | None = None


# -- turn tracker <-> provider connection / supervisor ----------------------------------
@attrs.frozen
class FromProvider:
    """A burst of a connection's events, in the order the adapter emitted them."""

    generation: int
    events: tuple[ProviderEvent, ...]


@attrs.frozen
class ConnectionReady:
    ref: Ref
    generation: int
    capabilities: Capabilities


@attrs.frozen
class ConnectionOpenFailed:
    generation: int
    error: AgentHostError


@attrs.frozen
class ConnectionLost:
    generation: int
    error: AgentHostError


@attrs.frozen
class ProviderUnavailable:
    error: AgentHostError


@attrs.frozen
class CoolDownEnded:
    """The supervisor starts an unavailable provider's connection again: the owner
    stops refusing turns (they wait for the connection, as after any restart)."""


@attrs.frozen
class OpenConnection:
    """Open a chat's provider session: its events go to `owner` (the tracker),
    the answers to steering calls to `steering` (the queue drain)."""

    session_id: str
    chat_id: str
    provider: str
    owner: Ref
    steering: Ref
    resume: bool


@attrs.frozen
class CloseConnection:
    """Close the connection of `owner` (a newer owner's connection stays)."""

    session_id: str
    chat_id: str
    owner: Ref


@attrs.frozen
class ConnectionDied:
    session_id: str
    chat_id: str
    generation: int
    error: AgentHostError


@attrs.frozen
class RestartConnection:
    session_id: str
    chat_id: str


@attrs.frozen
class OpenSession:
    """The call that opens (starts or resumes) a connection's provider session."""


@attrs.frozen
class CallDone:
    """A provider call finished on the loop: `call` is what started it (a
    ProviderSend, ProviderSteer, ... or OpenSession); its result or exception."""

    call: Any
    result: Any = None
    exception: BaseException | None = None


# -- requests and client tools ---------------------------------------------------------
@attrs.frozen
class AnswerSettled:
    """tracker -> chat: an answer was delivered (error None) or refused."""

    request_id: str
    error: AgentHostError | None = None


@attrs.frozen
class ClientToolsChanged:
    """session -> chat -> tracker: who executes which client tool (tool -> client id)."""

    owners: tuple[tuple[str, str], ...]


@attrs.frozen
class ClientRemoved:
    """session -> chat -> tracker: fail every call this client left parked."""

    client_id: str


@attrs.frozen
class Diagnose:
    """chat -> tracker: a diagnostic snapshot of the active turn, answered as Diagnosed."""


@attrs.frozen
class ProviderDiagnose:
    """tracker -> connection: ask the adapter for its view of a run."""

    turn_key: str


@attrs.frozen
class ProviderDiagnosed:
    """connection -> tracker: the adapter's view of a run."""

    generation: int
    turn_key: str
    details: tuple[tuple[str, str], ...]


@attrs.frozen
class ChatStatusChanged:
    """chat -> session: the chat's status (for the session's aggregate)."""

    chat_id: str
    status: int
    turns: int = 0


# -- subagents ----------------------------------------------------------------------
@attrs.frozen
class SpawnSubagentChat:
    """tracker -> chat -> session: start the chat of a subagent a tool call spawned."""

    subagent_id: str
    chat_id: str
    parent_chat_id: str
    tool_call_id: str
    tracker: Ref


@attrs.frozen
class SubagentChatStarted:
    """session -> tracker: the subagent's chat runs; here is where to send its events."""

    subagent_id: str
    ref: Ref


@attrs.frozen
class StartProviderTurn:
    """tracker -> a subagent's chat: the provider started a turn in it."""

    turn_id: str
    text: str


# -- queue drain and steering (actors/queue_drain.py, actors/steering.py) ------------
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


# -- contributions ----------------------------------------------------------------
@attrs.frozen
class ApplySessionAction:
    """A contribution's (host-origin) session action."""

    action: SessionEvent


@attrs.frozen
class SessionStateChanged:
    """session -> its chats: the session entry as it is now."""

    state: SessionState


# -- store: owners' listings and client ids -------------------------------------------
@attrs.frozen
class ListSessionPage:
    """A page of one owner's stored sessions (answered with a store SessionPage)."""

    owner: str
    limit: int
    after: str | None = None


@attrs.frozen
class ClaimClient:
    """Bind a client id to an identity unless another holds it; answered with the
    ClientBinding that holds, once it is committed."""

    client_id: str
    identity: str
    now_ms: int


@attrs.frozen
class FindClient:
    """The ClientBinding of a client id, or None."""

    client_id: str
