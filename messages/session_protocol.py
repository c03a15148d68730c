"""AHP's session commands and the root's notifications, as frozen values: the
params and results of createSession, createChat, listSessions, fetchTurns,
authenticate, completions and the session config, and root/sessionAdded,
sessionRemoved, sessionSummaryChanged, progress and auth/required.

Part of messages/protocol.py's vocabulary (it re-exports every name here and
registers them in WIRE_TYPES); apart only to keep each module readable.
"""

import attrs

from agenthost.messages.common import (
    ROOT_CHANNEL,
    AuthRequiredReason,
    ChangesSummary,
    ProjectInfo,
    ProtectedResourceMetadata,
    RepositorySource,
    SessionOrigin,
    Timestamp,
    WorkingDirectory,
)
from agenthost.messages.fields import Json, extension, wire_name
from agenthost.messages.parts import MessageAttachment, UserMessage
from agenthost.messages.state import (
    ActiveClient,
    Artifact,
    ChatStatus,
    ChatSummary,
    SideChatSelection,
    Turn,
)

# -- sessions: commands and root notifications ----------------------------------------


@attrs.frozen(kw_only=True)
class SessionListing:
    """What a session summary and a change to one share: its optional fields."""

    activity: str | None = None
    origin: SessionOrigin | None = None
    project: ProjectInfo | None = None
    working_directories: tuple[WorkingDirectory, ...] | None = None
    repositories: tuple[RepositorySource, ...] | None = None
    changes: ChangesSummary | None = None
    chats: tuple[ChatSummary, ...] | None = None
    default_chat: str | None = None
    artifacts: tuple[Artifact, ...] | None = None
    annotations: Json | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class SessionSummary(SessionListing):
    """A session as AHP lists it (listSessions, root/sessionAdded). Not
    agenthost.messages.state.SessionSummary, the embedding API's row."""

    resource: str
    provider: str
    title: str
    status: ChatStatus
    created_at: Timestamp
    modified_at: Timestamp


@attrs.frozen(kw_only=True)
class SessionSummaryChanges(SessionListing):
    """The fields of a session summary that changed (the others are None)."""

    title: str | None = None
    status: ChatStatus | None = None
    modified_at: Timestamp | None = None


@attrs.frozen(kw_only=True)
class SessionAddedParams:
    channel: str
    summary: SessionSummary


@attrs.frozen(kw_only=True)
class SessionRemovedParams:
    channel: str
    session: str


@attrs.frozen(kw_only=True)
class SessionSummaryChangedParams:
    """`changes`: the summary fields that changed (a partial SessionSummary)."""

    channel: str
    session: str
    changes: SessionSummaryChanges


@attrs.frozen(kw_only=True)
class ProgressParams:
    """Progress of a long request that offered a `progress_token` (root/progress)."""

    channel: str
    progress_token: str
    progress: int
    total: int | None = None
    message: str | None = None


@attrs.frozen(kw_only=True)
class AuthRequiredParams:
    """auth/required: `resource` is RFC 9728 metadata (older peers sent its URI
    alone); `reason` is open: a newer peer's reason is kept as sent."""

    channel: str
    resource: str | ProtectedResourceMetadata
    reason: AuthRequiredReason | None = None


@attrs.frozen(kw_only=True)
class AuthenticateParams:
    """A bearer token for a protected resource; `expires_in`: its remaining
    lifetime in seconds when sent (absent: unknown). An empty token revokes."""

    resource: str
    token: str
    channel: str = ROOT_CHANNEL
    expires_in: int | None = None
    scopes: tuple[str, ...] | None = None


@attrs.frozen(kw_only=True)
class EmptyResult:
    """The `{}` result of authenticate, fetchTurns (0.5.1 on) and resource commands."""


@attrs.frozen(kw_only=True)
class CreateSessionParams:
    """`channel` is the new session's URI, chosen by the client."""

    channel: str
    provider: str | None = None
    model: str | None = None
    working_directories: tuple[str, ...] = extension(default=())
    repositories: tuple[RepositorySource, ...] | None = None
    config: Json | None = None
    active_client: ActiveClient | None = None
    progress_token: str | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class DisposeSessionParams:
    channel: str


@attrs.frozen(kw_only=True)
class ChatSource:
    """A new chat's source: a fork copies history through `turn_id`; a side chat
    takes it as context (with the selected text, if any)."""

    kind: str
    chat: str
    turn_id: str
    selection: SideChatSelection | None = None


@attrs.frozen(kw_only=True)
class CreateChatParams:
    """`channel`: the session the chat joins; `chat`: its URI when the client
    chooses it (1.x), else the host allocates one (CreateChatResult)."""

    channel: str
    chat: str | None = None
    title: str | None = None
    initial_message: UserMessage | None = None
    source: ChatSource | None = None
    working_directories: tuple[str, ...] | None = None


@attrs.frozen(kw_only=True)
class CreateChatResult:
    chat: str


@attrs.frozen(kw_only=True)
class DisposeChatParams:
    channel: str


@attrs.frozen(kw_only=True)
class ListSessionsParams:
    channel: str = ROOT_CHANNEL
    cursor: str | None = None
    limit: int | None = None


@attrs.frozen(kw_only=True)
class ListSessionsResult:
    items: tuple[SessionSummary, ...] = ()
    next_cursor: str | None = None


@attrs.frozen(kw_only=True)
class FetchTurnsParams:
    """Older turns of a chat: from 0.5.1 by `cursor` (the chat's
    turnsNextCursor; the turns arrive as chat/turnsLoaded), before that by
    `before` (a turn id; None: the newest) and `limit`."""

    channel: str
    cursor: str | None = None
    before: str | None = None
    limit: int | None = None


@attrs.frozen(kw_only=True)
class FetchTurnsResult:
    """Before 0.5.1: the turns, oldest first, and whether older ones remain.
    From 0.5.1 the result is `{}` (both None)."""

    turns: tuple[Turn, ...] | None = None
    has_more: bool | None = None


@attrs.frozen(kw_only=True)
class CompletionsParams:
    """Completions for the text a user is composing in a chat, at `offset`
    (UTF-16 code units)."""

    channel: str
    kind: str
    text: str
    offset: int


@attrs.frozen(kw_only=True)
class CompletionItem:
    """Replace [range_start, range_end) with `insert_text` and attach `attachment`."""

    insert_text: str
    attachment: MessageAttachment
    range_start: int | None = None
    range_end: int | None = None


@attrs.frozen(kw_only=True)
class CompletionsResult:
    items: tuple[CompletionItem, ...] = ()


@attrs.frozen(kw_only=True)
class ResolveSessionConfigParams:
    channel: str = ROOT_CHANNEL
    provider: str | None = None
    working_directory: str | None = None
    repositories: tuple[RepositorySource, ...] | None = None
    config: Json | None = None


@attrs.frozen(kw_only=True)
class ResolveSessionConfigResult:
    schema: Json
    values: Json


@attrs.frozen(kw_only=True)
class SessionConfigCompletionsParams:
    property: str
    channel: str = ROOT_CHANNEL
    provider: str | None = None
    working_directory: str | None = None
    repositories: tuple[RepositorySource, ...] | None = None
    config: Json | None = None
    query: str | None = None


@attrs.frozen(kw_only=True)
class ConfigValueItem:
    value: str
    label: str
    description: str | None = None


@attrs.frozen(kw_only=True)
class SessionConfigCompletionsResult:
    items: tuple[ConfigValueItem, ...] = ()
