"""The actions of AHP 1.1 a client may dispatch that this server does not
offer, each with the reason its echo carries (`rejectionReason`), so a client
can tell "not here, because ..." from a malformed action. docs/protocol.md's
action tables say the same. Server-only actions a client dispatches are
refused by server/actions.py with the generic reason.
"""

from agenthost.messages.events import (
    ActivityChanged,
    ChatChangesetsChanged,
    ChatWorkingDirectoryRemoved,
    ChatWorkingDirectorySet,
    ToolCallAuthRequired,
    ToolCallAuthResolved,
    ToolCallDelta,
)
from agenthost.messages.session_events import (
    CustomizationRemoved,
    CustomizationsChanged,
    CustomizationToggled,
    CustomizationUpdated,
    McpServerBackgroundRequested,
    McpServerStartRequested,
    McpServerStateChanged,
    McpServerStopRequested,
    ServerToolsChanged,
    SessionActivityChanged,
    SessionAgentChanged,
    SessionChangesetsChanged,
    SessionMetaChanged,
    SessionModelChanged,
    WorkingDirectoryRemoved,
    WorkingDirectoryReplaced,
    WorkingDirectorySet,
)

__all__ = ["REFUSED"]

NO_MCP = "not offered: this host runs no MCP servers"
NO_CHANGESETS = "not offered: this host keeps no changesets"
DIRECTORY = (
    "not offered: a session's working directory is the host's (its worktree, made at "
    "creation), and a client cannot set, remove or replace it"
)
CHAT_DIRECTORY = (
    "not offered: a chat works in its session's working directory, which a client cannot change"
)
CUSTOMIZATIONS = (
    "not offered: this host has no customizations (the session's list is empty), so there is "
    "nothing to toggle, update or remove"
)
MODEL = (
    "not offered: the providers here take the model and agent per message (a turn's model), "
    "not per session"
)
HOST_ONLY = "only the host sends {kind!r}: {why}"

REFUSED: dict[type, str] = {
    McpServerStartRequested: NO_MCP,
    McpServerStopRequested: NO_MCP,
    McpServerBackgroundRequested: NO_MCP,
    McpServerStateChanged: NO_MCP,
    ToolCallAuthRequired: HOST_ONLY.format(
        kind="chat/toolCallAuthRequired", why="the challenge an MCP server's tool call met"
    ),
    ToolCallAuthResolved: HOST_ONLY.format(
        kind="chat/toolCallAuthResolved",
        why="once a token given with `authenticate` reached the call",
    ),
    SessionChangesetsChanged: NO_CHANGESETS,
    ChatChangesetsChanged: NO_CHANGESETS,
    WorkingDirectorySet: DIRECTORY,
    WorkingDirectoryRemoved: DIRECTORY,
    WorkingDirectoryReplaced: DIRECTORY,
    ChatWorkingDirectorySet: CHAT_DIRECTORY,
    ChatWorkingDirectoryRemoved: CHAT_DIRECTORY,
    CustomizationToggled: CUSTOMIZATIONS,
    CustomizationUpdated: CUSTOMIZATIONS,
    CustomizationRemoved: CUSTOMIZATIONS,
    CustomizationsChanged: CUSTOMIZATIONS,
    SessionModelChanged: MODEL,
    SessionAgentChanged: MODEL,
    ServerToolsChanged: HOST_ONLY.format(
        kind="session/serverToolsChanged", why="the tools the host itself runs"
    ),
    SessionMetaChanged: HOST_ONLY.format(kind="session/metaChanged", why="the host's _meta"),
    SessionActivityChanged: HOST_ONLY.format(
        kind="session/activityChanged", why="what the session is doing"
    ),
    ActivityChanged: HOST_ONLY.format(kind="chat/activityChanged", why="what the chat is doing"),
    ToolCallDelta: HOST_ONLY.format(kind="chat/toolCallDelta", why="a provider's streamed input"),
}
"""Dispatchable-looking actions refused with a reason of their own."""
