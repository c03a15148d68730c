"""What a turn is made of: the user's message (with its attachments) and the
response parts in stream order (markdown, reasoning, tool calls, content
references, system notifications, input requests, errors, attribution).

`ResponsePart` is an open union on `kind`: a part of a kind this host does
not know is an `Unknown` and is kept as it came. Re-exported by state.py.
"""

from enum import StrEnum

import attrs

from agenthost.messages.common import (
    AgentSelection,
    ConfirmationOption,
    McpAuthRequirement,
    ModelSelection,
    StringOrMarkdown,
    TextRange,
    ToolCallContributor,
    ToolInput,
    Unknown,
)
from agenthost.messages.errors import AgentHostError, OpenStrEnum
from agenthost.messages.fields import Json, extension, iso_time, wire_name
from agenthost.messages.inputs import ChatInputRequest, InputResponseKind


class OriginKind(OpenStrEnum):
    """Who produced a message. STEERING and QUEUED are ours (a message that came
    from the pending lists); AHP's enum has the rest."""

    USER = "user"
    AGENT = "agent"
    TOOL = "tool"
    AUTOMATION = "automation"
    SYSTEM_NOTIFICATION = "systemNotification"
    STEERING = "steering"
    QUEUED = "queued"


@attrs.frozen(kw_only=True)
class MessageOrigin:
    kind: OriginKind = OriginKind.USER


@attrs.frozen(kw_only=True)
class Attachment:
    """A text file sent with a message (its name and its text). On the wire it is
    AHP's `simple` attachment: `label` is the name, `modelRepresentation` the text."""

    name: str
    text: str
    display_kind: str | None = None
    range: TextRange | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class TextSelection:
    range: TextRange


@attrs.frozen(kw_only=True)
class ResourceAttachment:
    """An attachment by URI (content fetched with resourceRead when needed)."""

    label: str
    uri: str
    size_hint: int | None = None
    content_type: str | None = None
    nonce: str | None = None
    selection: TextSelection | None = None
    display_kind: str | None = None
    range: TextRange | None = None
    meta: Json | None = wire_name("_meta", default=None)
    type: str = attrs.field(default="resource", init=False)


@attrs.frozen(kw_only=True)
class EmbeddedAttachment:
    """Small binary data (base64) delivered with the message."""

    label: str
    data: str
    content_type: str
    selection: TextSelection | None = None
    display_kind: str | None = None
    range: TextRange | None = None
    meta: Json | None = wire_name("_meta", default=None)
    type: str = attrs.field(default="embeddedResource", init=False)


@attrs.frozen(kw_only=True)
class AnnotationsAttachment:
    """Annotations of an annotations channel (all of them, or the listed ids)."""

    label: str
    resource: str
    annotation_ids: tuple[str, ...] | None = None
    display_kind: str | None = None
    range: TextRange | None = None
    meta: Json | None = wire_name("_meta", default=None)
    type: str = attrs.field(default="annotations", init=False)


@attrs.frozen(kw_only=True)
class ChatAttachment:
    """Another chat's transcript through `end_turn` (None: its latest completed turn)."""

    label: str
    resource: str
    end_turn: str | None = None
    display_kind: str | None = None
    range: TextRange | None = None
    meta: Json | None = wire_name("_meta", default=None)
    type: str = attrs.field(default="chat", init=False)


Reference = (
    ResourceAttachment | EmbeddedAttachment | AnnotationsAttachment | ChatAttachment | Unknown
)
"""An AHP attachment that is not inline text; these follow the text
attachments in the wire's `attachments` list."""

MessageAttachment = (
    Attachment
    | ResourceAttachment
    | EmbeddedAttachment
    | AnnotationsAttachment
    | ChatAttachment
    | Unknown
)
"""Any AHP attachment, by its `type` (a text attachment is `simple`)."""


@attrs.frozen(kw_only=True)
class UserMessage:
    """A message that starts or steers a turn: text, where it came from, its
    text attachments, its other attachments (`references`), and the model and
    custom agent it was sent with."""

    text: str
    origin: MessageOrigin = MessageOrigin()
    attachments: tuple[Attachment, ...] = extension(default=())
    references: tuple[Reference, ...] = extension(default=())
    model: ModelSelection | None = None
    agent: AgentSelection | None = None
    meta: Json | None = wire_name("_meta", default=None)

    @property
    def prompt(self) -> str:
        """The text with its attachments, as a model reads it."""
        return with_attachments(self.text, self.attachments)


