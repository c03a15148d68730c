"""TurnTrackerActor: the active turn's stage and the provider stream, one per chat.

It is the single consumer of its provider connection's event stream, so it
owns everything that stream is matched against: the active turn and the
steering messages handed to the provider (their ids and exact prompts).

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

Steering (DESIGN.md rule 1). An echo is matched to a steering message by
provider message id first, by exact text only when the echo or the entry has
no id yet (then an entry not being withdrawn, oldest first). A consumed
message starts its own turn where the provider says so (copilot) and is
recorded inside the running turn otherwise (claude, codex). A withdraw is a
request: the entry leaves only on `removed: true`; a message not yet sent is
simply dropped. Removals the host makes itself (cancel) never withdraw.
"""

import uuid
from typing import Any, TypeVar

import attrs
import structlog

from agenthost.actors.context import Services
from agenthost.actors.hosted import HostedActor
from agenthost.actors.protocol import (
    AnswerSettled,
    ApplyActions,
    AssistantStable,
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
    Diagnose,
    EndTurn,
    FromProvider,
    OpenConnection,
    ProviderCapabilities,
    ProviderDiagnose,
    ProviderDiagnosed,
    ProviderUnavailable,
    RecordSteering,
    Ref,
    RemovalOutcome,
    RequeueSteering,
    SendSteering,
    SpawnSubagentChat,
    StartProviderTurn,
    StartSteeringTurn,
    SteeringCancelled,
    SteeringConsumed,
    SteeringRemovalSettled,
    SubagentChatStarted,
    WithdrawSteering,
)
from agenthost.actors.runtime import Actor, RuntimeFuture, handles
from agenthost.messages.commands import AnswerRequest, CallState, TurnDiagnostics
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    AssistantDelta,
    ChatEvent,
    RequestClosed,
    RequestOpened,
    RequestOutcome,
    ResponsePartAdded,
    ToolCallCompleted,
    ToolCallConfirmed,
    ToolCallReady,
    ToolCallStarted,
    ToolCallSubagentStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    UsageReported,
)
from agenthost.messages.provider import (
    CallSettled,
    Capabilities,
    HistoryMessage,
    HostRequestOpened,
    Idle,
    ProviderAnswer,
    ProviderCancel,
    ProviderSend,
    ProviderSteer,
    ProviderWithdraw,
    ReplyDelta,
    ReplyMessage,
    Settlement,
    SteerAnswered,
    SubagentStarted,
    UsageUpdated,
    UserMessageEcho,
    WithdrawAnswered,
)
from agenthost.messages.provider import ToolCallCompleted as ProviderToolCallCompleted
from agenthost.messages.provider import ToolCallStarted as ProviderToolCallStarted
from agenthost.messages.state import (
    Attachment,
    MarkdownPart,
    OpenRequest,
    RequestKind,
    Turn,
    TurnState,
    Usage,
)

log = structlog.get_logger(__name__)

E = TypeVar("E", bound=ChatEvent)


@attrs.define
class _Stream:
    """A turn's assistant text as it streams: its markdown parts, and what has
    not become stable (persisted) yet. Used for turns and subagents alike."""

    session_id: str
    chat_id: str
    turn_id: str
    unflushed: list[str] = attrs.field(factory=list)
    part_id: str | None = None
    parts: int = 0

    def delta(self, text: str) -> ApplyActions:
        ids = {"session_id": self.session_id, "chat_id": self.chat_id, "turn_id": self.turn_id}
        self.unflushed.append(text)
        if self.part_id is not None:
            return ApplyActions(actions=(AssistantDelta(**ids, part_id=self.part_id, text=text),))
        self.parts += 1
        self.part_id = f"{self.turn_id}-md{self.parts}"
        return ApplyActions(
            actions=(
                ResponsePartAdded(**ids, part=MarkdownPart(id=self.part_id)),
                AssistantDelta(**ids, part_id=self.part_id, text=text),
            )
        )

    def stable(self) -> AssistantStable | None:
        """What became stable (a message ended, or the stream did), to persist."""
        text = "".join(self.unflushed)
        self.unflushed.clear()
        self.part_id = None
        return AssistantStable(turn_id=self.turn_id, text=text) if text else None


