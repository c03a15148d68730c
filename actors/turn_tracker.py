"""TurnTrackerActor: the active turn's stage and the provider stream, one per chat.

It is the single consumer of its provider connection's event stream and the
single sender of the chat's calls to the provider, so it owns what the
stream is matched against: the active turn (actors/active_turn.py), its
requests (actors/requests.py) and its subagents (actors/subagents.py). Plain
objects it holds do the rest: what goes to the chat (actors/chat_outbox.py),
steering on its way to the provider (actors/steering_handover.py), the
actions of tool calls and usage (actors/turn_events.py), the end a settled
call gives a turn (actors/settlement.py) and diagnoses (actors/diagnoses.py).

Turn ends. Every host-side end goes through `_end`, which checks that the
turn is still active, flushes the assistant text that never became stable,
and drops the per-turn record (DESIGN.md rules 2 and 3):
- idle (the provider's terminal signal) -> complete;
- the send call settles while the turn is still active -> as
  actors/settlement.py says (a lost completion, the provider's own error, or
  execution_abandoned). No wall clock ever ends a turn;
- the connection dies -> execution_abandoned; the provider is unavailable ->
  provider_unavailable; the user cancels -> cancelled.

Steering (DESIGN.md rule 1). The chat's queue drain keeps the steering
ledger; the tracker hands each message to the provider once the turn it is
for was sent (steering never overtakes its turn), or holds it where the
provider takes no input mid-turn, and reports which to the queue drain. An
echo that is not the turn's own message is matched by the queue drain;
meanwhile the tracker holds the provider's later events, so a steering
message the provider starts a turn for (copilot) owns the deltas after it,
and one it folds into the running turn (claude, codex) is recorded there.
"""

import functools
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from agenthost.actors import diagnoses, settlement, tool_auth, turn_events
from agenthost.actors.active_turn import ActiveTurn, AssistantStream
from agenthost.actors.chat_outbox import ChatOutbox
from agenthost.actors.context import Services
from agenthost.actors.diagnoses import Diagnoses
from agenthost.actors.echo_stall import EchoStall, Held, TextRun, text_runs
from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.hosted import HostedActor
from agenthost.actors.protocol import (
    AnswerSettled,
    BeginTurn,
    CancelActiveTurn,
    ChatReady,
    ClientRemoved,
    ClientToolsChanged,
    CloseConnection,
    ConnectionLost,
    ConnectionOpenFailed,
    ConnectionReady,
    CoolDownEnded,
    Diagnose,
    EchoMatched,
    EndTurn,
    FromProvider,
    Handled,
    HandOverSteering,
    MatchEcho,
    OpenConnection,
    ProviderConnected,
    ProviderDiagnose,
    ProviderDiagnosed,
    ProviderGone,
    ProviderUnavailable,
    RecordSteering,
    Ref,
    RunCancelled,
    StartSteeringTurn,
    SteeringConsumed,
    SteeringHandled,
    SubagentChatStarted,
    Unpark,
)
from agenthost.actors.requests import RequestDesk
from agenthost.actors.runtime import Actor, handles
from agenthost.actors.steering_handover import SteeringHandOver
from agenthost.actors.subagents import Subagents
from agenthost.messages.commands import (
    AnswerRequest,
    ChangeToolContent,
    ConfirmToolResult,
    SupplyToken,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    ActivityChanged,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    UsageReported,
)
from agenthost.messages.ids import new_id
from agenthost.messages.provider import (
    CallSettled,
    Capabilities,
    HostRequestOpened,
    Idle,
    ProviderAnswer,
    ProviderCancel,
    ProviderEvent,
    ProviderSteer,
    ReplyDelta,
    ReplyMessage,
    ReplyReasoning,
    SubagentStarted,
    ToolInputDelta,
    UsageUpdated,
    UserMessageEcho,
)
from agenthost.messages.provider import ToolCallCompleted as ProviderToolCallCompleted
from agenthost.messages.provider import ToolCallStarted as ProviderToolCallStarted

