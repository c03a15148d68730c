"""Session and root channel actions, which are also the session and root
reducers' actions (re-exported by events.py).

Each class is one AHP action under a Python name (`wire_type` is its AHP
type). `InputNeededSet`/`InputNeededRemoved` are ours (which chats wait on
the user, `x-` on the wire); AHP's `session/inputNeededSet` and
`session/inputNeededRemoved` carry requests (`SessionInputNeededSet`,
`SessionInputNeededRemoved`).
"""

from typing import ClassVar

import attrs

from agenthost.messages.common import (
    AgentSelection,
    ChangesSummary,
    ModelSelection,
    ToolDefinition,
    WorkingDirectory,
)
from agenthost.messages.customizations import AnyCustomization, Enablement, McpServerState
from agenthost.messages.errors import AgentHostError
from agenthost.messages.fields import Json, as_object, extension, iso_time, unique_pairs, wire_name
from agenthost.messages.state import (
    ActiveClient,
    AgentInfo,
    ChatInteractivity,
    ChatStatus,
    ChatSummary,
    SessionInputRequest,
    SessionState,
)


@attrs.frozen(kw_only=True)
class SessionEvent:
    wire_type: ClassVar[str] = ""
    session_id: str = extension(default="")


@attrs.frozen(kw_only=True)
class SessionReady(SessionEvent):
    """The session's backend is up: lifecycle creating -> ready."""

    wire_type: ClassVar[str] = "session/ready"


@attrs.frozen(kw_only=True)
class SessionCreationFailed(SessionEvent):
    """The session's backend failed to start: lifecycle creating -> failed."""

    wire_type: ClassVar[str] = "session/creationFailed"
    error: AgentHostError


@attrs.frozen(kw_only=True)
class ChatAdded(SessionEvent):
    """A chat joined the session's catalog (upsert by resource)."""

    wire_type: ClassVar[str] = "session/chatAdded"
    summary: ChatSummary


@attrs.frozen(kw_only=True)
class ChatRemoved(SessionEvent):
    wire_type: ClassVar[str] = "session/chatRemoved"
    chat: str


@attrs.frozen(kw_only=True)
class ChatUpdated(SessionEvent):
    """Changed fields of one chat's summary (None: unchanged); AHP nests them in
    `changes` on the wire."""

    wire_type: ClassVar[str] = "session/chatUpdated"
    chat: str
    title: str | None = None
    status: ChatStatus | None = None
    modified_at: int | None = iso_time(default=None)
    activity: str | None = None
    interactivity: ChatInteractivity | None = None
    parent_chat: str | None = None
    working_directories: tuple[str, ...] | None = None
    changes: ChangesSummary | None = None


@attrs.frozen(kw_only=True)
class ChatsReordered(SessionEvent):
    """The chat catalog's new order: every chat's resource, once each."""

    wire_type: ClassVar[str] = "session/chatsReordered"
    order: tuple[str, ...]


@attrs.frozen(kw_only=True)
class DefaultChatChanged(SessionEvent):
    wire_type: ClassVar[str] = "session/defaultChatChanged"
    default_chat: str | None = None


@attrs.frozen(kw_only=True)
class ActiveClientSet(SessionEvent):
    """A client joined the session's active clients or refreshed its entry."""

    wire_type: ClassVar[str] = "session/activeClientSet"
    active_client: ActiveClient


@attrs.frozen(kw_only=True)
class ActiveClientRemoved(SessionEvent):
    wire_type: ClassVar[str] = "session/activeClientRemoved"
    client_id: str


@attrs.frozen(kw_only=True)
class SessionTitleChanged(SessionEvent):
    """`by_user` False: a title the host derived, which never replaces the user's."""

    wire_type: ClassVar[str] = "session/titleChanged"
    title: str
    by_user: bool = extension(default=True)


@attrs.frozen(kw_only=True)
class IsReadChanged(SessionEvent):
    wire_type: ClassVar[str] = "session/isReadChanged"
    read: bool = wire_name("isRead")


@attrs.frozen(kw_only=True)
class IsArchivedChanged(SessionEvent):
    wire_type: ClassVar[str] = "session/isArchivedChanged"
    archived: bool = wire_name("isArchived")


@attrs.frozen(kw_only=True)
class SessionActivityChanged(SessionEvent):
    """What the session is doing now, in words (None clears it)."""

    wire_type: ClassVar[str] = "session/activityChanged"
    activity: str | None = None


