"""Messages between agenthost's own actors (not part of the public surface).

Frozen values like everything in messages/; the only non-value fields are
actor refs (addresses), which are immutable handles.
"""

from typing import Any

import attrs
from pykka import ActorRef

from agenthost.actors.steering_messages import (  # noqa: F401  (re-exported)
    DrainNow,
    EchoMatched,
    Handled,
    HandOverSteering,
    MatchEcho,
    ProviderConnected,
    ProviderGone,
    RecordSteering,
    RemovalOutcome,
    RemoveSteering,
    RequeueSteering,
    RunCancelled,
    StartNext,
    StartSteeringTurn,
    SteeringCancelled,
    SteeringConsumed,
    SteeringHandled,
    SteeringRemovalSettled,
    TrackSteering,
    TurnEndedWithPending,
    Unpark,
    UseTracker,
)
from agenthost.messages.errors import AgentHostError
from agenthost.messages.events import AssistantDelta, ChatEvent, SessionEvent
from agenthost.messages.provider import Capabilities, ProviderEvent
from agenthost.messages.state import Attachment, SessionState, Turn
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
    """A stored session; with `acquire`, this shard takes its lease first and
    commits that before it answers (a store without a shard identity has none
    to take). Raises LEASE_HELD when another live shard holds it."""

    session_id: str
    acquire: bool = False


@attrs.frozen
class WatchLeases:
    """Tell `host` (LeasesLost) of sessions whose writes the store fenced."""

    host: Ref


@attrs.frozen
class LeasesLost:
    """The store fenced these sessions' writes: another shard holds them now, so
    this host drops them from memory (nothing is written)."""

    session_ids: tuple[str, ...]


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
    history_bytes: int = 0  # its chats', while the host bounds them


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
    Only a chat idle for `idle_for` seconds (on the host's clock) agrees; one that
    agrees holds every client command until the answer is known."""

    collect: bool
    idle_for: float = 0.0


@attrs.frozen
class ReleaseVote:
    """chat -> session. A refusal says why: `idle_since` (on the clock) when the
    chat is idle but not for long enough, `used` when a deletion was asked of a
    chat that holds turns or messages; neither: it is busy."""

    chat_id: str
    ok: bool
    idle_since: float | None = None
    used: bool = False


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
    """`parts`: how many response parts the turn has already (a resumed turn's
    new parts are numbered after them)."""

    turn_id: str
    text: str
    history: tuple[Turn, ...] = ()
    instructions: str = ""
    model: str | None = None
    attachments: tuple[Attachment, ...] = ()
    parts: int = 0


@attrs.frozen
class CancelActiveTurn:
    turn_id: str


@attrs.frozen(kw_only=True)
class DeltaRun:
    """Pieces of streamed text in a row to one markdown part: what a tracker
    queues for its chat instead of an AssistantDelta a piece. The chat reduces
    their joined text once and makes each piece's delta only for whoever takes
    them one by one (a subscriber, a contribution that observes deltas)."""

    session_id: str
    chat_id: str
    turn_id: str
    part_id: str
    texts: tuple[str, ...]

    def joined(self) -> AssistantDelta:
        return self._delta("".join(self.texts))

    def deltas(self) -> tuple[AssistantDelta, ...]:
        return tuple([self._delta(text) for text in self.texts])

    def _delta(self, text: str) -> AssistantDelta:
        return AssistantDelta(
            session_id=self.session_id,
            chat_id=self.chat_id,
            turn_id=self.turn_id,
            part_id=self.part_id,
            text=text,
        )


@attrs.frozen
class ApplyActions:
    """Provider-derived actions for the chat to reduce and publish."""

    actions: tuple[ChatEvent | DeltaRun, ...]


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
    """The one way a turn ends: a terminal action from the tracker's end helper.
    `stable`: the turn's text that became stable just before its end (an
    AssistantStable the tracker's outbox folded in: one message, and one store
    write, less)."""

    action: ChatEvent
    finish_reason: str | None = None
    stable: str = ""


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
    """chat -> session: the chat's status (for the session's aggregate). Sent on
    every change only while the session asked for them (ReportStatus); otherwise
    only on the chat's first turn (a draft is used from then on)."""

    chat_id: str
    status: int
    turns: int = 0
    history_bytes: int = 0  # while the host bounds resident history (Lifecycle)


@attrs.frozen
class ReportStatus:
    """session -> chat: from now on, report every status change; answer with the
    status now (a ChatStatusChanged)."""


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
class CountSessions:
    """How many stored sessions one owner owns (answered with an int)."""

    owner: str


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
