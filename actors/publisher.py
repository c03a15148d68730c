"""A chat's durable publisher, and the store writes its publication waits on.

Plain objects the ChatActor holds (its thread only).

Publication order is the reduction order. A turn's end reaches subscribers
(and resolves its send) only after the store committed it, and everything
reduced after it waits behind it: the outbox is FIFO. A new subscriber's
snapshot is the state as of the last action published, never ahead of it.

Read your writes: a client command's reply is held (`reply_when_published`)
until what it changed is published, so once the call returns, the chat's
state and any snapshot taken after it show its effect.
"""

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.handles import Subscription, Ticket
from agenthost.actors.protocol import WriteMany
from agenthost.messages.commands import OutcomeState, TurnOutcome
from agenthost.messages.errors import AgentHostError
from agenthost.messages.events import ChatEvent
from agenthost.messages.state import ChatState
from agenthost.store.records import SaveAssistantText, SaveTurnEnded, StoreOp


@attrs.define
class Publication:
    """One entry of the outbox, published once `after_write` is committed and
    everything ahead of it is published."""

    after_write: int  # the store write it waits for (0: none of its own)
    state: ChatState  # the chat state once it is applied
    event: ChatEvent | None = None
    ticket: Ticket | None = None  # a send whose turn this ends
    reply: RuntimeFuture | None = None  # a caller waiting to read its own write
    value: Any = None  # what `reply` is set to


class Publisher:
    """Publishes a chat's actions in reduction order (see the module docstring).

    What may be published at once (nothing waits ahead of it) is published as
    it comes, without an outbox entry; the events of one handler reach each
    subscriber in one push (`publish_ready`)."""

    def __init__(self, state: ChatState) -> None:
        self.published = state
        self.subscribers: list[Subscription] = []
        self.committed = 0
        self._outbox: deque[Publication] = deque()
        self._events: list[ChatEvent] = []  # published, to push
        self._settled: list[Publication] = []  # published, their tickets and replies to settle

    def add(self, publication: Publication) -> None:
        if self._outbox or publication.after_write > self.committed:
            self._outbox.append(publication)  # it waits behind a write, or behind what does
        else:
            self._published(publication)

    def event(self, event: ChatEvent, state: ChatState) -> None:
        """`add` of an event that waits for no write of its own (most of them: no
        outbox entry is made unless something waits ahead of it)."""
        if self._outbox:
            self._outbox.append(Publication(after_write=0, state=state, event=event))
            return
        self.published = state
        if self.subscribers:
            self._events.append(event)

    def events(self, events: Sequence[ChatEvent], state: ChatState) -> None:
        """`event` of each of a run reduced at once, all with the run's end state."""
        if self._outbox:
            for event in events:
                self._outbox.append(Publication(after_write=0, state=state, event=event))
            return
        self.published = state
        if self.subscribers:
            self._events.extend(events)

    def events_of(self, make: Callable[[], Sequence[ChatEvent]], state: ChatState) -> None:
        """`events`, the events made by `make` only if anyone is to get them."""
        if self._outbox or self.subscribers:
            self.events(make(), state)
        else:
            self.published = state

    def _published(self, publication: Publication) -> None:
        self.published = publication.state
        if publication.event is not None and self.subscribers:
            self._events.append(publication.event)
        if publication.ticket is not None or publication.reply is not None:
            self._settled.append(publication)

    def reply_when_published(self, value: Any, state: ChatState) -> Any:
        """`value` now if nothing waits to be published, else a future set to it
        once what was reduced before it is published."""
        if not self._outbox:
            return value
        future = RuntimeFuture()
        self._outbox.append(Publication(after_write=0, state=state, reply=future, value=value))
        return future

    def publish_ready(self) -> bool:
        """Publish what the store made durable, in order: events to the
        subscribers (one push each), then the sends whose turns ended, then the
        callers waiting to read their writes. Returns whether a subscriber left."""
        outbox = self._outbox
        committed = self.committed
        while outbox and outbox[0].after_write <= committed:
            self._published(outbox.popleft())
        left = False
        if self._events:
            events, self._events = self._events, []
            before = len(self.subscribers)
            published = self.published  # what these events lead to (a reader may keep it)
            self.subscribers = [s for s in self.subscribers if s.push_many(events, published)]
            left = len(self.subscribers) != before
        if self._settled:
            settled, self._settled = self._settled, []
            for publication in settled:
                if publication.ticket is not None:
                    publication.ticket.resolve(outcome_of(publication.ticket, publication.state))
            for publication in settled:
                if publication.reply is not None:
                    _settle(publication)
        return left

    def committed_upto(self, seq: int, error: AgentHostError | None) -> None:
        """The store committed the chat's writes up to `seq`, or (with `error`)
        failed to: those waiting on a turn's end of the failed batch hear it;
        publication goes on (holding it would wedge the chat)."""
        if error is not None:
            for publication in self._outbox:
                if self.committed < publication.after_write <= seq and publication.ticket:
                    publication.ticket.fail(error)
        self.committed = max(self.committed, seq)

    def waited_on(self) -> bool:
        """Whether a caller waits on something not yet published."""
        return any(p.ticket is not None or p.reply is not None for p in self._outbox)

    def attach(self, subscription: Subscription, snapshot: ChatEvent) -> None:
        subscription.push(snapshot)
        self.subscribers.append(subscription)

    def detach(self, subscription: Subscription) -> None:
        self.subscribers = [s for s in self.subscribers if s is not subscription]

    def stop(self, error: AgentHostError) -> None:
        """The chat stops: every caller still waiting hears `error`; subscribers close."""
        for publication in self._outbox:
            if publication.ticket is not None:
                publication.ticket.fail(error)
            if publication.reply is not None and not publication.reply.done():
                publication.reply.set_exception(exc_info=(AgentHostError, error, None))
        self._outbox.clear()
        for subscription in self.subscribers:
            subscription.close()


