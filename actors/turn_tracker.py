"""TurnTrackerActor: the active turn's stage and the provider stream, one per chat.

It is the single consumer of its provider connection's event stream and the
single sender of the chat's calls to the provider, so it owns what the
stream is matched against: the active turn (actors/active_turn.py), its
requests (actors/requests.py) and its subagents (actors/subagents.py).

Turn ends. Every host-side end goes through `_end`, which checks that the
turn is still active, flushes the assistant text that never became stable,
and drops the per-turn record (DESIGN.md rules 2 and 3):
- idle (the provider's terminal signal) -> complete;
- the send call settles while the turn is still active: for a provider whose
  call settles with its turn the completion was lost -> complete if resolved;
  a rejected call keeps the provider's own error; a call the provider never
  took -> execution_abandoned. No wall clock ever ends a turn;
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

from typing import Any, TypeVar

import attrs
import structlog

from agenthost.actors.active_turn import ActiveTurn, AssistantStream
from agenthost.actors.context import Services
from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.history import history
from agenthost.actors.hosted import HostedActor
from agenthost.actors.protocol import (
    AnswerSettled,
    ApplyActions,
    BeginTurn,
    CancelActiveTurn,
    ChatBatch,
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
from agenthost.actors.requests import RequestDesk, ids_of
from agenthost.actors.runtime import Actor, handles
from agenthost.actors.subagents import Subagents
from agenthost.messages.commands import AnswerRequest, CallState, TurnDiagnostics
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    ChatEvent,
    ToolCallCompleted,
    ToolCallReady,
    ToolCallStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    UsageReported,
)
from agenthost.messages.ids import new_id
from agenthost.messages.provider import (
    CallSettled,
    Capabilities,
    HistoryMessage,
    HostRequestOpened,
    Idle,
    ProviderAnswer,
    ProviderCancel,
    ProviderEvent,
    ProviderSend,
    ProviderSteer,
    ReplyDelta,
    ReplyMessage,
    Settlement,
    SubagentStarted,
    UsageUpdated,
    UserMessageEcho,
)
from agenthost.messages.provider import ToolCallCompleted as ProviderToolCallCompleted
from agenthost.messages.provider import ToolCallStarted as ProviderToolCallStarted
from agenthost.messages.reduction import replace
from agenthost.messages.state import RequestKind, Usage

log = structlog.get_logger(__name__)

E = TypeVar("E", bound=ChatEvent)
Terminal = TurnCompleted | TurnCancelled | TurnFailed


@attrs.define
class _Stall:
    """An echo the queue drain is matching, and what the tracker holds behind it,
    in order: the provider's later events, and the messages that arrived
    meanwhile (a cancel must see the turn the echo may have started)."""

    token: int
    echo: UserMessageEcho
    held: list[tuple[bool, Any]] = attrs.field(factory=list)  # (a provider event?, item)


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
        self._parked: list[HandOverSteering] = []  # steering waiting for its turn's send
        self._cancelled: str | None = None  # the last turn, if a cancel ended it
        self._stall: _Stall | None = None
        self._tokens = 0
        self._log = log.bind(session_id=session_id, chat_id=chat_id)
        self._desk = RequestDesk(dict(client_tools), self._answer_provider, self._apply, self._log)
        self._subagents = Subagents(
            session_id, chat_id, self.actor_ref, self._to_chat, self._apply, self.send
        )
        self._diagnoses: list[tuple[RuntimeFuture, TurnDiagnostics]] = []
        self._for_chat: list[Any] = []  # messages (and runs of actions) not yet sent

    # -- what goes to the chat ------------------------------------------------------------
    def flush(self) -> None:
        """What the messages handled since the last flush made for the chat goes
        to it as one message."""
        out = self._for_chat
        if not out:
            return
        self._for_chat = []
        messages = [ApplyActions(actions=tuple(m)) if isinstance(m, list) else m for m in out]
        Actor.send(
            self.chat, messages[0] if len(messages) == 1 else ChatBatch(messages=tuple(messages))
        )

    def send(self, ref: Ref | None, message: Any) -> bool:  # type: ignore[override]
        """Tell `ref`, after what is queued for the chat: whatever `ref` does
        about it then reaches the chat behind those (causal order holds)."""
        self.flush()
        return Actor.send(ref, message)

    def _to_chat(self, message: object) -> None:
        """Queue `message` for the chat; consecutive actions merge into one ApplyActions."""
        if isinstance(message, ApplyActions):
            self._actions(message.actions)
        else:
            self._for_chat.append(message)

    def _actions(self, actions: tuple[ChatEvent, ...]) -> None:
        """Queue actions for the chat (they join the run of actions queued last)."""
        out = self._for_chat
        if out and isinstance(out[-1], list):
            out[-1].extend(actions)
        else:
            out.append(list(actions))

    def _apply(self, action: ChatEvent) -> None:
        self._actions((self._stamp(action),))

    def _stamp(self, event: E) -> E:
        return replace(event, session_id=self.session_id, chat_id=self.chat_id)

    def _failed(self, turn_id: str, error: AgentHostError) -> TurnFailed:
        return self._stamp(TurnFailed(turn_id=turn_id, error=error))

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
        self._flush_diagnoses()

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
        self._flush_diagnoses()
        parked, self._parked = self._parked, []
        for hand_over in parked:
            self._report(hand_over.pending_id, Handled.REQUEUED)
        self.send(self.drain, ProviderGone())

    def _announce(self, error: AgentHostError | None) -> None:
        if not self._announced:
            self._announced = True
            self._to_chat(ChatReady(chat_id=self.chat_id, error=error))

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
        turn = ActiveTurn(
            turn_id=message.turn_id,
            key=message.turn_id,
            text=message.text,
            stream=AssistantStream(self.session_id, self.chat_id, message.turn_id),
            history=message.history,
            instructions=message.instructions,
            model=message.model,
            attachments=message.attachments,
            last_event_at=self.services.clock.now(),
        )
        self._turn = turn
        if self._unavailable is not None:
            self._end(self._failed(turn.turn_id, self._unavailable))
        elif self._conn is not None:
            self._send_turn(turn)

    def _send_turn(self, turn: ActiveTurn) -> None:
        assert self._capabilities is not None
        past: tuple[HistoryMessage, ...] = ()
        if not self._capabilities.stateful_prompt:
            past = history(turn.history)
        turn.sent = True
        self._last_key = turn.key
        self.send(
            self._conn,
            ProviderSend(
                session_id=self.session_id,
                chat_id=self.chat_id,
                turn_id=turn.key,
                text=turn.text,
                history=past,
                instructions=turn.instructions,
                model=turn.model,
                attachments=turn.attachments,
            ),
        )

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
        self._end(self._stamp(TurnCancelled(turn_id=turn.turn_id)))
        # The provider drops its steering with the run: the host's own removal.
        parked, self._parked = self._parked, []
        for hand_over in parked:
            self._report(hand_over.pending_id, Handled.CANCELLED)
        self.send(self.drain, RunCancelled())

    @handles(FromProvider)
    def _from_provider(self, message: FromProvider) -> None:
        if message.generation != self._generation:
            return
        self._events(message.events)

    def on_receive(self, message: Any) -> Any:
        if self._stall is not None and not isinstance(message, _NOT_HELD):
            self._stall.held.append((False, message))  # until the echo is matched
            return None
        return super().on_receive(message)

    def _events(self, events: tuple[ProviderEvent, ...]) -> None:
        if self._turn is not None:
            self._turn.last_event_at = self.services.clock.now()
        for index, event in enumerate(events):
            if self._stall is not None:  # held until the queue drain matched the echo
                self._stall.held.extend((True, e) for e in events[index:])
                return
            self._provider_event(event)

    def _replay(self, items: list[tuple[bool, Any]]) -> None:
        """Provider events and messages in order; a stall holds the rest."""
        for index, (is_event, item) in enumerate(items):
            if self._stall is not None:
                self._stall.held.extend(items[index:])
                return
            if is_event:
                self._provider_event(item)
            else:
                super().on_receive(item)

    def _provider_event(self, event: ProviderEvent) -> None:
        if type(event) is ReplyDelta and event.subagent_id is None:  # most of a stream
            turn = self._turn
            if turn is not None and event.turn_id == turn.key:
                self._actions(turn.stream.delta(event.text))
            return
        match event:
            case UserMessageEcho():
                self._echo(event)
                return
            case ReplyDelta() | ReplyMessage() | Idle() if event.subagent_id is not None:
                self._subagents.event(event)
                return
        turn = self._turn
        if turn is None or getattr(event, "turn_id", None) != turn.key:
            if isinstance(event, HostRequestOpened):
                self._desk.stale(event)
            return
        match event:
            case ProviderToolCallStarted():
                turn.tool_calls[event.tool_call_id] = event.name
                self._apply(
                    ToolCallStarted(
                        turn_id=turn.turn_id,
                        tool_call_id=event.tool_call_id,
                        tool_name=event.name,
                        display_name=event.name,
                    )
                )
                if not event.needs_permission:
                    self._apply(
                        ToolCallReady(
                            turn_id=turn.turn_id,
                            tool_call_id=event.tool_call_id,
                            invocation_message=event.name,
                            tool_input=event.arguments,
                            confirmed="not-needed",
                        )
                    )
            case SubagentStarted():
                self._subagents.spawn(turn, event)
            case ProviderToolCallCompleted():
                self._subagents.tool_completed(event.tool_call_id)
                self._apply(
                    ToolCallCompleted(
                        turn_id=turn.turn_id, tool_call_id=event.tool_call_id, success=event.success
                    )
                )
            case HostRequestOpened():
                self._desk.opened(turn, event)
            case ReplyDelta():
                self._actions(turn.stream.delta(event.text))
            case UsageUpdated():
                usage = Usage(
                    prompt_tokens=event.prompt_tokens, completion_tokens=event.completion_tokens
                )
                self._apply(UsageReported(turn_id=turn.turn_id, usage=usage))
            case ReplyMessage():
                if event.text and not turn.stream.unflushed:
                    self._actions(turn.stream.delta(event.text))
                turn.finish_reason = event.finish_reason
                self._stable(turn)
            case Idle():
                self._end(self._stamp(TurnCompleted(turn_id=turn.turn_id)))
            case CallSettled():
                turn.settled = event
                self._close_if_abandoned(turn)

    def _stable(self, turn: ActiveTurn) -> None:
        """Assistant text became stable (a message ended, or the stream did): persist it."""
        stable = turn.stream.stable()
        if stable is not None:
            self._to_chat(stable)

    def _close_if_abandoned(self, turn: ActiveTurn) -> None:
        """DESIGN.md rule 2: the send settled and the turn is still active. Never
        while a request the user can see or the provider tracks is open."""
        settled = turn.settled
        if settled is None or turn.requests or self._turn is not turn:
            return
        assert self._capabilities is not None  # a settled call came over a connection
        if settled.settlement is Settlement.RESOLVED:
            if self._capabilities.call_settles_with_turn:
                self._log.warning("turn_completion_lost", turn_id=turn.turn_id)
                self._end(self._stamp(TurnCompleted(turn_id=turn.turn_id)))
            return
        if settled.settlement is Settlement.REJECTED and settled.error is not None:
            error = settled.error  # the provider took the turn: it keeps its own error
        elif settled.error is not None:
            # Refused before it took the turn: abandoned, in the provider's own words.
            error = AgentHostError(
                code=ErrorCode.EXECUTION_ABANDONED, message=settled.error.message
            )
        else:
            error = AgentHostError(
                code=ErrorCode.EXECUTION_ABANDONED,
                message="The provider never started this turn.",
            )
        self._end(self._failed(turn.turn_id, error))

    def _end(self, action: Terminal) -> None:
        """The one host-side turn end: checks, flushes, drops the record."""
        turn = self._turn
        if turn is None or turn.turn_id != action.turn_id:
            return
        self._subagents.end_with(turn, action)
        self._desk.turn_ended(turn)
        self._stable(turn)  # the stream's end flushes what is left (rule 3)
        self._turn = None
        self._cancelled = turn.turn_id if isinstance(action, TurnCancelled) else None
        self._to_chat(EndTurn(action=action, finish_reason=turn.finish_reason))

    # -- steering ---------------------------------------------------------------------------
    @handles(HandOverSteering)
    def _hand_over(self, message: HandOverSteering) -> None:
        if message.for_turn is not None and message.for_turn == self._cancelled:
            # It was meant for the turn the user cancelled; it arrived after the cancel.
            self._report(message.pending_id, Handled.CANCELLED)
            return
        self._parked.append(message)
        self._hand_over_parked()

    def _hand_over_parked(self) -> None:
        """Hand over steering once there is a connection and the turn (if any)
        was sent: steering never overtakes its turn."""
        if self._conn is None or (self._turn is not None and not self._turn.sent):
            return
        assert self._capabilities is not None
        key = self._turn.key if self._turn is not None else self._last_key
        parked, self._parked = self._parked, []
        for hand_over in parked:
            if not self._capabilities.accepts_steering:
                self._report(hand_over.pending_id, Handled.HELD)
                continue
            self._report(hand_over.pending_id, Handled.HANDED)  # the drain hears it first
            self.send(
                self._conn,
                ProviderSteer(
                    session_id=self.session_id,
                    chat_id=self.chat_id,
                    turn_id=key,
                    pending_id=hand_over.pending_id,
                    text=hand_over.text,
                ),
            )

    @handles(Unpark)
    def _unpark(self, message: Unpark) -> None:
        """A client removes steering: dropped if it was not handed over yet (a
        message still being prepared is never sent)."""
        kept = [h for h in self._parked if h.pending_id != message.pending_id]
        if len(kept) < len(self._parked):
            self._parked = kept
            self._report(message.pending_id, Handled.DROPPED)

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
        self._tokens += 1
        self._stall = _Stall(token=self._tokens, echo=echo)
        self.send(self.drain, MatchEcho(token=self._tokens, echo=echo, reply_to=self.actor_ref))

    @handles(EchoMatched)
    def _echo_matched(self, message: EchoMatched) -> None:
        stall = self._stall
        if stall is None or stall.token != message.token:
            return
        self._stall = None
        if message.pending_id is not None:
            self._consumed(stall.echo, message.pending_id, message.text)
        self._replay(stall.held)

    def _consumed(self, echo: UserMessageEcho, pending_id: str, text: str) -> None:
        """The model read a steering message: recorded in the running turn, or
        (where the provider starts a run for it) the turn of its own it starts."""
        self.send(self.drain, SteeringConsumed(pending_id=pending_id))
        turn = self._turn
        if turn is not None and (echo.turn_id != turn.key or not echo.starts_turn):
            # folded into the running turn (claude, codex; or a run we did not start)
            self._to_chat(RecordSteering(turn_id=turn.turn_id, pending_id=pending_id, text=text))
            return
        predecessors: frozenset[str] = frozenset()
        if turn is not None:
            predecessors = turn.predecessors | {turn.turn_id}
            self._end(self._stamp(TurnCompleted(turn_id=turn.turn_id)))
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
        self._to_chat(StartSteeringTurn(turn_id=turn_id, pending_id=pending_id, text=text))

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
        self._to_chat(AnswerSettled(request_id=message.request_id, error=error))
        if turn is not None and error is None:
            self._close_if_abandoned(turn)

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
        requests = list(turn.requests.values())
        snapshot = TurnDiagnostics(
            turn_id=turn.turn_id,
            call_state=_call_state(turn),
            provider_started=turn.own_echo_seen,
            parked_permissions=ids_of(requests, RequestKind.PERMISSION),
            parked_user_input=ids_of(requests, RequestKind.USER_INPUT),
            parked_client_tools=ids_of(requests, RequestKind.CLIENT_TOOL),
            quiet_s=self.services.clock.now() - turn.last_event_at,
        )
        future = RuntimeFuture()
        if self._conn is None or not self.send(self._conn, ProviderDiagnose(turn_key=turn.key)):
            future.set(snapshot)  # no provider to ask: the host's view alone
            return future
        self._diagnoses.append((future, snapshot))
        return future

    @handles(ProviderDiagnosed)
    def _diagnosed(self, message: ProviderDiagnosed) -> None:
        if message.generation != self._generation:
            return
        pending, self._diagnoses = self._diagnoses, []
        for future, snapshot in pending:
            future.set(attrs.evolve(snapshot, provider=message.details))

    def _flush_diagnoses(self) -> None:
        """The provider will not answer: every waiting caller gets the host's view."""
        pending, self._diagnoses = self._diagnoses, []
        for future, snapshot in pending:
            future.set(snapshot)


def _call_state(turn: ActiveTurn) -> CallState:
    if not turn.sent:
        return CallState.NOT_STARTED
    if turn.settled is None:
        return CallState.PENDING
    if turn.settled.settlement is Settlement.RESOLVED:
        return CallState.RESOLVED
    return CallState.REJECTED
