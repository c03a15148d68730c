"""Leaf value types AHP shares across its channels: content references, text
that may be markdown, OAuth protected-resource metadata, tool-call
confirmation options and contributors, model and agent selections.

Nothing here imports the rest of messages/ but errors.py and fields.py, so
state, events and protocol can all build on it. `Unknown` is the member every
open union ends with: a variant whose discriminator (`kind` or `type`) this
host does not know, kept whole so it re-encodes as it came (AHP's
`@nonexhaustive` unions; see wire.py's open unions).
"""

from collections.abc import Mapping

import attrs

from agenthost.messages.errors import OpenStrEnum
from agenthost.messages.fields import Json, as_object, unique_pairs, wire_name

# AHP channel URIs
ROOT_CHANNEL = "ahp-root://"
SESSION_SCHEME = "ahp-session:"
CHAT_SCHEME = "ahp-chat:"

Timestamp = int | str
"""A summary's createdAt / modifiedAt: protocol versions send ms or ISO-8601; kept as sent."""


def _is_object(instance: object, attribute: object, value: Json) -> None:
    if not isinstance(value.value, Mapping):
        raise ValueError("an unknown variant is a JSON object")


@attrs.frozen(kw_only=True)
class Unknown:
    """A variant of an open union that this host does not know (a newer peer's):
    the whole object, as it came. Reducers leave it alone."""

    data: Json = attrs.field(validator=_is_object)

    def tag(self, key: str) -> str | None:
        """Its discriminator under `key` (`kind` or `type`), if it has one."""
        value = self.data.value
        tag = value.get(key) if isinstance(value, Mapping) else None
        return tag if isinstance(tag, str) else None


@attrs.frozen(kw_only=True)
class Markdown:
    """Text to render as markdown (AHP's `{markdown}` side of StringOrMarkdown)."""

    markdown: str


StringOrMarkdown = str | Markdown
"""Plain text, or markdown."""


@attrs.frozen(kw_only=True)
class ContentRef:
    """Large content kept outside the state tree, fetched with resourceRead."""

    uri: str
    size_hint: int | None = None
    content_type: str | None = None
    nonce: str | None = None


ToolInput = str | ContentRef
"""A tool's input, inline or by reference."""


@attrs.frozen(kw_only=True)
class ProtectedResourceMetadata:
    """RFC 9728 metadata of an OAuth protected resource (snake_case on the wire,
    as the RFC spells it). `required` is AHP's extension (absent means true)."""

    resource: str
    resource_name: str | None = wire_name("resource_name", default=None)
    authorization_servers: tuple[str, ...] | None = wire_name("authorization_servers", default=None)
    jwks_uri: str | None = wire_name("jwks_uri", default=None)
    scopes_supported: tuple[str, ...] | None = wire_name("scopes_supported", default=None)
    bearer_methods_supported: tuple[str, ...] | None = wire_name(
        "bearer_methods_supported", default=None
    )
    resource_signing_alg_values_supported: tuple[str, ...] | None = wire_name(
        "resource_signing_alg_values_supported", default=None
    )
    resource_documentation: str | None = wire_name("resource_documentation", default=None)
    resource_policy_uri: str | None = wire_name("resource_policy_uri", default=None)
    resource_tos_uri: str | None = wire_name("resource_tos_uri", default=None)
    required: bool | None = None


class AuthRequiredReason(OpenStrEnum):
    """Why a resource (an MCP server, a tool call, an agent) needs a token."""

    REQUIRED = "required"
    EXPIRED = "expired"
    INSUFFICIENT_SCOPE = "insufficientScope"


@attrs.frozen(kw_only=True)
class OAuthClient:
    """A pre-registered OAuth client to use instead of dynamic registration."""

    client_id: str
    client_secret: str | None = None


@attrs.frozen(kw_only=True)
class McpAuthRequirement:
    """An MCP authentication challenge: what to obtain a token for (never the token)."""

    reason: AuthRequiredReason
    resource: ProtectedResourceMetadata
    oauth_client: OAuthClient | None = None
    required_scopes: tuple[str, ...] | None = None
    description: str | None = None


class ConfirmationOptionKind(OpenStrEnum):
    APPROVE = "approve"
    DENY = "deny"


@attrs.frozen(kw_only=True)
class ConfirmationOption:
    """One choice a tool-call confirmation offers ("Approve in this session")."""

    id: str
    label: str
    kind: ConfirmationOptionKind
    group: int | None = None


