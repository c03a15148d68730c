"""TurnTrackerActor: the active turn's stage, one per chat.

It owns the chat's provider connection (through the supervisor), turns
provider events into chat actions, and ends turns. Every host-side end goes
through `_end`, which checks that the turn is still active and not already
ended, flushes the assistant text that never became stable, and drops the
per-turn record (DESIGN.md rules 2 and 3):

- idle (the provider's terminal signal) -> complete;
- the send call settles while the turn is still active: for a provider whose
  call settles with its turn the completion was lost -> complete if resolved;
  a rejected call keeps the provider's own error; a call the provider never
  took -> execution_abandoned. No wall clock ever ends a turn;
- the connection dies -> execution_abandoned; the provider is unavailable ->
  provider_unavailable; the user cancels -> cancelled.
"""

from typing import TypeVar

import attrs
import structlog

from agenthost.actors.context import Services
from agenthost.actors.hosted import HostedActor
from agenthost.actors.protocol import (
    ApplyActions,
    AssistantStable,
    BeginTurn,
    CancelActiveTurn,
    ChatReady,
    CloseConnection,
    ConnectionLost,
    ConnectionOpenFailed,
    ConnectionReady,
    EndTurn,
    FromProvider,
    OpenConnection,
    ProviderUnavailable,
    Ref,
)
from agenthost.actors.runtime import handles
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    AssistantDelta,
    ChatEvent,
    ResponsePartAdded,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
)
from agenthost.messages.provider import (
    CallSettled,
    Capabilities,
    HistoryMessage,
    Idle,
    ProviderCancel,
    ProviderSend,
    ReplyDelta,
    ReplyMessage,
    Settlement,
)
from agenthost.messages.state import MarkdownPart, Turn

log = structlog.get_logger(__name__)

E = TypeVar("E", bound=ChatEvent)


@attrs.define
class _Turn:
    """Per-turn record; dropped when the turn ends."""

    turn_id: str
    text: str
    history: tuple[Turn, ...]
    sent: bool = False
    unflushed: list[str] = attrs.field(factory=list)
    part_id: str | None = None
    parts: int = 0
    finish_reason: str | None = None