def _config_values(pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    return unique_pairs(pairs)


@attrs.frozen(kw_only=True)
class ConfigChanged(SessionEvent):
    """Set config values (an empty value removes the key); `replace`: these
    values are the whole config."""

    wire_type: ClassVar[str] = "session/configChanged"
    config: tuple[tuple[str, str], ...] = as_object(converter=_config_values)
    replace: bool = extension(default=False)


@attrs.frozen(kw_only=True)
class SessionMetaChanged(SessionEvent):
    """The session's `_meta` replaced whole (None clears it)."""

    wire_type: ClassVar[str] = "session/metaChanged"
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class SessionModelChanged(SessionEvent):
    """The session's model (protocols before 0.5; later ones select it per message)."""

    wire_type: ClassVar[str] = "session/modelChanged"
    model: ModelSelection


@attrs.frozen(kw_only=True)
class SessionAgentChanged(SessionEvent):
    """The session's custom agent (None: the provider's default)."""

    wire_type: ClassVar[str] = "session/agentChanged"
    agent: AgentSelection | None = None


@attrs.frozen(kw_only=True)
class ServerToolsChanged(SessionEvent):
    """The host's tools for the session, replaced whole."""

    wire_type: ClassVar[str] = "session/serverToolsChanged"
    tools: tuple[ToolDefinition, ...]


@attrs.frozen(kw_only=True)
class SessionChangesetsChanged(SessionEvent):
    """The session's changeset catalogue replaced whole (None clears it)."""

    wire_type: ClassVar[str] = "session/changesetsChanged"
    changesets: Json | None = None


@attrs.frozen(kw_only=True)
class WorkingDirectorySet(SessionEvent):
    """A working directory joined the session (by URI: an entry with the same URI
    is replaced)."""

    wire_type: ClassVar[str] = "session/workingDirectorySet"
    directory: WorkingDirectory


@attrs.frozen(kw_only=True)
class WorkingDirectoryRemoved(SessionEvent):
    wire_type: ClassVar[str] = "session/workingDirectoryRemoved"
    directory: str


@attrs.frozen(kw_only=True)
class WorkingDirectoryReplaced(SessionEvent):
    """The directory at URI `directory` becomes `replacement`, in its place."""

    wire_type: ClassVar[str] = "session/workingDirectoryReplaced"
    directory: str
    replacement: WorkingDirectory


@attrs.frozen(kw_only=True)
class InputNeededSet(SessionEvent):
    """Ours: the chat waits on the user (its id joins `input_needed`)."""

    wire_type: ClassVar[str] = "x-session/chatInputNeededSet"
    chat_id: str


@attrs.frozen(kw_only=True)
class InputNeededRemoved(SessionEvent):
    """Ours: the chat no longer waits on the user."""

    wire_type: ClassVar[str] = "x-session/chatInputNeededRemoved"
    chat_id: str


@attrs.frozen(kw_only=True)
class SessionStatusChanged(SessionEvent):
    """Ours: the session's status (its activity bits and unknown flags; IsRead
    and IsArchived travel in their own actions) where no 1.1 session action
    carries it. AHP's session reducer moves `status` only with isReadChanged,
    isArchivedChanged and inputNeededSet/Removed, so a session that starts or
    ends a turn, or stops at an error, says so here."""

    wire_type: ClassVar[str] = "x-session/statusChanged"
    status: ChatStatus


@attrs.frozen(kw_only=True)
class SessionInputNeededSet(SessionEvent):
    """An input request joins the session's `inputNeeded` (upsert by id)."""

    wire_type: ClassVar[str] = "session/inputNeededSet"
    request: SessionInputRequest


@attrs.frozen(kw_only=True)
class SessionInputNeededRemoved(SessionEvent):
    wire_type: ClassVar[str] = "session/inputNeededRemoved"
    id: str


@attrs.frozen(kw_only=True)
class CustomizationsChanged(SessionEvent):
    """The session's customizations, replaced whole."""

    wire_type: ClassVar[str] = "session/customizationsChanged"
    customizations: tuple[AnyCustomization, ...]


@attrs.frozen(kw_only=True)
class CustomizationToggled(SessionEvent):
    """A customization (top-level or a container's child) turned on or off:
    by its explicit `enablement` decisions, or (older peers) by `enabled`."""

    wire_type: ClassVar[str] = "session/customizationToggled"
    id: str
    enabled: bool | None = None
    enablement: tuple[Enablement, ...] | None = None


@attrs.frozen(kw_only=True)
class CustomizationUpdated(SessionEvent):
    """A top-level customization upserted by id, children and all."""

    wire_type: ClassVar[str] = "session/customizationUpdated"
    customization: AnyCustomization


@attrs.frozen(kw_only=True)
class CustomizationRemoved(SessionEvent):
    """A customization removed by id (a container with its children)."""

    wire_type: ClassVar[str] = "session/customizationRemoved"
    id: str


@attrs.frozen(kw_only=True)
class McpServerStateChanged(SessionEvent):
    """An MCP server customization's state and side channel (None clears it)."""

    wire_type: ClassVar[str] = "session/mcpServerStateChanged"
    id: str
    state: McpServerState
    channel: str | None = None


@attrs.frozen(kw_only=True)
class McpServerStartRequested(SessionEvent):
    """Start an MCP server: it is starting, without a channel."""

    wire_type: ClassVar[str] = "session/mcpServerStartRequested"
    id: str


@attrs.frozen(kw_only=True)
class McpServerStopRequested(SessionEvent):
    """Stop an MCP server: it is stopped, without a channel."""

    wire_type: ClassVar[str] = "session/mcpServerStopRequested"
    id: str


@attrs.frozen(kw_only=True)
class McpServerBackgroundRequested(SessionEvent):
    """A client asks that an MCP server keep running in the background (a request
    to the host; it changes no state)."""

    wire_type: ClassVar[str] = "session/mcpServerBackgroundRequested"
    id: str


@attrs.frozen(kw_only=True)
class SessionSnapshot(SessionEvent):
    wire_type: ClassVar[str] = "x-session/snapshot"
    state: SessionState


# -- root actions -----------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class RootEvent:
    wire_type: ClassVar[str] = ""


@attrs.frozen(kw_only=True)
class AgentsChanged(RootEvent):
    """The agents the host offers, replaced whole."""

    wire_type: ClassVar[str] = "root/agentsChanged"
    agents: tuple[AgentInfo, ...]


@attrs.frozen(kw_only=True)
class ActiveSessionsChanged(RootEvent):
    wire_type: ClassVar[str] = "root/activeSessionsChanged"
    active_sessions: int


@attrs.frozen(kw_only=True)
class RootConfigChanged(RootEvent):
    """Host config values merged into the root's `config.values` (`replace`: the
    whole set). A root without a config stays without one."""

    wire_type: ClassVar[str] = "root/configChanged"
    config: Json
    replace: bool = extension(default=False)