class ContributorKind(OpenStrEnum):
    CLIENT = "client"
    MCP = "mcp"


@attrs.frozen(kw_only=True)
class ToolCallContributor:
    """Who implements a tool: a client (`client_id` executes it) or an MCP server
    (`customization_id` names it in the session's customizations)."""

    kind: ContributorKind
    client_id: str | None = None
    customization_id: str | None = None


def _string_pairs(pairs: tuple[tuple[str, str], ...] | None) -> tuple[tuple[str, str], ...] | None:
    return None if pairs is None else unique_pairs(pairs)


@attrs.frozen(kw_only=True)
class ModelSelection:
    """A model and its model-specific config values (`config`: an object on the wire)."""

    id: str
    config: tuple[tuple[str, str], ...] | None = as_object(default=None, converter=_string_pairs)


@attrs.frozen(kw_only=True)
class AgentSelection:
    """A custom agent, by the uri of its agent customization."""

    uri: str


@attrs.frozen(kw_only=True)
class ChangesSummary:
    """File-change counts of a session or chat (each optional)."""

    additions: int | None = None
    deletions: int | None = None
    files: int | None = None


@attrs.frozen(kw_only=True)
class Icon:
    src: str
    content_type: str | None = None
    sizes: tuple[str, ...] | None = None
    theme: str | None = None


@attrs.frozen(kw_only=True)
class ToolDefinition:
    """A tool the host offers a session (AHP's ToolDefinition; schemas as JSON)."""

    name: str
    title: str | None = None
    description: str | None = None
    input_schema: Json | None = None
    output_schema: Json | None = None
    annotations: Json | None = None
    meta: Json | None = wire_name("_meta", default=None)


@attrs.frozen(kw_only=True)
class Implementation:
    """A protocol implementation's identity (clientInfo, serverInfo)."""

    name: str
    version: str | None = None
    title: str | None = None


@attrs.frozen(kw_only=True)
class TextPosition:
    line: int
    character: int


@attrs.frozen(kw_only=True)
class TextRange:
    start: TextPosition
    end: TextPosition


# -- sessions: provenance, directories, artifacts --------------------------------


@attrs.frozen(kw_only=True)
class AutomationOrigin:
    """A session an automation run created (AHP's SessionOrigin `automation`)."""

    automation: str
    run: str
    kind: str = attrs.field(default="automation", init=False)


SessionOrigin = AutomationOrigin | Unknown


@attrs.frozen(kw_only=True)
class RepositorySource:
    """A repository a session was asked to prepare (no checkout identity)."""

    source: str
    revision: str | None = None
    subdirectory: str | None = None


@attrs.frozen(kw_only=True)
class ProjectInfo:
    uri: str
    display_name: str


class DirectoryOriginKind(OpenStrEnum):
    LOCAL = "local"
    REPO = "repo"
    WORKTREE = "worktree"


@attrs.frozen(kw_only=True)
class DirectoryOrigin:
    """Where a working directory came from; a worktree names its main worktree."""

    kind: DirectoryOriginKind
    main_worktree: str | None = None


@attrs.frozen(kw_only=True)
class DirectoryInfo:
    """A working directory with its provenance (a bare URI string is the older form)."""

    uri: str
    repo: str | None = None
    origin: DirectoryOrigin | Unknown | None = None


WorkingDirectory = str | DirectoryInfo


def directory_uri(directory: WorkingDirectory) -> str:
    return directory if isinstance(directory, str) else directory.uri


class ArtifactRelationKind(OpenStrEnum):
    CREATED = "created"
    REFERENCED = "referenced"
    DERIVED_FROM = "derivedFrom"


@attrs.frozen(kw_only=True)
class ArtifactRelation:
    """How a session (or one of its chats) relates to an artifact."""

    kind: ArtifactRelationKind
    chat: str | None = None


@attrs.frozen(kw_only=True)
class ResourceArtifact:
    """Something a session produced or used (a pull request, a report), by URI."""

    uri: str
    label: str
    display_kind: str | None = None
    content_type: str | None = None
    size_hint: int | None = None
    nonce: str | None = None
    relations: tuple[ArtifactRelation, ...] | None = None
    meta: Json | None = wire_name("_meta", default=None)
    type: str = attrs.field(default="resource", init=False)


Artifact = ResourceArtifact | Unknown
