"""What the lifecycle machine knows of its chat, and the checks over it.

Plain objects, no actors: the machine feeds in what its calls answered and
what its subscriber saw; each check raises AssertionError naming the broken
rule. The rules (issue 23; DESIGN.md rules 1, 2 and 4):

- every send's handle resolves, once, to what became of its message;
- every started turn ends exactly once, no turn starts while another is
  active, and no turn id is used twice (across restarts too);
- no text is lost or duplicated: each sent or steered text is, exactly once,
  a turn's message, steering folded into a turn, or pending; or it left
  without a turn (removed, withdrawn, cancelled with its turn, rejected);
- a queued message starts only at the head of the queue, with its edited text,
  right after a turn that completed; a turn's origin says how its message came
  (queue_policy rule 5);
- the state reduced from a subscriber's snapshot and events equals `state()`;
- a restart restores every ended turn unchanged, no turn running, the pending
  messages (steering requeued at the head), and no session that was not made.
"""

import collections
from typing import Any

import attrs

from agenthost.actors import TurnHandle
from agenthost.actors.queue_policy import STEERING
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState, TurnState
from agenthost.messages.events import (
    TERMINAL_EVENTS,
    ChatEvent,
    ChatSnapshot,
    PendingMessageRemoved,
    RemovalReason,
    SteeringRecorded,
    TurnStarted,
)
from agenthost.messages.reducers import reduce_chat
from agenthost.messages.state import (
    ChatState,
    OriginKind,
    PendingKind,
    PendingMessage,
)

GONE = {
    RemovalReason.CLIENT: "removed",
    RemovalReason.WITHDRAWN: "withdrawn",
    RemovalReason.CANCELLED: "cancelled with its turn",
    RemovalReason.REJECTED: "rejected",
}


@attrs.define(eq=False)
class Sent:
    """A text a client sent or steered, and what became of it."""

    text: str  # as it is now (an edit changes it)
    steer: bool
    handle: TurnHandle | None = None  # a send's
    pending_id: str | None = None
    turn_id: str | None = None  # the turn it started, once it did
    gone: str | None = None  # why it left without a turn of its own
    stale: bool = False  # its handle is a stopped host's
    old_texts: list[str] = attrs.field(factory=list)


def normalized(state: ChatState) -> ChatState:
    """A state as two reductions of the same actions agree on it (the time of
    the last change is each reducer's own clock)."""
    return attrs.evolve(state, modified_at=0)