log = structlog.get_logger(__name__)

Terminal = TurnCompleted | TurnCancelled | TurnFailed

_SUBAGENT_STREAM = frozenset({ReplyDelta, ReplyReasoning, ReplyMessage, Idle})
"""Provider events that, with a `subagent_id`, belong to that subagent's chat."""


_NOT_HELD = (EchoMatched, Diagnose)
"""What a stall never holds: the match it waits for, and reads. (The news that the
connection died is held too: the echo came first, and is applied first.)"""


class TurnTrackerActor(HostedActor):
    def __init__(
        self,
        services: Services,
        *,
        session_id: str,
        chat_id: str,
        provider: str,
        chat: Ref,
        drain: Ref,
        resume: bool,
        client_tools: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(services)
        self.session_id = session_id
        self.chat_id = chat_id
        self.provider = provider
        self.chat = chat
        self.drain = drain
        self.resume = resume
        self._conn: Ref | None = None
        self._generation = -1
        self._capabilities: Capabilities | None = None
        self._unavailable: AgentHostError | None = None
        self._announced = False
        self._turn: ActiveTurn | None = None
        self._last_key = ""
        self._stall = EchoStall()
        self._log = log.bind(session_id=session_id, chat_id=chat_id)
        self._out = ChatOutbox(session_id, chat_id, functools.partial(Actor.send, chat))
        self._steering = SteeringHandOver(session_id, chat_id, self._report, self._steer)
        self._desk = RequestDesk(
            dict(client_tools), self._answer_provider, self._out.apply, self._log
        )
        self._subagents = Subagents(
            session_id, chat_id, self.actor_ref, self._out.message, self._out.apply, self.send
        )
        self._diagnoses = Diagnoses()

    # -- what goes to the chat ------------------------------------------------------------
    def flush(self) -> None:
        """What the messages handled since the last flush made for the chat goes
        to it as one message."""
        self._out.flush()

    def send(self, ref: Ref | None, message: Any) -> bool:  # type: ignore[override]
        """Tell `ref`, after what is queued for the chat: whatever `ref` does
        about it then reaches the chat behind those (causal order holds)."""
        self._out.flush()
        return Actor.send(ref, message)

    def _failed(self, turn_id: str, error: AgentHostError) -> TurnFailed:
        return self._out.stamp(TurnFailed(turn_id=turn_id, error=error))

    # -- the connection ---------------------------------------------------------------
    def on_start(self) -> None:
        self.send(
            self.services.supervisor,
            OpenConnection(
                session_id=self.session_id,
                chat_id=self.chat_id,
                provider=self.provider,
                owner=self.actor_ref,
                steering=self.drain,
                resume=self.resume,
            ),
        )

    def on_stop(self) -> None:
        self.send(
            self.services.supervisor,
            CloseConnection(session_id=self.session_id, chat_id=self.chat_id, owner=self.actor_ref),
        )
        self._diagnoses.unanswered()

    def after_stop(self) -> None:
        # These helpers hold the tracker's bound methods: let them go, so a stopped
        # tracker is freed at once instead of waiting, a reference cycle, for the
        # rare full collection (actors/collector.py). No handler runs after stop.
        del self._steering, self._desk, self._subagents
        super().after_stop()

    @handles(ConnectionReady)
    def _ready(self, message: ConnectionReady) -> None:
        self._conn = message.ref
        self._generation = message.generation
        self._capabilities = message.capabilities
        self._unavailable = None
        self.send(
            self.drain,
            ProviderConnected(
                ref=message.ref,
                generation=message.generation,
                can_withdraw=message.capabilities.can_withdraw_steering,
            ),
        )
        self._announce(None)
        if self._turn is not None and not self._turn.sent:
            self._send_turn(self._turn)
        self._hand_over_parked()

    @handles(ConnectionOpenFailed)
    def _open_failed(self, message: ConnectionOpenFailed) -> None:
        """The provider session could not be opened or resumed. The supervisor
        restarts the connection (its policy decides): a turn not yet handed over
        waits for it, and fails if the provider is declared unavailable."""
        if message.generation < self._generation:
            return
        self._conn = None
        self._announce(message.error)
        self._provider_gone()

    @handles(ConnectionLost)
    def _lost(self, message: ConnectionLost) -> None:
        if message.generation != self._generation:
            return
        self._conn = None
        abandoned = AgentHostError(
            code=ErrorCode.EXECUTION_ABANDONED,
            message=f"The provider connection failed: {message.error.message}",
        )
        turn = self._turn
        if turn is not None and turn.sent:
            self._end(self._failed(turn.turn_id, abandoned))
        self._subagents.abandon(abandoned)
        self._provider_gone()

    @handles(ProviderUnavailable)
    def _provider_unavailable(self, message: ProviderUnavailable) -> None:
        self._conn = None
        self._unavailable = message.error
        if self._turn is not None:
            self._end(self._failed(self._turn.turn_id, message.error))
        self._provider_gone()

    @handles(CoolDownEnded)
    def _cool_down_ended(self, message: CoolDownEnded) -> None:
        self._unavailable = None  # turns wait for the connection being started again

    def _provider_gone(self) -> None:
        """Nothing the dead connection sent means anything now; steering it had,
        or was about to get, goes back to the queue."""
        self._diagnoses.unanswered()
        self._steering.give_back(Handled.REQUEUED)
        self.send(self.drain, ProviderGone())

    def _announce(self, error: AgentHostError | None) -> None:
        if not self._announced:
            self._announced = True
            self._out.message(ChatReady(chat_id=self.chat_id, error=error))

    # -- turns --------------------------------------------------------------------------
    @handles(BeginTurn)
    def _begin(self, message: BeginTurn) -> None:
        if self._turn is not None:  # the chat never starts a turn while one runs
            self._log.error("turn_overlapped", turn_id=self._turn.turn_id, new=message.turn_id)
            self._end(
                self._failed(
                    self._turn.turn_id,
                    AgentHostError(
                        code=ErrorCode.EXECUTION_ABANDONED,
                        message="Another turn started before this one ended.",
                    ),
                )
            )
        turn = ActiveTurn.begin(message, self.session_id, self.chat_id, self.services.clock.now())
        self._turn = turn
        if self._unavailable is not None:
            self._end(self._failed(turn.turn_id, self._unavailable))
        elif self._conn is not None:
            self._send_turn(turn)

    def _send_turn(self, turn: ActiveTurn) -> None:
        assert self._capabilities is not None
        self._last_key = turn.key
        stateful = self._capabilities.stateful_prompt
        self.send(self._conn, turn.send(self.session_id, self.chat_id, stateful))

    @handles(CancelActiveTurn)
    def _cancel(self, message: CancelActiveTurn) -> None:
        turn = self._turn
        if turn is None or message.turn_id not in (turn.turn_id, *turn.predecessors):
            return  # the turn it meant ended (a cancel names a turn a steering one took over too)
        if turn.sent:
            self.send(
                self._conn,
                ProviderCancel(session_id=self.session_id, chat_id=self.chat_id, turn_id=turn.key),
            )
        self._end(self._out.stamp(TurnCancelled(turn_id=turn.turn_id)))
        # The provider drops its steering with the run: the host's own removal.
        self._steering.give_back(Handled.CANCELLED)
        self.send(self.drain, RunCancelled())

    @handles(FromProvider)
    def _from_provider(self, message: FromProvider) -> None:
        if message.generation != self._generation:
            return
        self._events(message.events)

    def on_receive(self, message: Any) -> Any:
        if self._stall.stalled and not isinstance(message, _NOT_HELD):
            self._stall.hold(message)  # until the echo is matched
            return None
        return super().on_receive(message)

    def _events(self, events: tuple[ProviderEvent, ...]) -> None:
        if self._turn is not None:
            self._turn.last_event_at = self.services.clock.now()
        self._stall.events(text_runs(events), self._provider_event)

    def _held(self, held: Held) -> None:
        if held.from_provider:
            self._provider_event(held.item)
        else:
            super().on_receive(held.item)

    def _provider_event(self, event: Any) -> None:
        """A provider event, or a TextRun: dispatched by its type."""
        kind = type(event)
        if kind is TextRun:  # most of a stream
            turn = self._turn
            if turn is not None and event.turn_id == turn.key:
                if turn.activity is not None:
                    self._activity(turn, None)
                self._text(turn, event.texts)
            return
        if kind is UserMessageEcho:
            self._echo(event)
            return
        if kind in _SUBAGENT_STREAM and event.subagent_id is not None:
            self._subagents.event(event)
            return
        turn = self._turn
        if turn is None or getattr(event, "turn_id", None) != turn.key:
            if kind is HostRequestOpened:
                self._desk.stale(event)
            return
        handler = _TURN_EVENTS.get(kind)
        if handler is not None:
            handler(self, turn, event)

    # -- the active turn's events, by type (_TURN_EVENTS, below the class) ------------------
    def _tool_started(self, turn: ActiveTurn, event: ProviderToolCallStarted) -> None:
        for action in turn_events.tool_started(turn, event):
            self._out.apply(action)
        self._activity(turn, turn_events.tool_activity(event))

    def _tool_input(self, turn: ActiveTurn, event: ToolInputDelta) -> None:
        delta = turn_events.tool_input_delta(turn, event)
        if delta is not None:
            self._out.apply(delta)

    def _subagent_started(self, turn: ActiveTurn, event: SubagentStarted) -> None:
        self._subagents.spawn(turn, event)

    def _tool_completed(self, turn: ActiveTurn, event: ProviderToolCallCompleted) -> None:
        self._subagents.tool_completed(event.tool_call_id)
        if event.tool_call_id not in turn.result_confirmed:  # ended by the user's word
            self._out.apply(turn_events.tool_completed(turn, event))
        self._activity(turn, None)

    def _request_opened(self, turn: ActiveTurn, event: HostRequestOpened) -> None:
        self._desk.opened(turn, event)

    def _reasoning(self, turn: ActiveTurn, event: ReplyReasoning) -> None:
        self._activity(turn, turn_events.THINKING)
        self._out.actions(turn.stream.reasoning(event.text))

    def _usage(self, turn: ActiveTurn, event: UsageUpdated) -> None:
        usage = turn_events.usage(event)
        self._out.actions((self._out.new(UsageReported, turn_id=turn.turn_id, usage=usage),))

    def _reply_message(self, turn: ActiveTurn, event: ReplyMessage) -> None:
        if event.text and not turn.stream.unflushed:
            self._text(turn, (event.text,))
        turn.finish_reason = event.finish_reason
        self._stable(turn)

    def _idle(self, turn: ActiveTurn, event: Idle) -> None:
        self._end(self._out.new(TurnCompleted, turn_id=turn.turn_id))

    def _call_settled(self, turn: ActiveTurn, event: CallSettled) -> None:
        turn.settled = event
        self._close_if_abandoned(turn)

    def _text(self, turn: ActiveTurn, pieces: Sequence[str]) -> None:
        """Pieces of the reply's text in a row: to the part they go to (started first if new)."""
        stream = turn.stream
        added = stream.text(pieces)
        if added is not None:
            self._out.actions((added,))
        assert stream.part_id is not None
        self._out.text(stream.turn_id, stream.part_id, pieces)

    def _activity(self, turn: ActiveTurn, now: str | None) -> None:
        """chat/activityChanged when the activity is not what was last sent."""
        if turn.activity != now:
            turn.activity = now
            self._out.apply(ActivityChanged(activity=now))

    def _stable(self, turn: ActiveTurn) -> None:
        """Assistant text became stable (a message ended, or the stream did): persist it."""
        stable = turn.stream.stable()
        if stable is not None:
            self._out.message(stable)

    def _close_if_abandoned(self, turn: ActiveTurn) -> None:
        """DESIGN.md rule 2: the send settled and the turn is still active
        (actors/settlement.py says how it ends, if it does)."""
        if self._turn is not turn or turn.settled is None:
            return
        assert self._capabilities is not None  # a settled call came over a connection
        end = settlement.settled_end(turn, self._capabilities.call_settles_with_turn)
        if isinstance(end, TurnCompleted):
            self._log.warning("turn_completion_lost", turn_id=turn.turn_id)
        if end is not None:
            self._end(self._out.stamp(end))

    def _end(self, action: Terminal) -> None:
        """The one host-side turn end: checks, flushes, drops the record."""
        turn = self._turn
        if turn is None or turn.turn_id != action.turn_id:
            return
        self._subagents.end_with(turn, action)
        self._desk.turn_ended(turn)
        self._stable(turn)  # the stream's end flushes what is left (rule 3)
        self._activity(turn, None)
        self._turn = None
        self._steering.cancelled = turn.turn_id if isinstance(action, TurnCancelled) else None
        self._out.message(EndTurn(action=action, finish_reason=turn.finish_reason))

    # -- steering ---------------------------------------------------------------------------
    @handles(HandOverSteering)
    def _hand_over(self, message: HandOverSteering) -> None:
        self._steering.take(message)
        self._hand_over_parked()

    def _hand_over_parked(self) -> None:
        """Hand over steering once there is a connection and the turn (if any)
        was sent: steering never overtakes its turn."""
        if self._conn is None or (self._turn is not None and not self._turn.sent):
            return
        assert self._capabilities is not None
        key = self._turn.key if self._turn is not None else self._last_key
        self._steering.hand_over(key, self._capabilities.accepts_steering)

    @handles(Unpark)
    def _unpark(self, message: Unpark) -> None:
        self._steering.unpark(message.pending_id)

    def _steer(self, message: ProviderSteer) -> None:
        self.send(self._conn, message)

    def _report(self, pending_id: str, how: Handled) -> None:
        self.send(self.drain, SteeringHandled(pending_id=pending_id, how=how))

    def _echo(self, echo: UserMessageEcho) -> None:
        turn = self._turn
        if (
            turn is not None
            and echo.turn_id == turn.key
            and not turn.own_echo_seen
            and not echo.starts_turn
            and echo.text == turn.text
        ):
            turn.own_echo_seen = True  # the turn's own message
            return
        token = self._stall.begin(echo)
        self.send(self.drain, MatchEcho(token=token, echo=echo, reply_to=self.actor_ref))

    @handles(EchoMatched)
    def _echo_matched(self, message: EchoMatched) -> None:
        released = self._stall.matched(message.token)
        if released is None:
            return
        if message.pending_id is not None:
            self._consumed(released.echo, message.pending_id, message.text)
        self._stall.replay(released.held, self._held)

    def _consumed(self, echo: UserMessageEcho, pending_id: str, text: str) -> None:
        """The model read a steering message: recorded in the running turn, or
        (where the provider starts a run for it) the turn of its own it starts."""
        self.send(self.drain, SteeringConsumed(pending_id=pending_id))
        turn = self._turn
        if turn is not None and (echo.turn_id != turn.key or not echo.starts_turn):
            # folded into the running turn (claude, codex; or a run we did not start)
            self._out.message(
                RecordSteering(turn_id=turn.turn_id, pending_id=pending_id, text=text)
            )
            return
        predecessors: frozenset[str] = frozenset()
        if turn is not None:
            predecessors = turn.predecessors | {turn.turn_id}
            self._end(self._out.stamp(TurnCompleted(turn_id=turn.turn_id)))
        turn_id = new_id()
        self._turn = ActiveTurn(
            turn_id=turn_id,
            key=echo.turn_id,
            text=text,
            stream=AssistantStream(self.session_id, self.chat_id, turn_id),
            sent=True,
            own_echo_seen=True,
            last_event_at=self.services.clock.now(),
            predecessors=predecessors,
        )
        self._last_key = echo.turn_id
        self._out.message(StartSteeringTurn(turn_id=turn_id, pending_id=pending_id, text=text))

    # -- requests, client tools, subagents ---------------------------------------------------
    def _answer_provider(self, request_id: str, **answer: Any) -> None:
        self.send(
            self._conn,
            ProviderAnswer(
                session_id=self.session_id, chat_id=self.chat_id, request_id=request_id, **answer
            ),
        )

    @handles(AnswerRequest)
    def _answer(self, message: AnswerRequest) -> None:
        turn = self._turn
        error = self._desk.answer(turn, message)
        self._out.message(AnswerSettled(request_id=message.request_id, error=error))
        if turn is not None and error is None:
            self._close_if_abandoned(turn)

    @handles(SupplyToken)
    def _token(self, message: SupplyToken) -> None:
        """A client's token for the resource calls of the turn wait on."""
        error = self._desk.token_supplied(self._turn, message)
        key = tool_auth.settle_key(message.resource)
        self._out.message(AnswerSettled(request_id=key, error=error))

    @handles(ChangeToolContent, ConfirmToolResult)
    def _tool_call_word(self, message: ChangeToolContent | ConfirmToolResult) -> None:
        """A client tool's partial content, or the user's word on its held result."""
        if isinstance(message, ChangeToolContent):
            error = self._desk.content_changed(self._turn, message)
        else:
            error = self._desk.result_confirmed(self._turn, message)
        self._out.message(AnswerSettled(request_id=message.tool_call_id, error=error))

    @handles(ClientToolsChanged)
    def _client_tools(self, message: ClientToolsChanged) -> None:
        self._desk.owners = dict(message.owners)

    @handles(ClientRemoved)
    def _client_removed(self, message: ClientRemoved) -> None:
        self._desk.client_removed(self._turn, message.client_id)
        if self._turn is not None:
            self._close_if_abandoned(self._turn)

    @handles(SubagentChatStarted)
    def _spawn_started(self, message: SubagentChatStarted) -> None:
        self._subagents.started(message.subagent_id, message.ref)

    # -- diagnostics ---------------------------------------------------------------------
    @handles(Diagnose)
    def _diagnose(self, message: Diagnose) -> RuntimeFuture | None:
        turn = self._turn
        if turn is None:
            return None
        snapshot = diagnoses.snapshot(turn, self.services.clock.now())
        if self._conn is None or not self.send(self._conn, ProviderDiagnose(turn_key=turn.key)):
            future = RuntimeFuture()
            future.set(snapshot)  # no provider to ask: the host's view alone
            return future
        return self._diagnoses.wait(snapshot)

    @handles(ProviderDiagnosed)
    def _diagnosed(self, message: ProviderDiagnosed) -> None:
        if message.generation == self._generation:
            self._diagnoses.answered(message.details)


_TURN_EVENTS: dict[type, Callable[..., None]] = {
    ProviderToolCallStarted: TurnTrackerActor._tool_started,
    ToolInputDelta: TurnTrackerActor._tool_input,
    SubagentStarted: TurnTrackerActor._subagent_started,
    ProviderToolCallCompleted: TurnTrackerActor._tool_completed,
    HostRequestOpened: TurnTrackerActor._request_opened,
    ReplyReasoning: TurnTrackerActor._reasoning,
    UsageUpdated: TurnTrackerActor._usage,
    ReplyMessage: TurnTrackerActor._reply_message,
    Idle: TurnTrackerActor._idle,
    CallSettled: TurnTrackerActor._call_settled,
}
"""The tracker's handler of each provider event of the active turn, by type
(plain text deltas come as TextRuns, handled in `_provider_event` itself)."""
