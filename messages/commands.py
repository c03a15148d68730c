"""Client -> host commands (imperative names) and their replies.

The public surface turns each call into one of these and asks the owning
actor; replies are `<Command>Reply` values or `TurnOutcome`.
"""

from enum import StrEnum

import attrs

from agenthost.messages.common import StringOrMarkdown
from agenthost.messages.errors import AgentHostError
from agenthost.messages.inputs import Answers, InputAnswer, unique_answers
from agenthost.messages.session_events import CustomizationToggled
from agenthost.messages.state import (
    ActiveClient,
    Attachment,
    ChatSummary,
    ClientTool,
    SessionState,
    SessionSummary,
    Worktree,
)


@attrs.frozen(kw_only=True)
class CreateSession:
    provider: str
    session_id: str | None = None
    worktree: Worktree | None = None


@attrs.frozen(kw_only=True)
class OpenSession:
    session_id: str


@attrs.frozen(kw_only=True)
class ListSessions:
    pass


@attrs.frozen(kw_only=True)
class DisposeSession:
    session_id: str


@attrs.frozen(kw_only=True)
class TruncateChat:
    """Keep the turns up to and including `turn_id` (None: none)."""

    turn_id: str | None = None


@attrs.frozen(kw_only=True)
class SendMessage:
    """`client_id`: the client that sent it (None: the embedding program).
    `turn_id` / `pending_id`: ids the client chose (AHP clients do) for the
    turn it starts or the queue entry it makes; the host's own otherwise."""

    text: str
    client_id: str | None = None
    turn_id: str | None = None
    pending_id: str | None = None
    attachments: tuple[Attachment, ...] = ()


@attrs.frozen(kw_only=True)
class SteerMessage:
    text: str
    client_id: str | None = None
    pending_id: str | None = None


@attrs.frozen(kw_only=True)
class SetDraft:
    text: str | None
    client_id: str | None = None


@attrs.frozen(kw_only=True)
class SetReadOnly:
    read_only: bool


@attrs.frozen(kw_only=True)
class CreateChat:
    pass


@attrs.frozen(kw_only=True)
class DisposeChat:
    chat_id: str


@attrs.frozen(kw_only=True)
class SetSessionFlags:
    """A client's change to the session entry: title, read, archived, config.
    Only the fields given change."""

    title: str | None = None
    read: bool | None = None
    archived: bool | None = None
    config: tuple[tuple[str, str], ...] | None = None
    client_id: str | None = None


@attrs.frozen(kw_only=True)
class ToggleCustomization:
    """A client turns one of the session's customizations on or off (AHP's
    session/customizationToggled). Answered with the action the host applied:
    its `enabled` and `enablement` both set."""

    action: CustomizationToggled
    client_id: str | None = None


@attrs.frozen(kw_only=True)
class GetSessionSummary:
    pass


@attrs.frozen(kw_only=True)
class GetSessionState:
    pass


@attrs.frozen(kw_only=True)
class GetSessionView:
    """The session's entry, summary and chat catalog at one instant."""


@attrs.frozen(kw_only=True)
class GetSessionViewReply:
    """`chats`: every chat, the default first, each with its status;
    `default_chat`: its id ("" when it has none)."""

    entry: SessionState
    summary: SessionSummary
    chats: tuple[ChatSummary, ...]
    default_chat: str


@attrs.frozen(kw_only=True)
class RemovePendingMessage:
    pending_id: str
    client_id: str | None = None


@attrs.frozen(kw_only=True)
class EditPendingMessage:
    pending_id: str
    text: str


@attrs.frozen(kw_only=True)
class ReorderQueue:
    pending_ids: tuple[str, ...]


@attrs.frozen(kw_only=True)
class AnswerRequest:
    """A client's answer to an open request. `client_id` names who answers.

    A permission: `approved`, and/or the `option` chosen among those it offers
    (approved follows the option's kind), with an `edited_input` (JSON text)
    where the tool call takes one; `request_id` may be the tool call's id. User
    input: `answer` (text for its first question) or `answers` by question id
    (AHP's InputAnswer); `approved` False declines it, and `cancelled` says the
    user dismissed it rather than declined. A client tool: `result`; with
    `confirm_result` the model gets it only once the user confirms it
    (ConfirmToolResult). A denied permission may say why: `reason` (AHP's
    cancellation reason, `denied` when not given) and `reason_message` (the
    user's words).
    """

    request_id: str
    approved: bool | None = None
    answer: str | None = None
    result: str | None = None
    client_id: str | None = None
    option: str | None = None
    edited_input: str | None = None
    answers: Answers | None = attrs.field(default=None, converter=unique_answers)
    cancelled: bool = False
    confirm_result: bool = False
    reason: str | None = None
    reason_message: StringOrMarkdown | None = None


