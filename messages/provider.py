"""The provider protocol: what the host and a provider adapter say to each other.

Host -> provider: ProviderSend, ProviderSteer, ProviderWithdraw, ProviderCancel,
ProviderResume. Provider -> host: UserMessageEcho, ReplyDelta, ReplyMessage,
UsageUpdated, ToolCallStarted, ToolCallCompleted, Idle, CallSettled, ConnectionFailed,
ProviderRefReported.
Providers differ; each declares `Capabilities` and the host never infers them.
"""

from enum import StrEnum

import attrs

from agenthost.messages.errors import AgentHostError
from agenthost.messages.state import Attachment


@attrs.frozen(kw_only=True)
class Capabilities:
    """What a provider does, declared (docs/design-rules.md: the host never infers it)."""

    call_settles_with_turn: bool
    can_withdraw_steering: bool
    stateful_prompt: bool
    accepts_steering: bool


@attrs.frozen(kw_only=True)
class HistoryMessage:
    role: str  # "user" | "assistant"
    text: str


# -- host -> provider ---------------------------------------------------------


@attrs.frozen(kw_only=True)
class ProviderSend:
    """Start a turn. `history` is sent only to providers without a stateful prompt.
    `instructions`: what the host's contributions add for this turn (system text)."""

    session_id: str
    chat_id: str
    turn_id: str
    text: str
    history: tuple[HistoryMessage, ...] = ()
    instructions: str = ""
    model: str | None = None  # the session's model override, if any
    attachments: tuple[Attachment, ...] = ()  # also rendered into `text` already


@attrs.frozen(kw_only=True)
class ProviderSteer:
    session_id: str
    chat_id: str
    turn_id: str
    pending_id: str
    text: str


@attrs.frozen(kw_only=True)
class ProviderWithdraw:
    session_id: str
    chat_id: str
    pending_id: str
    provider_message_id: str
    text: str


@attrs.frozen(kw_only=True)
class ProviderCancel:
    session_id: str
    chat_id: str
    turn_id: str


@attrs.frozen(kw_only=True)
class ProviderAnswer:
    """The host's answer to a HostRequestOpened: approval, user input, a client
    tool's result, or an error (denied, client gone, turn over)."""

    session_id: str
    chat_id: str
    request_id: str
    approved: bool | None = None
    answer: str | None = None
    result: str | None = None
    error: str | None = None


@attrs.frozen(kw_only=True)
class ProviderResume:
    """Reopen the chat's provider session. `provider_ref`: the last reference the
    adapter reported for this chat (ProviderRefReported), None if it never did."""

    session_id: str
    chat_id: str
    provider_ref: str | None = None


# -- provider -> host ---------------------------------------------------------


@attrs.frozen(kw_only=True)
class UserMessageEcho:
    """The model consumed a user message (its own turn's, or steering).

    `turn_id` is the provider's run: the turn id of the send that started it,
    or the pending id of the steering message it started with. `starts_turn`
    says the provider starts a new turn for this message (copilot) instead of
    folding it into the running one (claude, codex).
    """

    turn_id: str
    text: str
    provider_message_id: str | None = None
    starts_turn: bool = False


@attrs.frozen(kw_only=True)
class SteerAnswered:
    """The provider took a steering message (with its id), or refused it."""

    pending_id: str
    provider_message_id: str | None = None
    error: AgentHostError | None = None
    no_active_turn: bool = False


@attrs.frozen(kw_only=True)
class WithdrawAnswered:
    """The provider's answer to a withdraw: `removed` False means the model had it."""

    pending_id: str
    removed: bool


@attrs.frozen(kw_only=True)
class ReplyDelta:
    """Streamed assistant text; with `subagent_id`, a subagent's."""

    turn_id: str
    text: str
    subagent_id: str | None = None


@attrs.frozen(kw_only=True)
class ReplyMessage:
    """An assistant message became stable. `finish_reason` None: the stream gave none."""

    turn_id: str
    text: str
    finish_reason: str | None = None
    subagent_id: str | None = None


@attrs.frozen(kw_only=True)
class UsageUpdated:
    """Token usage of the turn so far (the latest report wins)."""

    turn_id: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@attrs.frozen(kw_only=True)
class ToolCallStarted:
    """A tool call began. Without `needs_permission` it runs at once; with it a
    HostRequestOpened(permission) follows."""

    turn_id: str
    tool_call_id: str
    name: str
    arguments: str = "{}"
    needs_permission: bool = False


@attrs.frozen(kw_only=True)
class ToolCallCompleted:
    turn_id: str
    tool_call_id: str
    result: str = ""
    success: bool = True


class HostRequestKind(StrEnum):
    PERMISSION = "permission"
    USER_INPUT = "user_input"
    CLIENT_TOOL = "client_tool"


@attrs.frozen(kw_only=True)
class HostRequestOpened:
    """The provider waits for the host: a permission, user input, or a client
    tool's result (then `request_id` is the tool call id)."""

    turn_id: str
    request_id: str
    kind: HostRequestKind
    tool_call_id: str | None = None
    tool_name: str | None = None
    question: str | None = None
    arguments: str = "{}"


@attrs.frozen(kw_only=True)
class Idle:
    """The backend finished its work for the turn (or, with `subagent_id`, the
    subagent finished its own): the terminal signal."""

    turn_id: str
    subagent_id: str | None = None


@attrs.frozen(kw_only=True)
class SubagentStarted:
    """A tool call spawned a subagent. `background`: the spawning call returns at
    once and the subagent runs on; otherwise the call resolves with its work."""

    turn_id: str
    tool_call_id: str
    subagent_id: str
    prompt: str
    background: bool = False


class Settlement(StrEnum):
    RESOLVED = "resolved"
    REJECTED = "rejected"
    NOT_STARTED = "not_started"


@attrs.frozen(kw_only=True)
class CallSettled:
    """The provider's send call returned (resolved) or failed (rejected / not started)."""

    turn_id: str
    settlement: Settlement
    provider_message_id: str | None = None
    error: AgentHostError | None = None


@attrs.frozen(kw_only=True)
class ProviderRefReported:
    """What the backend needs to resume this chat's conversation (a Copilot or
    Claude session id, a Codex thread id), opaque to the host: it is stored with
    the chat and handed back in ProviderResume, so no user keeps such mappings."""

    provider_ref: str


@attrs.frozen(kw_only=True)
class ConnectionFailed:
    """The provider connection died (a crashed or hung backend)."""

    error: AgentHostError


ProviderEvent = (
    UserMessageEcho
    | SteerAnswered
    | WithdrawAnswered
    | ReplyDelta
    | ReplyMessage
    | UsageUpdated
    | ToolCallStarted
    | ToolCallCompleted
    | HostRequestOpened
    | SubagentStarted
    | Idle
    | CallSettled
    | ConnectionFailed
    | ProviderRefReported
)