class TurnTrackerActor(HostedActor):
    def __init__(
        self,
        services: Services,
        *,
        session_id: str,
        chat_id: str,
        provider: str,
        chat: Ref,
        resume: bool,
    ) -> None:
        super().__init__(services)
        self.session_id = session_id
        self.chat_id = chat_id
        self.provider = provider
        self.chat = chat
        self.resume = resume
        self._conn: Ref | None = None
        self._generation = -1
        self._capabilities: Capabilities | None = None
        self._unavailable: AgentHostError | None = None
        self._announced = False
        self._turn: _Turn | None = None
        self._log = log.bind(session_id=session_id, chat_id=chat_id)

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
            CloseConnection(session_id=self.session_id, chat_id=self.chat_id),
        )

    # -- the connection ---------------------------------------------------------------
    @handles(ConnectionReady)
    def _ready(self, message: ConnectionReady) -> None:
        self._conn = message.ref
        self._generation = message.generation
        self._capabilities = message.capabilities
        self._unavailable = None
        self._announce(None)
        if self._turn is not None and not self._turn.sent:
            self._send_turn(self._turn)

    @handles(ConnectionOpenFailed)
    def _open_failed(self, message: ConnectionOpenFailed) -> None:
        self._announce(message.error)
        if self._turn is not None:
            self._end(self._failed(self._turn.turn_id, message.error))

    @handles(ConnectionLost)
    def _lost(self, message: ConnectionLost) -> None:
        if message.generation != self._generation:
            return
        self._conn = None
        turn = self._turn
        if turn is not None and turn.sent:
            self._end(
                self._failed(
                    turn.turn_id,
                    AgentHostError(
                        code=ErrorCode.EXECUTION_ABANDONED,
                        message=f"The provider connection failed: {message.error.message}",
                    ),
                )
            )

    @handles(ProviderUnavailable)
    def _provider_unavailable(self, message: ProviderUnavailable) -> None:
        self._conn = None
        self._unavailable = message.error
        if self._turn is not None:
            self._end(self._failed(self._turn.turn_id, message.error))

    def _announce(self, error: AgentHostError | None) -> None:
        if not self._announced:
            self._announced = True
            self.send(self.chat, ChatReady(chat_id=self.chat_id, error=error))

    # -- turns --------------------------------------------------------------------------
    @handles(BeginTurn)
    def _begin(self, message: BeginTurn) -> None:
        turn = _Turn(turn_id=message.turn_id, text=message.text, history=message.history)
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
        self.send(
            self._conn,
            ProviderSend(
                session_id=self.session_id,
                chat_id=self.chat_id,
                turn_id=turn.turn_id,
                text=turn.text,
                history=history,
            ),
        )

    @handles(CancelActiveTurn)
    def _cancel(self, message: CancelActiveTurn) -> None:
        turn = self._turn
        if turn is None or turn.turn_id != message.turn_id:
            return
        if turn.sent:
            self.send(
                self._conn,
                ProviderCancel(
                    session_id=self.session_id, chat_id=self.chat_id, turn_id=turn.turn_id
                ),
            )
        self._end(self._stamp(TurnCancelled(turn_id=turn.turn_id)))

    @handles(FromProvider)
    def _from_provider(self, message: FromProvider) -> None:
        if message.generation != self._generation:
            return
        event = message.event
        turn = self._turn
        if turn is None or getattr(event, "turn_id", None) != turn.turn_id:
            return
        match event:
            case ReplyDelta():
                self._delta(turn, event.text)
            case ReplyMessage():
                if event.text and not turn.unflushed:
                    self._delta(turn, event.text)
                turn.finish_reason = event.finish_reason
                self._stable(turn)
            case Idle():
                self._end(self._stamp(TurnCompleted(turn_id=turn.turn_id)))
            case CallSettled():
                self._call_settled(turn, event)

    def _delta(self, turn: _Turn, text: str) -> None:
        actions: list[ChatEvent] = []
        if turn.part_id is None:
            turn.parts += 1
            turn.part_id = f"{turn.turn_id}-md{turn.parts}"
            actions.append(
                self._stamp(
                    ResponsePartAdded(turn_id=turn.turn_id, part=MarkdownPart(id=turn.part_id))
                )
            )
        actions.append(
            self._stamp(AssistantDelta(turn_id=turn.turn_id, part_id=turn.part_id, text=text))
        )
        turn.unflushed.append(text)
        self.send(self.chat, ApplyActions(actions=tuple(actions)))

    def _stable(self, turn: _Turn) -> None:
        """Assistant text became stable (a message ended, or the stream did): persist it."""
        if turn.unflushed:
            self.send(
                self.chat, AssistantStable(turn_id=turn.turn_id, text="".join(turn.unflushed))
            )
            turn.unflushed.clear()
        turn.part_id = None

    def _call_settled(self, turn: _Turn, event: CallSettled) -> None:
        assert self._capabilities is not None
        if event.settlement is Settlement.RESOLVED:
            if self._capabilities.call_settles_with_turn:
                self._log.warning("turn_completion_lost", turn_id=turn.turn_id)
                self._end(self._stamp(TurnCompleted(turn_id=turn.turn_id)))
            return
        if event.settlement is Settlement.REJECTED and event.error is not None:
            error = event.error
        else:
            error = AgentHostError(
                code=ErrorCode.EXECUTION_ABANDONED,
                message="The provider never started this turn.",
            )
        self._end(self._failed(turn.turn_id, error))

    def _failed(self, turn_id: str, error: AgentHostError) -> TurnFailed:
        return self._stamp(TurnFailed(turn_id=turn_id, error=error))

    def _stamp(self, event: E) -> E:
        return attrs.evolve(event, session_id=self.session_id, chat_id=self.chat_id)

    def _end(self, action: TurnCompleted | TurnCancelled | TurnFailed) -> None:
        """The one host-side turn end: checks, flushes, drops the record."""
        turn = self._turn
        if turn is None or turn.turn_id != action.turn_id:
            return
        self._stable(turn)  # the stream's end flushes what is left (rule 3)
        self._turn = None
        self.send(self.chat, EndTurn(action=action, finish_reason=turn.finish_reason))


def _history(turns: tuple[Turn, ...]) -> tuple[HistoryMessage, ...]:
    messages: list[HistoryMessage] = []
    for turn in turns:
        messages.append(HistoryMessage(role="user", text=turn.user_text))
        messages.append(HistoryMessage(role="assistant", text=turn.assistant_text))
    return tuple(messages)