@attrs.frozen(kw_only=True)
class SetInputAnswer:
    """A client drafts, submits or skips one answer of an open input request
    (None clears it); the answers synced so are the request's until it completes."""

    request_id: str
    question_id: str
    answer: InputAnswer | None = None
    client_id: str | None = None


@attrs.frozen(kw_only=True)
class SetChatFlags:
    """A client marks a chat read or unread, archived or not (None: unchanged);
    the chat's status bits, as AHP's chat/isReadChanged and isArchivedChanged."""

    read: bool | None = None
    archived: bool | None = None
    client_id: str | None = None


@attrs.frozen(kw_only=True)
class ResumeTurn:
    """Run again the latest turn, which stopped at a resumable error."""

    turn_id: str
    client_id: str | None = None


@attrs.frozen(kw_only=True)
class ChangeToolContent:
    """The client executing a tool call reports its partial content (AHP's
    ToolResultContent[] as JSON text), replacing what it reported before."""

    tool_call_id: str
    content: str
    client_id: str | None = None


@attrs.frozen(kw_only=True)
class ConfirmToolResult:
    """The user lets a client tool's held result reach the model, or not."""

    tool_call_id: str
    approved: bool
    client_id: str | None = None


@attrs.frozen(kw_only=True)
class SupplyToken:
    """A client gives the token for a protected `resource` that tool calls of
    the chat's running turn wait on (AHP's `authenticate` for a resource not
    the server's own). The token goes to the provider and nowhere else: it is
    kept out of the repr, and no log line or store row carries it."""

    resource: str
    token: str = attrs.field(repr=False)
    client_id: str | None = None


@attrs.frozen(kw_only=True)
class GetDiagnostics:
    pass


@attrs.frozen(kw_only=True)
class SetClientTools:
    """A client (any id the embedder or server chooses) executes these tools.
    `shown`: the session state's entry for it beyond its id and tools (AHP's
    SessionActiveClient: displayName, _meta, customizations)."""

    client_id: str
    tools: tuple[ClientTool, ...]
    shown: ActiveClient | None = None


@attrs.frozen(kw_only=True)
class RemoveClient:
    client_id: str


@attrs.frozen(kw_only=True)
class GetSessionStatus:
    pass


@attrs.frozen(kw_only=True)
class CancelTurn:
    """Cancel the running turn; with `turn_id`, that turn: the running one, or a
    queued send's (removed before it runs), else refused saying why."""

    turn_id: str | None = None
    client_id: str | None = None


@attrs.frozen(kw_only=True)
class GetChatState:
    pass


class OutcomeState(StrEnum):
    COMPLETE = "complete"
    CANCELLED = "cancelled"
    ERROR = "error"
    REJECTED = "rejected"
    HANDLED = "handled"
    REMOVED = "removed"


@attrs.frozen(kw_only=True)
class TurnOutcome:
    """How a send ended: the turn's state, its final assistant text, its error."""

    state: OutcomeState
    text: str = ""
    error: AgentHostError | None = None
    turn_id: str | None = None


class CallState(StrEnum):
    NOT_STARTED = "not_started"
    PENDING = "pending"
    RESOLVED = "resolved"
    REJECTED = "rejected"


@attrs.frozen(kw_only=True)
class TurnDiagnostics:
    """Why a turn is where it is. Nothing acts on it: a person reads it.

    `quiet_s` is how long the provider has said nothing (host clock);
    `provider` is the provider's own view, as text pairs.
    """

    turn_id: str
    call_state: CallState
    provider_started: bool
    parked_permissions: tuple[str, ...] = ()
    parked_user_input: tuple[str, ...] = ()
    parked_client_tools: tuple[str, ...] = ()
    quiet_s: float = 0.0
    provider: tuple[tuple[str, str], ...] = ()