def _settle(publication: Publication) -> None:
    assert publication.reply is not None
    value = publication.value
    if isinstance(value, BaseException):
        publication.reply.set_exception(exc_info=(type(value), value, None))
    else:
        publication.reply.set(value)


def outcome_of(ticket: Ticket, state: ChatState) -> TurnOutcome:
    """A ticket's outcome, from the published state its turn's end produced."""
    for turn in reversed(state.turns):  # (the last, nearly always)
        if turn.id == ticket.turn_id:
            break
    else:
        return TurnOutcome(state=OutcomeState.ERROR, turn_id=ticket.turn_id)
    return TurnOutcome(
        state=OutcomeState(turn.state.value),
        text=turn.assistant_text,
        error=turn.error,
        turn_id=turn.id,
    )


@attrs.define
class StoreWrites:
    """A chat's store writes: those queued since the last flush, their numbering,
    and each running turn's text that became stable. They leave as one WriteMany,
    before anything else the chat sends."""

    ops: list[StoreOp] = attrs.field(factory=list)
    seq: int = 0
    gated: bool = False
    texts: bool = False  # a SaveAssistantText is queued
    stable: dict[str, list[str]] = attrs.field(factory=dict)

    def write(self, op: StoreOp, gate: bool = False) -> int:
        """Queue a write; a gated write's commit is acked. Returns its number."""
        self.seq += 1
        self.ops.append(op)
        self.gated = self.gated or gate
        if type(op) is SaveAssistantText:
            self.texts = True
        return self.seq

    def take(self, ack_to: Any, ack: Callable[[int], Any]) -> WriteMany | None:
        """The writes queued so far as one WriteMany (a turn's end carries its
        whole assistant text, so the text's own writes for it are dropped)."""
        if not self.ops:
            return None
        ops, self.ops = self.ops, []
        if self.texts:
            self.texts = False
            ended = {op.turn_id for op in ops if isinstance(op, SaveTurnEnded)}
            if ended:
                ops = [
                    op
                    for op in ops
                    if not (isinstance(op, SaveAssistantText) and op.turn_id in ended)
                ]
        gated, self.gated = self.gated, False
        if not gated:
            return WriteMany(ops=tuple(ops))
        return WriteMany(ops=tuple(ops), ack_to=ack_to, ack=ack(self.seq))
