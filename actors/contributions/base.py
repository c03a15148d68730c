"""The contribution contract: the base class, what each hook receives, and
what it may answer.

A contribution is constructed once per host and called from many chat and
session actors, each on its own thread: keep no mutable state on `self`
(mementos are the per-chat and per-session memory). Hooks run inside an
actor's handler, so they never block: no I/O, no waiting (memento reads are
served from memory; writes go to the store actor).
"""

from enum import StrEnum
from typing import Any, ClassVar

import attrs

from agenthost.messages.errors import AgentHostError
from agenthost.messages.events import ChatEvent, SessionEvent
from agenthost.messages.state import ChatState, SessionState, Turn


@attrs.frozen(kw_only=True)
class ChatKey:
    """Which chat a hook is about; `chat_id` None means the session itself."""

    session_id: str
    chat_id: str | None = None


class RequestSource(StrEnum):
    CLIENT = "client"  # straight from a client
    QUEUE = "queue"  # a queued message the host is about to run


class RequestKind(StrEnum):
    SEND = "send"
    STEER = "steer"


@attrs.frozen(kw_only=True)
class IncomingRequest:
    """A message about to start a turn (or to steer one), before any side effect.

    `client_id`: the client that sent it (for a queued message, its original
    sender); None for the embedding program. `default_chat`: the session's
    first chat. `subagent`: a subagent's chat.
    """

    chat: ChatKey
    kind: RequestKind
    text: str
    source: RequestSource
    client_id: str | None
    state: ChatState
    session: SessionState
    read_only: bool = False
    default_chat: bool = True
    subagent: bool = False
    pending_id: str | None = None


@attrs.frozen
class Accept:
    """Let the request through to the next contribution (and then the turn)."""


@attrs.frozen(kw_only=True)
class Handled:
    """The request is done without a turn (a local command). `reply` is the
    outcome's text; `actions` are chat actions applied as the client's."""

    reply: str = ""
    actions: tuple[ChatEvent, ...] = ()


@attrs.frozen(kw_only=True)
class Reject:
    """Refuse the request: the send resolves "rejected" with `error`.
    `stage` names who refused (the dispatcher fills in the contribution's id)."""

    error: AgentHostError
    stage: str = ""


Verdict = Accept | Handled | Reject
ACCEPT = Accept()


class TurnEndReason(StrEnum):
    SUCCESS = "success"
    CANCELLED = "cancelled"
    ERROR = "error"
    REJECTED = "rejected"  # admission refused: no turn started
    LOCAL_COMMAND = "local_command"  # handled without a turn
    ABANDONED = "abandoned"  # the host closed it (its producer died or went silent)


@attrs.frozen(kw_only=True)
class TurnEnd:
    """A turn ended, or a request ended without one (rejected, local command:
    then `turn` is None). `resumable`: the error says the turn can be resumed."""

    chat: ChatKey
    reason: TurnEndReason
    state: ChatState
    session: SessionState
    turn: Turn | None = None
    resumable: bool = False
    subagent: bool = False
    default_chat: bool = True
    client_id: str | None = None


@attrs.frozen(kw_only=True)
class ClientAction:
    """A client's action that was applied. `state` is the state after it."""

    chat: ChatKey
    action: ChatEvent | SessionEvent
    client_id: str | None
    state: ChatState | SessionState
    session: SessionState


@attrs.frozen(kw_only=True)
class Dispatch:
    """Any action from any origin, applied or not: `rejection` says why not.
    `before` and `state` are the chat's (or, for a session action, the
    session's) state before and after it (the same when rejected)."""

    chat: ChatKey
    action: ChatEvent | SessionEvent
    from_client: bool
    client_id: str | None
    before: ChatState | SessionState
    state: ChatState | SessionState
    session: SessionState
    rejection: str | None = None
    default_chat: bool = True
    subagent: bool = False


@attrs.frozen(kw_only=True)
class OutgoingTurn:
    """A turn about to reach the provider; `text` as replaced so far."""

    chat: ChatKey
    turn_id: str
    text: str
    state: ChatState
    session: SessionState


@attrs.frozen(kw_only=True)
class Outgoing:
    """What a contribution changes in an outgoing turn: replacement text
    (None: unchanged) and instructions to add."""

    text: str | None = None
    instructions: str = ""


@attrs.frozen(kw_only=True)
class Command:
    """A slash command a contribution handles (on_incoming_request), as clients
    are offered it (AHP's `completions`, /help): `name` with its slash,
    `usage` what follows it (empty: nothing), `description` one line."""

    name: str
    description: str
    usage: str = ""

    @property
    def insert_text(self) -> str:
        """What completing it inserts: the name, and a space where it takes more."""
        return f"{self.name} " if self.usage else self.name


class Contribution:
    """Base of every contribution. Override the hooks you need; the dispatcher
    calls only those. Constructor parameters are injected by name: `mementos`
    (this contribution's durable values), `clock`, `log`, `sessions` and
    `chats` (tell a live session or chat to act). `commands` declares the
    slash commands it handles, so clients are offered them.

    Each contribution is one of a session's customizations (AHP's, a `hook`
    in the host's plugin; actors/contributions/customizations.py): a client
    may turn it off for one session, and its hooks stop running for that
    session. `required` says why one cannot be turned off (empty: it can);
    `description` is what clients are shown."""

    id: ClassVar[str] = ""
    order: ClassVar[int] = 1000
    description: ClassVar[str] = ""
    required: ClassVar[str] = ""
    # The action types on_did_dispatch_action is called for (None: every action).
    # Naming them spares the chat building a Dispatch for each streamed delta.
    observes: ClassVar[tuple[type, ...] | None] = None
    # The action types on_did_apply_client_action is called for (None: every
    # client action). Naming them spares the chat a ClientAction for the others.
    applies: ClassVar[tuple[type, ...] | None] = None
    commands: ClassVar[tuple[Command, ...]] = ()

    def on_incoming_request(self, request: IncomingRequest) -> Verdict:
        return ACCEPT

    def on_turn_end(self, end: TurnEnd) -> None:
        return None

    def on_did_apply_client_action(self, applied: ClientAction) -> None:
        return None

    def on_did_dispatch_action(self, dispatch: Dispatch) -> None:
        return None

    def on_outgoing_turn(self, turn: OutgoingTurn) -> Outgoing | None:
        return None

    def on_hydrate_turns(self, turns: tuple[Turn, ...], *, chat: ChatKey) -> tuple[Turn, ...]:
        return turns

    def on_hydrate_chat(
        self, title: str, draft: str | None, *, chat: ChatKey
    ) -> tuple[str, str | None]:
        return title, draft


HOOKS = (
    "on_incoming_request",
    "on_turn_end",
    "on_did_apply_client_action",
    "on_did_dispatch_action",
    "on_outgoing_turn",
    "on_hydrate_turns",
    "on_hydrate_chat",
)


def overrides(contribution: Contribution, hook: str) -> bool:
    """Whether `contribution` implements `hook` (not just the base's no-op)."""
    method: Any = getattr(type(contribution), hook)
    return method is not getattr(Contribution, hook)