def with_attachments(text: str, attachments: tuple[Attachment, ...]) -> str:
    """`text`, then each attachment in a fenced block named after its file."""
    blocks = [f'<attachment name="{a.name}">\n{a.text}\n</attachment>' for a in attachments]
    return "\n\n".join([text, *blocks])


# -- response parts -----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class MarkdownPart:
    """A markdown response part; deltas append to `content`."""

    id: str
    content: str = ""
    kind: str = attrs.field(default="markdown", init=False)


@attrs.frozen(kw_only=True)
class ReasoningPart:
    """The model's reasoning; chat/reasoning deltas append to `content`."""

    id: str
    content: str = ""
    kind: str = attrs.field(default="reasoning", init=False)


@attrs.frozen(kw_only=True)
class ContentRefPart:
    """Large response content kept outside the state tree (AHP's contentRef part)."""

    uri: str
    size_hint: int | None = None
    content_type: str | None = None
    nonce: str | None = None
    kind: str = attrs.field(default="contentRef", init=False)


@attrs.frozen(kw_only=True)
class SystemNotificationPart:
    """A notice from the agent harness that the user and the agent both see."""

    content: StringOrMarkdown
    meta: Json | None = wire_name("_meta", default=None)
    kind: str = attrs.field(default="systemNotification", init=False)


@attrs.frozen(kw_only=True)
class InputRequestPart:
    """An input request in the transcript; `response` once a client completed it."""

    request: ChatInputRequest
    response: InputResponseKind | None = None
    kind: str = attrs.field(default="inputRequest", init=False)


@attrs.frozen(kw_only=True)
class ErrorPart:
    """The error a turn stopped at; `resumable` lets a client resume the turn."""

    error: AgentHostError
    resumable: bool | None = None
    kind: str = attrs.field(default="error", init=False)


@attrs.frozen(kw_only=True)
class TextLocation:
    """Where in a text source an attribution points."""

    range: TextRange
    kind: str = attrs.field(default="text", init=False)


@attrs.frozen(kw_only=True)
class PageLocation:
    """Which pages of a paged source (a PDF) an attribution points at."""

    start_page: int
    end_page: int | None = None
    kind: str = attrs.field(default="page", init=False)


SourceLocation = TextLocation | PageLocation | Unknown


@attrs.frozen(kw_only=True)
class AttributionSource:
    id: str
    title: str
    uri: str | None = None
    content_type: str | None = None
    excerpt: str | None = None
    location: SourceLocation | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class AttributionSpan:
    """A range of the target part's text and the sources it rests on."""

    range: TextRange
    source_ids: tuple[str, ...]


@attrs.frozen(kw_only=True)
class AttributionPart:
    """Sources for the text of another response part (`target_part_id`)."""

    id: str
    target_part_id: str
    sources: tuple[AttributionSource, ...] = ()
    spans: tuple[AttributionSpan, ...] = ()
    meta: Json | None = wire_name("_meta", default=None)
    kind: str = attrs.field(default="attribution", init=False)


@attrs.frozen(kw_only=True)
class Usage:
    """Token usage; AHP's UsageInfo (`inputTokens`, `outputTokens`) on the wire."""

    prompt_tokens: int = wire_name("inputTokens", default=0)
    completion_tokens: int = wire_name("outputTokens", default=0)
    cache_read_tokens: int | None = None
    model: str | None = None
    meta: Json | None = wire_name("_meta", default=None)


# -- tool calls -----------------------------------------------------------------------


