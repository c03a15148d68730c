"""ChatActor: one chat's state, changed only through the pure reducer.

It owns the chat state (turns, active turn, pending messages), the chat's
subscribers and the replies to sends. Provider work goes through its
TurnTrackerActor; the queue's drain decision through its QueueDrainActor.

Publication order is the reduction order, and a turn's end reaches
subscribers (and resolves its send) only after the store committed it: an
outbox holds events behind the write they depend on, and a new subscriber's
snapshot is the state as of the last event published, never ahead of it.
"""

import uuid
from collections import deque
from typing import Any

import attrs
import structlog

from agenthost.actors.context import Services
from agenthost.actors.handles import Subscription, Ticket
from agenthost.actors.hosted import HostedActor
from agenthost.actors.protocol import (
    ApplyActions,
    AssistantStable,
    BeginTurn,
    CancelActiveTurn,
    ChatReady,
    Committed,
    EndTurn,
    ProposeDrain,
    Ref,
    StartQueued,
    Write,
)
from agenthost.actors.queue_drain import QueueDrainActor
from agenthost.actors.runtime import handles
from agenthost.actors.turn_tracker import TurnTrackerActor
from agenthost.messages.commands import (
    CancelTurn,
    GetChatState,
    OutcomeState,
    SendMessage,
    TurnOutcome,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    ChatEvent,
    ChatSnapshot,
    PendingMessageAdded,
    TurnFailed,
    TurnStarted,
)
from agenthost.messages.reducers import reduce_chat
from agenthost.messages.state import ChatState, PendingKind, PendingMessage, UserMessage
from agenthost.store.records import (
    DeletePending,
    SaveAssistantText,
    SavePending,
    SaveTurnEnded,
    SaveTurnStarted,
    StoreOp,
)

log = structlog.get_logger(__name__)


@attrs.frozen
class Attach:
    """Add a subscriber; the reply is its snapshot (already queued to it)."""

    subscription: Subscription


@attrs.frozen
class Detach:
    subscription: Subscription


def new_id() -> str:
    return uuid.uuid4().hex