@attrs.define
class _Turn:
    """Per-turn record; dropped when the turn ends. `key` is the provider's run."""

    turn_id: str
    key: str
    text: str
    stream: _Stream
    history: tuple[Turn, ...] = ()
    instructions: str = ""
    model: str | None = None
    attachments: tuple[Attachment, ...] = ()
    sent: bool = False
    own_echo_seen: bool = False
    finish_reason: str | None = None
    settled: CallSettled | None = None
    requests: dict[str, OpenRequest] = attrs.field(factory=dict)
    tool_calls: dict[str, str] = attrs.field(factory=dict)  # tool call id -> tool name
    answered: set[str] = attrs.field(factory=set)
    early: dict[str, AnswerRequest] = attrs.field(factory=dict)
    last_event_at: float = 0.0
    predecessors: frozenset[str] = frozenset()  # turns this one took over (copilot steering)


@attrs.define
class _Steering:
    """A steering message handed to this tracker, until consumed, withdrawn or requeued."""

    pending_id: str
    text: str
    provider_message_id: str | None = None
    sent: bool = False
    withdrawing: bool = False
    withdraw_wanted: bool = False


@attrs.define
class _Spawn:
    """A subagent a tool call spawned, and its chat's running turn."""

    subagent_id: str
    chat_id: str
    tool_call_id: str
    parent_turn_id: str
    turn_id: str
    background: bool
    stream: _Stream
    ref: Ref | None = None
    waiting: list[object] = attrs.field(factory=list)  # for its chat, until the chat runs
    resolved: bool = False  # the spawning call finished with the subagent's work


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
        self._turn: _Turn | None = None
        self._last_key = ""
        self._steering: dict[str, _Steering] = {}
        self._cancelled: str | None = None  # the last turn, if a cancel ended it
        self._owners: dict[str, str] = dict(client_tools)  # tool name -> client id
        self._diagnoses: list[tuple[RuntimeFuture, TurnDiagnostics]] = []
        self._spawns: dict[str, _Spawn] = {}
        self._unstarted: dict[str, _Spawn] = {}  # ended before their chat started
        self._for_chat: list[Any] = []  # messages (and runs of actions) not yet sent
        self._log = log.bind(session_id=session_id, chat_id=chat_id)

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
        out = self._for_chat
        if not isinstance(message, ApplyActions):
            out.append(message)
        elif out and isinstance(out[-1], list):
            out[-1].extend(message.actions)
        else:
            out.append(list(message.actions))

    def on_start(self) -> None:
        self.send(
            self.services.supervisor,
            OpenConnection(
                session_id=self.session_id,
                chat_id=self.chat_id,
                provider=self.provider,
                owner=self.actor_ref,
                resume=self.resume,
            ),
        )

    def on_stop(self) -> None:
        self.send(
            self.services.supervisor,
            CloseConnection(session_id=self.session_id, chat_id=self.chat_id, owner=self.actor_ref),
        )
        self._flush_diagnoses()

    # -- the connection ---------------------------------------------------------------
    @handles(ConnectionReady)
    def _ready(self, message: ConnectionReady) -> None:
        self._conn = message.ref
        self._generation = message.generation
        self._capabilities = message.capabilities
        self._unavailable = None
        self.send(self.drain, ProviderCapabilities(capabilities=message.capabilities))
        self._announce(None)
        if self._turn is not None and not self._turn.sent:
            self._send_turn(self._turn)
        self._send_held_steering()

    @handles(ConnectionOpenFailed)
    def _open_failed(self, message: ConnectionOpenFailed) -> None:
        """The provider session could not be opened or resumed. The supervisor
        restarts the connection (its policy decides): a turn not yet handed over
        waits for it, and fails if the provider is declared unavailable."""
        if message.generation < self._generation:
            return
        self._conn = None
        self._announce(message.error)
        self._requeue_all_steering()
        self._flush_diagnoses()

    @handles(ConnectionLost)
    def _lost(self, message: ConnectionLost) -> None:
        if message.generation != self._generation:
            return
        self._conn = None
        self._flush_diagnoses()
        abandoned = AgentHostError(
            code=ErrorCode.EXECUTION_ABANDONED,
            message=f"The provider connection failed: {message.error.message}",
        )
        turn = self._turn
        if turn is not None and turn.sent:
            self._end(self._failed(turn.turn_id, abandoned))
        self._abandon_spawns(abandoned)
        self._requeue_all_steering()

    @handles(ProviderUnavailable)
    def _provider_unavailable(self, message: ProviderUnavailable) -> None:
        self._conn = None
        self._unavailable = message.error
        self._flush_diagnoses()
        if self._turn is not None:
            self._end(self._failed(self._turn.turn_id, message.error))
        self._requeue_all_steering()

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
        turn = _Turn(
            turn_id=message.turn_id,
            key=message.turn_id,
            text=message.text,
            stream=_Stream(self.session_id, self.chat_id, message.turn_id),
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

    def _send_turn(self, turn: _Turn) -> None:
        assert self._capabilities is not None
        history: tuple[HistoryMessage, ...] = ()
        if not self._capabilities.stateful_prompt:
            history = _history(turn.history)
        turn.sent = True
        self._last_key = turn.key
        self.send(
            self._conn,
            ProviderSend(
                session_id=self.session_id,
                chat_id=self.chat_id,
                turn_id=turn.key,
                text=turn.text,
                history=history,
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
        self._cancel_steering(tuple(self._steering))

    @handles(FromProvider)
    def _from_provider(self, message: FromProvider) -> None:
        if message.generation != self._generation:
            return
        for event in message.events:
            self._provider_event(event)

    def _provider_event(self, event: object) -> None:
        match event:
            case UserMessageEcho():
                self._echo(event)
                return
            case SteerAnswered():
                self._steer_answered(event)
                return
            case WithdrawAnswered():
                self._withdraw_answered(event)
                return
            case ReplyDelta() | ReplyMessage() | Idle() if event.subagent_id is not None:
                self._subagent_event(event)
                return
        turn = self._turn
        if turn is None or getattr(event, "turn_id", None) != turn.key:
            if isinstance(event, HostRequestOpened):
                self._deny_stale(event)
            return
        turn.last_event_at = self.services.clock.now()
        match event:
            case ProviderToolCallStarted():
                turn.tool_calls[event.tool_call_id] = event.name
                actions: list[ChatEvent] = [
                    self._stamp(
                        ToolCallStarted(
                            turn_id=turn.turn_id,
                            tool_call_id=event.tool_call_id,
                            tool_name=event.name,
                            display_name=event.name,
                        )
                    )
                ]
                if not event.needs_permission:
                    actions.append(
                        self._stamp(
                            ToolCallReady(
                                turn_id=turn.turn_id,
                                tool_call_id=event.tool_call_id,
                                invocation_message=event.name,
                                tool_input=event.arguments,
                                confirmed="not-needed",
                            )
                        )
                    )
                self._to_chat(ApplyActions(actions=tuple(actions)))
            case SubagentStarted():
                self._spawn(turn, event)
            case ProviderToolCallCompleted():
                for spawn in self._spawns.values():
                    if spawn.tool_call_id == event.tool_call_id and not spawn.background:
                        spawn.resolved = True
                self._apply(
                    ToolCallCompleted(
                        turn_id=turn.turn_id, tool_call_id=event.tool_call_id, success=event.success
                    )
                )
            case HostRequestOpened():
                self._request_opened(turn, event)
            case ReplyDelta():
                self._delta(turn, event.text)
            case UsageUpdated():
                usage = Usage(
                    prompt_tokens=event.prompt_tokens, completion_tokens=event.completion_tokens
                )
                self._apply(UsageReported(turn_id=turn.turn_id, usage=usage))
            case ReplyMessage():
                if event.text and not turn.stream.unflushed:
                    self._delta(turn, event.text)
                turn.finish_reason = event.finish_reason
                self._stable(turn)
            case Idle():
                self._end(self._stamp(TurnCompleted(turn_id=turn.turn_id)))
            case CallSettled():
                self._call_settled(turn, event)

    def _delta(self, turn: _Turn, text: str) -> None:
        self._to_chat(turn.stream.delta(text))

    def _stable(self, turn: _Turn) -> None:
        """Assistant text became stable (a message ended, or the stream did): persist it."""
        stable = turn.stream.stable()
        if stable is not None:
            self._to_chat(stable)

    def _call_settled(self, turn: _Turn, event: CallSettled) -> None:
        turn.settled = event
        self._close_if_abandoned(turn)

    def _close_if_abandoned(self, turn: _Turn) -> None:
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

    # -- subagents ----------------------------------------------------------------------
    def _spawn(self, turn: _Turn, event: SubagentStarted) -> None:
        chat_id = uuid.uuid4().hex
        turn_id = uuid.uuid4().hex
        spawn = _Spawn(
            subagent_id=event.subagent_id,
            chat_id=chat_id,
            tool_call_id=event.tool_call_id,
            parent_turn_id=turn.turn_id,
            turn_id=turn_id,
            background=event.background,
            stream=_Stream(self.session_id, chat_id, turn_id),
        )
        self._spawns[spawn.subagent_id] = spawn
        self._to_chat(
            SpawnSubagentChat(
                subagent_id=spawn.subagent_id,
                chat_id=spawn.chat_id,
                parent_chat_id=self.chat_id,
                tool_call_id=spawn.tool_call_id,
                tracker=self.actor_ref,
            ),
        )
        self._apply(
            ToolCallSubagentStarted(
                turn_id=turn.turn_id,
                tool_call_id=spawn.tool_call_id,
                subagent_chat_id=spawn.chat_id,
            )
        )
        self._to_spawn(spawn, StartProviderTurn(turn_id=spawn.turn_id, text=event.prompt))

    @handles(SubagentChatStarted)
    def _spawn_started(self, message: SubagentChatStarted) -> None:
        spawn = self._spawns.get(message.subagent_id) or self._unstarted.pop(
            message.subagent_id, None
        )
        if spawn is None:
            return
        spawn.ref = message.ref
        waiting, spawn.waiting = spawn.waiting, []
        for item in waiting:
            self.send(spawn.ref, item)

    def _to_spawn(self, spawn: _Spawn, message: object) -> None:
        if spawn.ref is None:
            spawn.waiting.append(message)
        else:
            self.send(spawn.ref, message)

    def _subagent_event(self, event: ReplyDelta | ReplyMessage | Idle) -> None:
        spawn = self._spawns.get(event.subagent_id or "")
        if spawn is None:
            return  # its turn already ended
        match event:
            case ReplyDelta():
                self._to_spawn(spawn, spawn.stream.delta(event.text))
            case ReplyMessage():
                self._flush_spawn(spawn)
            case Idle():
                self._end_spawn(spawn, TurnCompleted(turn_id=spawn.turn_id))

    def _flush_spawn(self, spawn: _Spawn) -> None:
        stable = spawn.stream.stable()
        if stable is not None:
            self._to_spawn(spawn, stable)

    def _end_spawn(self, spawn: _Spawn, action: TurnCompleted | TurnCancelled | TurnFailed) -> None:
        """A subagent's turn ends once: its record goes with it."""
        if self._spawns.pop(spawn.subagent_id, None) is None:
            return
        self._flush_spawn(spawn)
        stamped = attrs.evolve(action, session_id=self.session_id, chat_id=spawn.chat_id)
        self._to_spawn(spawn, EndTurn(action=stamped))
        if spawn.ref is None:
            self._unstarted[spawn.subagent_id] = spawn  # its chat still starts: tell it then

    def _end_spawns_with(
        self, turn: _Turn, action: TurnCompleted | TurnCancelled | TurnFailed
    ) -> None:
        """Read spawn state before the parent's terminal action: a cancel ends every
        subagent of the turn; otherwise resolved spawns end with it and background
        ones run on."""
        for spawn in [s for s in self._spawns.values() if s.parent_turn_id == turn.turn_id]:
            if isinstance(action, TurnCancelled):
                self._end_spawn(spawn, TurnCancelled(turn_id=spawn.turn_id))
            elif spawn.resolved:
                self._end_spawn(spawn, attrs.evolve(action, turn_id=spawn.turn_id))

    def _abandon_spawns(self, error: AgentHostError) -> None:
        """Their producer died with the connection."""
        for spawn in list(self._spawns.values()):
            self._end_spawn(spawn, TurnFailed(turn_id=spawn.turn_id, error=error))

    # -- requests: permissions, user input, client tools ---------------------------------
    def _apply(self, action: ChatEvent) -> None:
        self._to_chat(ApplyActions(actions=(self._stamp(action),)))

    def _answer_provider(self, request_id: str, **answer: Any) -> None:
        self.send(
            self._conn,
            ProviderAnswer(
                session_id=self.session_id, chat_id=self.chat_id, request_id=request_id, **answer
            ),
        )

    def _deny_stale(self, event: HostRequestOpened) -> None:
        """A request for a turn that is no longer active is denied, never dropped."""
        self._log.warning(
            "stale_request_denied", request_id=event.request_id, kind=event.kind.value
        )
        self._answer_provider(
            event.request_id,
            approved=False,
            error="The turn this request belongs to is no longer active.",
        )

    def _request_opened(self, turn: _Turn, event: HostRequestOpened) -> None:
        kind = RequestKind(event.kind.value)
        request = OpenRequest(
            request_id=event.request_id,
            kind=kind,
            turn_id=turn.turn_id,
            tool_call_id=event.tool_call_id,
            tool_name=event.tool_name,
            question=event.question,
            arguments=event.arguments,
        )
        if kind is RequestKind.CLIENT_TOOL:
            early = turn.early.pop(event.request_id, None)
            if early is not None:  # the result arrived before its handler: it wins
                turn.answered.add(event.request_id)
                self._answer_provider(event.request_id, result=early.result)
                return
            owner = self._owners.get(event.tool_name or "")
            if owner is None:  # never parked: nobody could ever answer it
                self._log.warning("client_tool_unowned", tool=event.tool_name)
                turn.answered.add(event.request_id)
                self._answer_provider(
                    event.request_id,
                    error=f"No connected client provides the tool {event.tool_name!r}.",
                )
                return
            request = attrs.evolve(request, client_id=owner)
        turn.requests[request.request_id] = request
        actions: list[ChatEvent] = []
        if kind is RequestKind.PERMISSION and event.tool_call_id is not None:
            actions.append(
                self._stamp(
                    ToolCallReady(
                        turn_id=turn.turn_id,
                        tool_call_id=event.tool_call_id,
                        invocation_message=event.tool_name or "",
                        tool_input=event.arguments,
                    )
                )
            )
        actions.append(self._stamp(RequestOpened(request=request)))
        self._to_chat(ApplyActions(actions=tuple(actions)))

    @handles(AnswerRequest)
    def _answer(self, message: AnswerRequest) -> None:
        error = self._take_answer(message)
        self._to_chat(AnswerSettled(request_id=message.request_id, error=error))

    def _take_answer(self, message: AnswerRequest) -> AgentHostError | None:
        turn = self._turn
        request_id = message.request_id
        request = None if turn is None else turn.requests.get(request_id)
        if request is None:
            if (
                turn is not None
                and message.result is not None
                and request_id in turn.tool_calls
                and request_id not in turn.answered
                and request_id not in turn.early
            ):
                owner = self._owners.get(turn.tool_calls[request_id])
                if message.client_id is not None and message.client_id != owner:
                    return AgentHostError(
                        code=ErrorCode.INVALID_ARGUMENT,
                        message="only the client that executes this tool may answer its call",
                    )
                turn.early[request_id] = message  # a client tool's result ahead of its request
                return None
            return AgentHostError(
                code=ErrorCode.NOT_FOUND,
                message=f"request {request_id} is not open (it was answered, or its turn ended)",
            )
        assert turn is not None
        invalid = _check_answer(request, message)
        if invalid is not None:
            return invalid
        del turn.requests[request_id]
        turn.answered.add(request_id)
        if request.kind is RequestKind.PERMISSION:
            approved = bool(message.approved)
            self._answer_provider(request_id, approved=approved)
            if request.tool_call_id is not None:
                self._apply(
                    ToolCallConfirmed(
                        turn_id=turn.turn_id,
                        tool_call_id=request.tool_call_id,
                        approved=approved,
                        confirmed="user-action" if approved else None,
                        reason=None if approved else "denied",
                    )
                )
            outcome = RequestOutcome.ANSWERED if approved else RequestOutcome.DENIED
        elif request.kind is RequestKind.USER_INPUT:
            self._answer_provider(request_id, answer=message.answer)
            outcome = RequestOutcome.ANSWERED
        else:
            self._answer_provider(request_id, result=message.result)
            outcome = RequestOutcome.ANSWERED
        self._apply(RequestClosed(request_id=request_id, outcome=outcome))
        self._close_if_abandoned(turn)
        return None

    @handles(ClientToolsChanged)
    def _client_tools(self, message: ClientToolsChanged) -> None:
        self._owners = dict(message.owners)

    @handles(ClientRemoved)
    def _client_removed(self, message: ClientRemoved) -> None:
        """Every call the client left parked fails now; new ones are never parked."""
        self._owners = {t: c for t, c in self._owners.items() if c != message.client_id}
        turn = self._turn
        if turn is None:
            return
        for request in list(turn.requests.values()):
            if request.kind is RequestKind.CLIENT_TOOL and request.client_id == message.client_id:
                del turn.requests[request.request_id]
                turn.answered.add(request.request_id)
                self._answer_provider(
                    request.request_id, error=f"The client {message.client_id!r} is gone."
                )
                self._apply(
                    RequestClosed(request_id=request.request_id, outcome=RequestOutcome.FAILED)
                )
        self._close_if_abandoned(turn)

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
            parked_permissions=_ids(requests, RequestKind.PERMISSION),
            parked_user_input=_ids(requests, RequestKind.USER_INPUT),
            parked_client_tools=_ids(requests, RequestKind.CLIENT_TOOL),
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

    def _failed(self, turn_id: str, error: AgentHostError) -> TurnFailed:
        return self._stamp(TurnFailed(turn_id=turn_id, error=error))

    def _stamp(self, event: E) -> E:
        return attrs.evolve(event, session_id=self.session_id, chat_id=self.chat_id)

    def _end(self, action: TurnCompleted | TurnCancelled | TurnFailed) -> None:
        """The one host-side turn end: checks, flushes, drops the record."""
        turn = self._turn
        if turn is None or turn.turn_id != action.turn_id:
            return
        self._end_spawns_with(turn, action)
        for request_id in list(turn.requests):
            self._answer_provider(request_id, approved=False, error="The turn ended.")
            self._apply(RequestClosed(request_id=request_id, outcome=RequestOutcome.CANCELLED))
        turn.requests.clear()
        self._stable(turn)  # the stream's end flushes what is left (rule 3)
        self._turn = None
        self._cancelled = turn.turn_id if isinstance(action, TurnCancelled) else None
        self._to_chat(EndTurn(action=action, finish_reason=turn.finish_reason))

    # -- steering ---------------------------------------------------------------------------
    @handles(SendSteering)
    def _send_steering(self, message: SendSteering) -> None:
        if message.for_turn is not None and message.for_turn == self._cancelled:
            # It was meant for the turn the user cancelled; it arrived after the cancel.
            self._cancel_steering((message.pending_id,))
            return
        self._steering[message.pending_id] = _Steering(message.pending_id, message.text)
        self._send_held_steering()

    def _cancel_steering(self, pending_ids: tuple[str, ...]) -> None:
        """The host's own removal: the provider dropped them with the run; no withdraw."""
        for pending_id in pending_ids:
            entry = self._steering.pop(pending_id, None)
            if entry is not None and (entry.withdraw_wanted or entry.withdrawing):
                self._settle(pending_id, RemovalOutcome.DROPPED)
        if pending_ids:
            self.send(self.drain, SteeringCancelled(pending_ids=pending_ids))

    def _send_held_steering(self) -> None:
        """Hand over steering not yet sent, once there is a connection and the
        turn (if any) was sent: steering never overtakes its turn."""
        if self._conn is None or (self._turn is not None and not self._turn.sent):
            return
        key = self._turn.key if self._turn is not None else self._last_key
        for entry in self._steering.values():
            if entry.sent:
                continue
            entry.sent = True
            self.send(
                self._conn,
                ProviderSteer(
                    session_id=self.session_id,
                    chat_id=self.chat_id,
                    turn_id=key,
                    pending_id=entry.pending_id,
                    text=entry.text,
                ),
            )

    @handles(WithdrawSteering)
    def _withdraw(self, message: WithdrawSteering) -> None:
        entry = self._steering.get(message.pending_id)
        if entry is None:
            self._settle(message.pending_id, RemovalOutcome.GONE)
        elif not entry.sent:
            del self._steering[entry.pending_id]  # still being prepared: never sent
            self._settle(entry.pending_id, RemovalOutcome.DROPPED)
        elif not message.may_withdraw:
            self._settle(entry.pending_id, RemovalOutcome.REJECTED)
        elif entry.provider_message_id is None:
            entry.withdraw_wanted = True  # withdraw once the provider tells us its id
        else:
            self._send_withdraw(entry)

    def _send_withdraw(self, entry: _Steering) -> None:
        assert entry.provider_message_id is not None
        entry.withdrawing = True
        entry.withdraw_wanted = False
        self.send(
            self._conn,
            ProviderWithdraw(
                session_id=self.session_id,
                chat_id=self.chat_id,
                pending_id=entry.pending_id,
                provider_message_id=entry.provider_message_id,
                text=entry.text,
            ),
        )

    def _settle(self, pending_id: str, outcome: RemovalOutcome) -> None:
        self.send(self.drain, SteeringRemovalSettled(pending_id=pending_id, outcome=outcome))

    def _steer_answered(self, event: SteerAnswered) -> None:
        entry = self._steering.get(event.pending_id)
        if entry is None:
            return
        if event.error is not None:
            self._log.info(
                "steering_requeued",
                pending_id=entry.pending_id,
                reason=event.error.message,
                no_active_turn=event.no_active_turn,
            )
            del self._steering[entry.pending_id]
            if entry.withdraw_wanted:
                self._settle(entry.pending_id, RemovalOutcome.DROPPED)
            else:
                self.send(self.drain, RequeueSteering(pending_id=entry.pending_id))
            return
        entry.provider_message_id = event.provider_message_id
        if entry.withdraw_wanted:
            if entry.provider_message_id is None:
                self._settle(entry.pending_id, RemovalOutcome.REJECTED)
            else:
                self._send_withdraw(entry)

    def _withdraw_answered(self, event: WithdrawAnswered) -> None:
        entry = self._steering.get(event.pending_id)
        if entry is None:
            if event.removed:
                self._log.error("withdraw_after_consumption", pending_id=event.pending_id)
            self._settle(event.pending_id, RemovalOutcome.NOT_WITHDRAWN)
            return
        entry.withdrawing = False
        if event.removed:
            del self._steering[entry.pending_id]
            self._settle(entry.pending_id, RemovalOutcome.WITHDRAWN)
        else:
            self._settle(entry.pending_id, RemovalOutcome.NOT_WITHDRAWN)

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
        entry = self._match(echo)
        if entry is None:
            return
        del self._steering[entry.pending_id]
        self.send(self.drain, SteeringConsumed(pending_id=entry.pending_id))
        if turn is not None and (echo.turn_id != turn.key or not echo.starts_turn):
            # folded into the running turn (claude, codex; or a run we did not start)
            self._to_chat(
                RecordSteering(turn_id=turn.turn_id, pending_id=entry.pending_id, text=entry.text),
            )
            return
        predecessors: frozenset[str] = frozenset()
        if turn is not None:
            predecessors = turn.predecessors | {turn.turn_id}
            self._end(self._stamp(TurnCompleted(turn_id=turn.turn_id)))
        turn_id = uuid.uuid4().hex
        self._turn = _Turn(
            turn_id=turn_id,
            key=echo.turn_id,
            text=entry.text,
            stream=_Stream(self.session_id, self.chat_id, turn_id),
            sent=True,
            own_echo_seen=True,
            last_event_at=self.services.clock.now(),
            predecessors=predecessors,
        )
        self._last_key = echo.turn_id
        self._to_chat(
            StartSteeringTurn(turn_id=turn_id, pending_id=entry.pending_id, text=entry.text),
        )

    def _match(self, echo: UserMessageEcho) -> _Steering | None:
        """By provider message id first; by exact text only where an id is missing."""
        entries = list(self._steering.values())
        if echo.provider_message_id is not None:
            for entry in entries:
                if entry.provider_message_id == echo.provider_message_id:
                    return entry
            candidates = [e for e in entries if e.provider_message_id is None]
        else:
            candidates = entries
        same_text = [e for e in candidates if e.sent and e.text == echo.text]
        same_text.sort(key=lambda e: e.withdrawing)  # stable: oldest first, withdrawing last
        return same_text[0] if same_text else None

    def _requeue_all_steering(self) -> None:
        """The provider that held these is gone: nothing is lost, they become queued."""
        for entry in list(self._steering.values()):
            if entry.withdraw_wanted or entry.withdrawing:
                self._settle(entry.pending_id, RemovalOutcome.DROPPED)
            else:
                self.send(self.drain, RequeueSteering(pending_id=entry.pending_id))
        self._steering.clear()


def _check_answer(request: OpenRequest, answer: AnswerRequest) -> AgentHostError | None:
    def invalid(text: str) -> AgentHostError:
        return AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message=text)

    if request.kind is RequestKind.PERMISSION and answer.approved is None:
        return invalid(f"request {request.request_id} asks for a permission: pass approved=")
    if request.kind is RequestKind.USER_INPUT and answer.answer is None:
        return invalid(f"request {request.request_id} asks the user a question: pass answer=")
    if request.kind is RequestKind.CLIENT_TOOL:
        if answer.result is None:
            return invalid(f"request {request.request_id} waits for a tool result: pass result=")
        if answer.client_id is not None and answer.client_id != request.client_id:
            return invalid(
                f"only the client that executes {request.tool_name!r} may answer this call"
            )
    return None


def _call_state(turn: _Turn) -> CallState:
    if not turn.sent:
        return CallState.NOT_STARTED
    if turn.settled is None:
        return CallState.PENDING
    if turn.settled.settlement is Settlement.RESOLVED:
        return CallState.RESOLVED
    return CallState.REJECTED


def _ids(requests: list[OpenRequest], kind: RequestKind) -> tuple[str, ...]:
    return tuple(r.request_id for r in requests if r.kind is kind)


NO_REPLY = {
    TurnState.COMPLETE: "[no reply]",
    TurnState.CANCELLED: "[no reply: the user cancelled this turn]",
    TurnState.ERROR: "[no reply: this turn failed]",
}


def _history(turns: tuple[Turn, ...]) -> tuple[HistoryMessage, ...]:
    """A stateless provider's history: strictly alternating user and assistant
    messages, one pair per finished turn, oldest first (the system instructions
    and the new turn's text are the provider's to add around it).

    Every turn contributes its user message (with steering folded into it, in
    order) and the assistant text stored for it, whatever its end. A turn that
    stored no assistant text (it failed or was cancelled before a word, or the
    provider said nothing) gets a placeholder saying so, rather than being
    merged with the next user message: merging would replay its question as
    part of a later prompt, and the model would answer it again.
    """
    messages: list[HistoryMessage] = []
    for turn in turns:
        user = "\n\n".join([turn.message.prompt, *(s.text for s in turn.steering)])
        messages.append(HistoryMessage(role="user", text=user))
        assistant = turn.assistant_text or NO_REPLY[turn.state]
        messages.append(HistoryMessage(role="assistant", text=assistant))
    return tuple(messages)