class ToolCallStatus(OpenStrEnum):
    """AHP's tool-call states; completed and cancelled are terminal."""

    STREAMING = "streaming"
    PENDING_CONFIRMATION = "pending-confirmation"
    RUNNING = "running"
    AUTH_REQUIRED = "auth-required"
    PENDING_RESULT_CONFIRMATION = "pending-result-confirmation"
    COMPLETED = "completed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (ToolCallStatus.COMPLETED, ToolCallStatus.CANCELLED)

    @property
    def waits_for_user(self) -> bool:
        """A confirmation, a result confirmation, or an authentication is due."""
        return self in (
            ToolCallStatus.PENDING_CONFIRMATION,
            ToolCallStatus.PENDING_RESULT_CONFIRMATION,
            ToolCallStatus.AUTH_REQUIRED,
        )

    @property
    def confirmed_before(self) -> bool:
        """Past its confirmation: it carries `confirmed` and any `selected_option`."""
        return self in (
            ToolCallStatus.RUNNING,
            ToolCallStatus.AUTH_REQUIRED,
            ToolCallStatus.PENDING_RESULT_CONFIRMATION,
            ToolCallStatus.COMPLETED,
        )


class ConfirmationReason(StrEnum):
    """How a tool call was confirmed (AHP's ToolCallConfirmationReason; the
    `confirmed` fields keep any string a peer sends)."""

    NOT_NEEDED = "not-needed"
    USER_ACTION = "user-action"
    SETTING = "setting"


@attrs.frozen(kw_only=True)
class ToolCall:
    """One tool call of a turn: AHP's ToolCallState, one class for all its
    statuses (a field a status does not have is None). `reason` says why a
    cancelled call was cancelled: denied, skipped (its turn ended first) or
    result-denied. `partial_input` is the input while it streams; `options`
    are the choices a pending confirmation offers, `selected_option` the one
    the user took; `auth` is the challenge an auth-required call waits on.
    `content`, `structured_content`, `error`, `edits`, `risk_assessment` and
    `meta` are AHP values agenthost passes through. `subagent_chat_id` is ours."""

    tool_call_id: str
    tool_name: str
    display_name: str = ""
    status: ToolCallStatus = ToolCallStatus.STREAMING
    intention: str | None = None
    invocation_message: StringOrMarkdown | None = None
    tool_input: ToolInput | None = None
    confirmed: str | None = None
    success: bool | None = None
    past_tense_message: StringOrMarkdown | None = None
    reason: str | None = None
    subagent_chat_id: str | None = None
    contributor: ToolCallContributor | None = None
    meta: Json | None = wire_name("_meta", default=None)
    partial_input: str | None = None
    content: Json | None = None
    structured_content: Json | None = None
    error: Json | None = None
    reason_message: StringOrMarkdown | None = None
    user_suggestion: UserMessage | None = None
    confirmation_title: StringOrMarkdown | None = None
    risk_assessment: Json | None = None
    edits: Json | None = None
    editable: bool | None = None
    options: tuple[ConfirmationOption, ...] | None = None
    selected_option: ConfirmationOption | None = None
    auth: McpAuthRequirement | None = None
    started_at: int | None = iso_time(default=None)
    duration: int | None = None


@attrs.frozen(kw_only=True)
class ToolCallPart:
    tool_call: ToolCall
    kind: str = attrs.field(default="toolCall", init=False)

    @property
    def id(self) -> str:
        return self.tool_call.tool_call_id


ResponsePart = (
    MarkdownPart
    | ToolCallPart
    | ReasoningPart
    | AttributionPart
    | ContentRefPart
    | SystemNotificationPart
    | InputRequestPart
    | ErrorPart
    | Unknown
)


def markdown_part_id(turn_id: str, number: int = 1) -> str:
    """The id of the host's `number`th markdown part of a turn (a turn's text
    starts a new part after each stable point; a stored turn whose parts are its
    text alone comes back as part 1)."""
    return f"{turn_id}-md{number}"


def part_id(part: ResponsePart) -> str | None:
    """The id actions target a part by (a tool call's is its tool call id); parts
    without one (content refs, notices, input requests, errors) have None."""
    if isinstance(part, MarkdownPart | ReasoningPart | AttributionPart | ToolCallPart):
        return part.id
    if isinstance(part, Unknown):  # a newer kind with an id is still that id's part
        return part.tag("id")
    return None


def markdown_text(parts: tuple[ResponsePart, ...]) -> str:
    return "".join([part.content for part in parts if isinstance(part, MarkdownPart)])
