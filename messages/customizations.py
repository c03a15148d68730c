"""Customizations a session runs with (plugins, watched directories, MCP
servers and the agents, skills, prompts, rules and hooks inside them) and
the lifecycle state of MCP servers.

One `Customization` class holds every known type (`type` says which); a field
a type does not have is None. A customization of a type this host does not
know is an `Unknown` and survives as it came.
"""

from collections.abc import Iterable, Iterator

import attrs

from agenthost.messages.common import (
    Icon,
    McpAuthRequirement,
    OAuthClient,
    ProtectedResourceMetadata,
    TextRange,
    Unknown,
)
from agenthost.messages.errors import AgentHostError, OpenStrEnum
from agenthost.messages.fields import Json, wire_name


class CustomizationType(OpenStrEnum):
    PLUGIN = "plugin"
    DIRECTORY = "directory"
    AGENT = "agent"
    SKILL = "skill"
    PROMPT = "prompt"
    RULE = "rule"
    HOOK = "hook"
    MCP_SERVER = "mcpServer"

    @property
    def container(self) -> bool:
        return self in (CustomizationType.PLUGIN, CustomizationType.DIRECTORY)


class EnablementKind(OpenStrEnum):
    GLOBAL = "global"
    WORKSPACE = "workspace"
    SESSION = "session"


@attrs.frozen(kw_only=True)
class Enablement:
    """One explicit enablement decision; a workspace one names its workspace."""

    kind: EnablementKind
    enabled: bool
    uri: str | None = None


class LoadStatus(OpenStrEnum):
    LOADING = "loading"
    LOADED = "loaded"
    DEGRADED = "degraded"
    ERROR = "error"


@attrs.frozen(kw_only=True)
class LoadState:
    """How loading a container went (a degraded or failed one says why)."""

    kind: LoadStatus
    message: str | None = None


class McpServerStatus(OpenStrEnum):
    STARTING = "starting"
    READY = "ready"
    AUTH_REQUIRED = "authRequired"
    ERROR = "error"
    STOPPED = "stopped"


@attrs.frozen(kw_only=True)
class McpServerState:
    """An MCP server's lifecycle state. authRequired carries the challenge's
    fields (reason, resource, ...), error its `error`; the others nothing."""

    kind: McpServerStatus
    reason: str | None = None
    resource: ProtectedResourceMetadata | None = None
    oauth_client: OAuthClient | None = None
    required_scopes: tuple[str, ...] | None = None
    description: str | None = None
    error: AgentHostError | None = None

    @classmethod
    def auth_required(cls, requirement: McpAuthRequirement) -> "McpServerState":
        return cls(
            kind=McpServerStatus.AUTH_REQUIRED,
            reason=requirement.reason,
            resource=requirement.resource,
            oauth_client=requirement.oauth_client,
            required_scopes=requirement.required_scopes,
            description=requirement.description,
        )


@attrs.frozen(kw_only=True)
class Customization:
    """A customization: a container (plugin, directory) with `children`, an MCP
    server with its `state` and side `channel`, or a child (agent, skill,
    prompt, rule, hook). `enabled` is the effective value; `enablement` the
    explicit decisions behind it, most specific first."""

    type: CustomizationType
    id: str
    uri: str
    name: str
    icons: tuple[Icon, ...] | None = None
    range: TextRange | None = None
    meta: Json | None = wire_name("_meta", default=None)
    enabled: bool | None = None
    enablement: tuple[Enablement, ...] | None = None
    # containers
    client_id: str | None = None
    load: LoadState | None = None
    children: "tuple[Customization | Unknown, ...] | None" = None
    version: str | None = None
    nonce: str | None = None
    child_enablement: Json | None = None
    contents: CustomizationType | None = None
    writable: bool | None = None
    # children
    description: str | None = None
    model: str | None = None
    tools: tuple[str, ...] | None = None
    disable_model_invocation: bool | None = None
    disable_user_invocation: bool | None = None
    always_apply: bool | None = None
    globs: tuple[str, ...] | None = None
    # MCP servers
    state: McpServerState | None = None
    channel: str | None = None
    mcp_app: Json | None = None

    def with_enablement(self, enablement: tuple[Enablement, ...]) -> "Customization":
        """The decisions replaced: the first decides `enabled` (none: enabled)."""
        return attrs.evolve(
            self,
            enabled=enablement[0].enabled if enablement else True,
            enablement=enablement or None,
        )


attrs.resolve_types(Customization, globals(), locals())

AnyCustomization = Customization | Unknown


def flattened(entries: "Iterable[AnyCustomization] | None") -> Iterator[Customization]:
    """Every known customization in `entries`, each container before its children."""
    for entry in entries or ():
        if isinstance(entry, Customization):
            yield entry
            yield from flattened(entry.children)
