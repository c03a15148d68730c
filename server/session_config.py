"""Session configuration as AHP asks for it: `resolveSessionConfig`,
`sessionConfigCompletions`, and the `config` createSession takes.

What a session's config is here: string values by key (the host keeps them
with the session, `session/configChanged` changes them), keys beginning
`ahp.` reserved for the server (the owner). So:
- `SCHEMA` is the JSON Schema of that: an object of strings whose property
  names do not start with `ahp.`; the session channel's snapshot carries it
  as `config: {schema, values}` (server/session_sync.py);
- `resolveSessionConfig {provider?, config?}` -> `{schema, values}`: the
  values checked against it (a value that is not a string, or a reserved
  key, is -32602 naming `config.<key>`; an unknown provider -32002);
- `sessionConfigCompletions {property, query?}` -> `{items}`: the values
  the caller's own sessions hold for that property (its first page of
  sessions, up to 1000), those beginning with `query`, most used first;
- createSession applies its `config` the same way, checked alike.

Nothing here reads another identity's sessions.
"""

from collections import Counter
from typing import TYPE_CHECKING, Any

from agenthost.messages import protocol as p
from agenthost.messages.errors import JsonRpcErrorCode
from agenthost.messages.fields import Json
from agenthost.server.errors import RpcError, bad_param
from agenthost.server.views import RESERVED_CONFIG

if TYPE_CHECKING:
    from agenthost.server.connection import Connection

SCHEMA = Json.of(
    {
        "type": "object",
        "description": "Session settings: string values; keys beginning 'ahp.' are the server's.",
        "additionalProperties": {"type": "string"},
        "propertyNames": {"not": {"pattern": "^ahp\\."}},
    }
)
"""The session config's JSON Schema."""

SESSIONS_READ = 1000
"""How many of the caller's sessions sessionConfigCompletions looks into."""


def checked(config: Json | None) -> dict[str, str]:
    """The config's values, if they fit `SCHEMA`.

    Raises:
        RpcError: -32602 naming the field that does not.
    """
    if config is None:
        return {}
    value: Any = config.value
    if isinstance(value, dict) and set(value) <= {"schema", "values"} and "values" in value:
        value = value["values"]  # the {schema, values} form a snapshot shows
    if not isinstance(value, dict):
        raise bad_param("config", "must be an object of string values")
    for key, item in value.items():
        if key.startswith(RESERVED_CONFIG):
            raise bad_param(f"config.{key}", f"keys beginning {RESERVED_CONFIG!r} are reserved")
        if not key:
            raise bad_param("config", "a key must not be empty")
        if not isinstance(item, str):
            raise bad_param(f"config.{key}", "must be a string")
    return dict(value)


def _provider(conn: "Connection", provider: str | None) -> None:
    if provider is not None and provider not in conn.server.host.services.providers:
        raise RpcError(JsonRpcErrorCode.PROVIDER_NOT_FOUND, f"no provider {provider!r} here")


async def resolve_session_config(
    conn: "Connection", params: p.ResolveSessionConfigParams
) -> p.ResolveSessionConfigResult:
    _provider(conn, params.provider)
    return p.ResolveSessionConfigResult(schema=SCHEMA, values=Json.of(checked(params.config)))


async def session_config_completions(
    conn: "Connection", params: p.SessionConfigCompletionsParams
) -> p.SessionConfigCompletionsResult:
    _provider(conn, params.provider)
    if params.property.startswith(RESERVED_CONFIG):
        raise bad_param("property", f"keys beginning {RESERVED_CONFIG!r} are reserved")
    page = await conn.server.host.list_sessions_page(conn.identity, limit=SESSIONS_READ)
    used = Counter(
        value
        for summary in page.items
        for key, value in summary.config
        if key == params.property and value.startswith(params.query or "")
    )
    items = tuple(
        p.ConfigValueItem(value=value, label=value)
        for value, _ in sorted(used.items(), key=lambda pair: (-pair[1], pair[0]))
    )
    return p.SessionConfigCompletionsResult(items=items)
