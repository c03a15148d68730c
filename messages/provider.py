"""The provider protocol: what the host and a provider adapter say to each other.

Host -> provider: ProviderSend, ProviderSteer, ProviderWithdraw, ProviderCancel,
ProviderResume, ProviderAnswer. Provider -> host: UserMessageEcho, ReplyDelta,
ReplyReasoning, ReplyMessage, UsageUpdated, ToolCallStarted, ToolInputDelta,
ToolCallCompleted, HostRequestOpened, Idle, CallSettled, ConnectionFailed, ProviderRefReported.

What the host asks the user for carries AHP 1.1's shapes: a permission the
confirmation options the provider offers (ConfirmationOption, messages/common.py)
and whether it takes an edited tool input; a question its questions with their
choices (InputQuestion, messages/inputs.py); an authentication the challenge an
MCP server's tool call is blocked on (McpAuthRequirement: the protected
resource, the scopes, never a token). The answer goes back as the user gave
it: the option chosen, the edited input, the answers by question id, the
token for the resource (`ProviderAnswer.token`, kept out of every repr).
Providers differ; each declares `Capabilities` and the host never infers them.
"""

from enum import StrEnum

import attrs

from agenthost.messages.common import ConfirmationOption, McpAuthRequirement
from agenthost.messages.errors import AgentHostError
from agenthost.messages.inputs import Answers, InputQuestion, unique_answers
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
    tool's result, or an error (denied, declined, client gone, turn over).

    A permission's answer names the `option` the user chose (one the request
    offered; `approved` follows its kind) and an `edited_input` (JSON text) when
    the user changed the tool's input. A question's `answers` are keyed by
    question id (`answer` is the first one's text); `approved` False: declined.
    A denied permission carries the user's `reason` (AHP's cancellation reason,
    `denied` unless the user gave another) and `reason_message` (their words,
    if any), for a backend that can tell its model why.
    An authentication's answer is the `token` the user gave for the resource
    its call waits on (never in a repr, a log line or the store), or an
    `error` (its turn ended).
    """

    session_id: str
    chat_id: str
    request_id: str
    approved: bool | None = None
    answer: str | None = None
    result: str | None = None
    error: str | None = None
    option: str | None = None
    edited_input: str | None = None
    answers: Answers | None = attrs.field(default=None, converter=unique_answers)
    reason: str | None = None
    reason_message: str | None = None
    token: str | None = attrs.field(default=None, repr=False)


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
class ReplyReasoning:
    """Streamed reasoning: the model's thinking (or the summary of it the
    provider shows), apart from its reply; with `subagent_id`, a subagent's."""

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
    HostRequestOpened(permission) follows. With `streaming` its input is still
    coming: ToolInputDelta events follow, then this call's ToolCallStarted
    again without `streaming`, with the whole input, makes it ready as above.
    `mcp_server` names the MCP server whose tool it is (AHP's contributor of
    kind mcp, its customization id): only such a call may wait for
    authentication."""

    turn_id: str
    tool_call_id: str
    name: str
    arguments: str = "{}"
    needs_permission: bool = False
    streaming: bool = False
    mcp_server: str | None = None


@attrs.frozen(kw_only=True)
class ToolInputDelta:
    """A piece of a streaming call's input (`content`, appended), and what the
    call says it is doing meanwhile (`invocation_message`, replacing)."""

    turn_id: str
    tool_call_id: str
    content: str | None = None
    invocation_message: str | None = None


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
    AUTHENTICATION = "authentication"


@attrs.frozen(kw_only=True)
class HostRequestOpened:
    """The provider waits for the host: a permission, user input, a client
    tool's result (then `request_id` is the tool call id), or a token for the
    protected resource a running MCP tool call needs (`auth`, the challenge;
    `tool_call_id` the call it blocks).

    A permission offers `options` where the provider has them (else the host
    offers none: approve or deny) and is `editable` when the provider takes an
    edited tool input. User input asks `question`, or `questions` with their
    choices (each one's `options`); a bare `question` is one text question.
    """

    turn_id: str
    request_id: str
    kind: HostRequestKind
    tool_call_id: str | None = None
    tool_name: str | None = None
    question: str | None = None
    arguments: str = "{}"
    options: tuple[ConfirmationOption, ...] = ()
    editable: bool = False
    questions: tuple[InputQuestion, ...] = ()
    auth: McpAuthRequirement | None = None


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
    | ReplyReasoning
    | ReplyMessage
    | UsageUpdated
    | ToolCallStarted
    | ToolInputDelta
    | ToolCallCompleted
    | HostRequestOpened
    | SubagentStarted
    | Idle
    | CallSettled
    | ConnectionFailed
    | ProviderRefReported
)