class Ledger:
    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.by_pending: dict[str, Sent] = {}
        self.started: dict[str, str] = {}  # turn id -> its message's text
        self.ended: collections.Counter[str] = collections.Counter()
        self.abandoned: set[str] = set()  # running when a host stopped
        self.state: ChatState | None = None  # the subscriber's reduction

    # -- what the machine did ------------------------------------------------------
    def sent_text(self, text: str, handle: TurnHandle) -> Sent:
        sent = Sent(text=text, steer=False, handle=handle, pending_id=handle.pending_id)
        if handle.id is not None:
            sent.turn_id = handle.id
        return self._add(sent)

    def steered(self, text: str, pending: PendingMessage) -> Sent:
        return self._add(Sent(text=text, steer=True, pending_id=pending.id))

    def _add(self, sent: Sent) -> Sent:
        self.sent.append(sent)
        if sent.pending_id is not None:
            self.by_pending[sent.pending_id] = sent
        return sent

    def edited(self, pending_id: str, text: str) -> None:
        sent = self.by_pending[pending_id]
        sent.old_texts.append(sent.text)
        sent.text = text

    def removed(self, pending_id: str) -> None:
        self.by_pending[pending_id].gone = "removed"

    def host_stopped(self) -> None:
        """Every handle so far is the old host's; the turn running is abandoned."""
        for sent in self.sent:
            sent.stale = True
        if self.state is not None and self.state.active_turn is not None:
            self.abandoned.add(self.state.active_turn.id)
        self.state = None

    # -- what the subscriber saw -------------------------------------------------------
    def observe(self, event: ChatEvent) -> None:
        if isinstance(event, ChatSnapshot):
            self.state = event.state
            return
        state = self.state
        assert state is not None, "an event before the snapshot"
        if isinstance(event, TurnStarted):
            self._turn_started(state, event)
        elif isinstance(event, TERMINAL_EVENTS):
            assert event.turn_id == state.active_turn_id, (
                f"turn {event.turn_id} ended while {state.active_turn_id} was the active one"
            )
            self.ended[event.turn_id] += 1
            assert self.ended[event.turn_id] == 1, f"turn {event.turn_id} ended twice"
        elif isinstance(event, PendingMessageRemoved) and event.reason in GONE:
            sent = self.by_pending.get(event.pending_id)
            if sent is not None:
                sent.gone = GONE[event.reason]
        elif isinstance(event, SteeringRecorded):
            sent = self.by_pending.get(event.pending.id)
            if sent is not None:
                sent.turn_id = event.turn_id
        self.state = reduce_chat(state, event)

    def _turn_started(self, state: ChatState, event: TurnStarted) -> None:
        turn_id = event.turn_id
        assert state.active_turn is None, (
            f"turn {turn_id} started while {state.active_turn_id} was running"
        )
        assert turn_id not in self.started, f"turn id {turn_id} used twice"
        self.started[turn_id] = event.message.text
        origin = event.message.origin.kind
        pending_id = event.queued_message_id
        if pending_id is None:
            assert origin is OriginKind.USER, f"a direct send's turn has origin {origin}"
            sent = next(
                (s for s in self.sent if s.text == event.message.text and s.turn_id is None), None
            )
            if sent is not None:
                sent.turn_id = turn_id
            return
        sent = self.by_pending.get(pending_id)
        queued = [m.id for m in state.queued_messages]
        if pending_id in queued:
            head = state.queued_messages[0]
            assert head.id == pending_id, (
                f"{pending_id} started ahead of the queue's head {head.id}"
            )
            assert event.message.text == head.text, "a queued message ran without its edit"
            assert state.turns and state.turns[-1].state is TurnState.COMPLETE, (
                f"queued {pending_id} started after a turn that did not complete"
            )
        if sent is not None:
            want = OriginKind.STEERING if sent.steer else OriginKind.QUEUED
            assert origin is want, (
                f"turn {turn_id} from {pending_id} has origin {origin}, not {want}"
            )
            sent.turn_id = turn_id

    # -- checks at a settled point ----------------------------------------------------
    def check_settled(self, published: ChatState) -> None:
        """`published` is `chat.state()` with nothing left to deliver."""
        assert self.state is not None
        assert normalized(self.state) == normalized(published), (
            "the subscriber's reduced state differs from state()"
        )
        self.check_texts(published)
        self.check_handles(published)

    def check_texts(self, state: ChatState) -> None:
        seen = collections.Counter(texts_in(state))
        for sent in self.sent:
            want = 0 if sent.gone else 1
            assert seen[sent.text] == want, (
                f"{sent.text!r} ({sent.gone or 'kept'}) is in the chat {seen[sent.text]} times"
            )
            for old in sent.old_texts:
                assert seen[old] == 0, f"{old!r} ran as it was before its edit"

    def check_handles(self, state: ChatState) -> None:
        turns = {t.id: t for t in state.turns}
        pending = {m.id for m in state.pending}
        for sent in self.sent:
            handle = sent.handle
            if handle is None:
                continue
            if sent.stale:
                assert handle.done(), f"a stopped host left {sent.text!r}'s handle unresolved"
                continue
            outcome = _outcome(handle)
            if sent.gone == "removed":
                assert outcome is not None and outcome.state is OutcomeState.REMOVED
            elif sent.turn_id in turns:
                turn = turns[sent.turn_id]
                assert outcome is not None, f"{sent.text!r}'s turn ended, its handle did not"
                assert outcome.state.value == turn.state.value, (
                    f"{sent.text!r}'s handle says {outcome.state}, its turn {turn.state}"
                )
            elif sent.pending_id in pending or sent.turn_id == state.active_turn_id:
                assert outcome is None, f"{sent.text!r} is not done, its handle is"

    def check_ended_once(self, state: ChatState) -> None:
        """With nothing running: every started turn ended exactly once."""
        assert state.active_turn is None
        ids = collections.Counter(t.id for t in state.turns)
        assert all(count == 1 for count in ids.values()), "a turn is listed twice"
        for turn_id in self.started:
            ended = self.ended[turn_id] + (turn_id in self.abandoned)
            assert ended == 1 or turn_id not in ids, f"turn {turn_id} ended {ended} times"


def texts_in(state: ChatState) -> list[str]:
    """Every text the chat holds: its turns' messages, steering folded into them,
    and its pending messages."""
    texts = []
    for turn in (*state.turns, state.active_turn):
        if turn is None:
            continue
        texts.append(turn.message.text)
        texts.extend(m.text for m in turn.steering)
    texts.extend(m.text for m in state.pending)
    return texts


def _outcome(handle: TurnHandle) -> Any:
    if not handle.done():
        return None
    try:
        return handle.result(timeout=0)
    except AgentHostError as error:
        return error


# -- a restart, and an idle release, restore what was stored ---------------------------------


def check_restored(before: ChatState, after: ChatState, *, running_allowed: bool) -> None:
    """`after` is the chat as reopened from the store that `before` was kept in."""
    assert after.active_turn is None, "a turn came back running"
    turns = before.turns
    if before.active_turn is not None:
        assert running_allowed, "a session left memory with a turn running"
        abandoned = after.turns[len(turns)] if len(after.turns) > len(turns) else None
        assert abandoned is not None and abandoned.id == before.active_turn.id
        assert abandoned.message == before.active_turn.message
        assert abandoned.state is TurnState.ERROR and abandoned.error is not None
        assert abandoned.error.code is ErrorCode.EXECUTION_ABANDONED
        assert len(after.turns) == len(turns) + 1
    else:
        assert len(after.turns) == len(turns), "turns were lost or made up"
    for stored, restored in zip(turns, after.turns, strict=False):
        assert restored == stored, f"turn {stored.id} came back changed:\n{stored}\n{restored}"
    expected = tuple(requeued(m) for m in before.steering_messages) + before.queued_messages
    assert after.steering_messages == ()
    assert after.queued_messages == expected, "the pending messages came back changed"


def requeued(pending: PendingMessage) -> PendingMessage:
    """A steering message restored with its chat: the head of the queue, still steering."""
    return attrs.evolve(
        pending,
        kind=PendingKind.QUEUED,
        message=attrs.evolve(pending.message, origin=STEERING),
    )