class ChatActor(HostedActor):
    def __init__(
        self,
        services: Services,
        *,
        session_id: str,
        chat_id: str,
        provider: str,
        state: ChatState,
        session: Ref,
        resume: bool,
    ) -> None:
        super().__init__(services)
        self.session_id = session_id
        self.chat_id = chat_id
        self.provider = provider
        self.session = session
        self.resume = resume
        self._state = state
        self._published = state
        self._subscribers: list[Subscription] = []
        # (commit seq it waits for, event or None, state after it, ticket to resolve)
        self._outbox: deque[tuple[int, ChatEvent | None, ChatState, Any]] = deque()
        self._write_seq = 0
        self._committed = 0
        self._tickets: dict[str, Ticket] = {}
        self._stable: dict[str, list[str]] = {}
        self._turn_seq = len(state.turns)
        self._tracker: Ref | None = None
        self._drain: Ref | None = None
        self._log = log.bind(session_id=session_id, chat_id=chat_id)

    def on_start(self) -> None:
        self._tracker = TurnTrackerActor.start(
            self.services,
            session_id=self.session_id,
            chat_id=self.chat_id,
            provider=self.provider,
            chat=self.actor_ref,
            resume=self.resume,
        )
        self._drain = QueueDrainActor.start(self.services, chat=self.actor_ref)

    def on_stop(self) -> None:
        for child in (self._drain, self._tracker):
            if child is not None and child.is_alive():
                child.stop(block=False)
        stopped = AgentHostError(
            code=ErrorCode.HOST_STOPPED, message="The host stopped before this turn ended."
        )
        for ticket in self._tickets.values():
            ticket.fail(stopped)
        for _, _, _, ticket in self._outbox:
            if ticket is not None:
                ticket.fail(stopped)
        for subscription in self._subscribers:
            subscription.close()

    # -- state, persistence, publication -----------------------------------------------------
    def _apply(self, action: ChatEvent, after_write: int = 0, ticket: Any = None) -> None:
        self._state = reduce_chat(self._state, action, self.services.clock.wall_ms())
        self._outbox.append((after_write, action, self._state, ticket))
        self._publish_ready()

    def _write(self, op: StoreOp, gate: bool = False) -> int:
        self._write_seq += 1
        seq = self._write_seq
        self.send(
            self.services.store,
            Write(op=op, ack_to=self.actor_ref if gate else None, ack=Committed(seq=seq)),
        )
        return seq

    def _publish_ready(self) -> None:
        outbox = self._outbox
        while outbox and outbox[0][0] <= self._committed:
            _, event, state_after, ticket = outbox.popleft()
            self._published = state_after
            if event is not None and self._subscribers:
                self._subscribers = [s for s in self._subscribers if s.push(event)]
            if ticket is not None:
                ticket.resolve(self._outcome(ticket))

    def _outcome(self, ticket: Ticket) -> TurnOutcome:
        turn = next((t for t in reversed(self._published.turns) if t.id == ticket.turn_id), None)
        if turn is None:
            return TurnOutcome(state=OutcomeState.ERROR, turn_id=ticket.turn_id)
        return TurnOutcome(
            state=OutcomeState(turn.state.value),
            text=turn.assistant_text,
            error=turn.error,
            turn_id=turn.id,
        )

    @handles(Committed)
    def _committed_ack(self, message: Committed) -> None:
        self._committed = max(self._committed, message.seq)
        self._publish_ready()

    # -- client commands ---------------------------------------------------------------------
    @handles(SendMessage)
    def _send(self, message: SendMessage) -> Ticket:
        if self._state.active_turn is None:
            ticket = Ticket()
            self._start_turn(message.text, ticket, None)
            return ticket
        pending = PendingMessage(
            id=new_id(), kind=PendingKind.QUEUED, message=UserMessage(text=message.text)
        )
        ticket = Ticket(pending_id=pending.id)
        self._tickets[pending.id] = ticket
        self._apply(self._stamp(PendingMessageAdded(pending=pending)))
        self._write(
            SavePending(
                session_id=self.session_id,
                chat_id=self.chat_id,
                pending=pending,
                position=len(self._state.queued_messages),
            )
        )
        return ticket

    def _start_turn(self, text: str, ticket: Ticket | None, queued_id: str | None) -> str:
        turn_id = new_id()
        history = self._state.turns
        self._apply(
            self._stamp(
                TurnStarted(
                    turn_id=turn_id, message=UserMessage(text=text), queued_message_id=queued_id
                )
            )
        )
        if ticket is not None:
            ticket.started(turn_id)
            self._tickets[turn_id] = ticket
        if queued_id is not None:
            self._write(DeletePending(pending_id=queued_id))
        self._write(
            SaveTurnStarted(
                session_id=self.session_id,
                chat_id=self.chat_id,
                turn_id=turn_id,
                seq=self._turn_seq,
                user_text=text,
                started_at=self.services.clock.wall_ms(),
            )
        )
        self._turn_seq += 1
        self._stable[turn_id] = []
        self.send(self._tracker, BeginTurn(turn_id=turn_id, text=text, history=history))
        return turn_id

    @handles(CancelTurn)
    def _cancel(self, message: CancelTurn) -> bool:
        active = self._state.active_turn
        if active is None:
            return False
        self.send(self._tracker, CancelActiveTurn(turn_id=active.id))
        return True

    @handles(GetChatState)
    def _get_state(self, message: GetChatState) -> ChatState:
        return self._published

    @handles(Attach)
    def _attach(self, message: Attach) -> ChatSnapshot:
        snapshot = self._stamp(ChatSnapshot(state=self._published))
        message.subscription.push(snapshot)
        self._subscribers.append(message.subscription)
        return snapshot

    @handles(Detach)
    def _detach(self, message: Detach) -> None:
        self._subscribers = [s for s in self._subscribers if s is not message.subscription]

    # -- from the turn tracker -----------------------------------------------------------------
    @handles(ChatReady)
    def _chat_ready(self, message: ChatReady) -> None:
        self.send(self.session, message)

    @handles(ApplyActions)
    def _apply_actions(self, message: ApplyActions) -> None:
        for action in message.actions:
            self._apply(action)

    @handles(AssistantStable)
    def _assistant_stable(self, message: AssistantStable) -> None:
        stable = self._stable.get(message.turn_id)
        if stable is None:
            return
        stable.append(message.text)
        self._write(SaveAssistantText(turn_id=message.turn_id, text="".join(stable)))

    @handles(EndTurn)
    def _end_turn(self, message: EndTurn) -> None:
        action = message.action
        turn_id: str = action.turn_id  # type: ignore[attr-defined]
        if self._state.active_turn_id != turn_id:
            self._log.info("turn_end_ignored", turn_id=turn_id, reason="not active")
            return
        stable = "".join(self._stable.pop(turn_id, []))
        self._state = reduce_chat(self._state, action, self.services.clock.wall_ms())
        turn = self._state.turns[-1]
        seq = self._write(
            SaveTurnEnded(
                turn_id=turn_id,
                state=turn.state,
                assistant_text=stable,
                ended_at=self.services.clock.wall_ms(),
                error=action.error if isinstance(action, TurnFailed) else None,
                finish_reason=message.finish_reason,
            ),
            gate=True,
        )
        self._outbox.append((seq, action, self._state, self._tickets.pop(turn_id, None)))
        self._log.info(
            "turn_ended",
            turn_id=turn_id,
            outcome=turn.state.value,
            error=None if turn.error is None else turn.error.code.value,
            assistant_chars=len(stable),
        )
        self._publish_ready()
        if self._state.queued_messages:
            self.send(
                self._drain,
                ProposeDrain(
                    last_turn_state=turn.state.value,
                    queued_ids=tuple(m.id for m in self._state.queued_messages),
                    active=False,
                ),
            )

    @handles(StartQueued)
    def _start_queued(self, message: StartQueued) -> None:
        if self._state.active_turn is not None:
            return
        pending = next((m for m in self._state.queued_messages if m.id == message.pending_id), None)
        if pending is None:
            return
        self._start_turn(pending.text, self._tickets.pop(pending.id, None), pending.id)

    def _stamp(self, event: Any) -> Any:
        return attrs.evolve(event, session_id=self.session_id, chat_id=self.chat_id)
