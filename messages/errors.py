"""Error codes and the one error type of agenthost.

An error is data: `AgentHostError` is a frozen value with a `code` from
`ErrorCode` and a `message` a person can act on. It is also an exception, so
the public surface raises the same value it stores on a failed turn.
`ValidationError` is the AgentHostError of a value that does not decode: it
names the offending field. `JsonRpcErrorCode` is the one declaration of the
JSON-RPC and AHP error codes the server answers with.
"""

from enum import IntEnum, StrEnum

import attrs

from agenthost.messages.fields import Json, extension, wire_name


class OpenStrEnum(StrEnum):
    """A string enum that also takes values a newer peer defines: an unknown
    value decodes to a pseudo-member carrying it (AHP enums are open), so it
    survives a round trip. Code compares with the known members as usual."""

    @classmethod
    def _missing_(cls, value: object) -> "OpenStrEnum | None":
        if not isinstance(value, str):
            return None
        member = str.__new__(cls, value)
        member._name_ = value
        member._value_ = value
        return member


class ErrorCode(OpenStrEnum):
    """The error codes agenthost raises; on the AHP wire they are a turn error's
    errorType. A peer's unknown errorType decodes to a pseudo-member."""

    INTERNAL = "internal"
    INVALID_ARGUMENT = "invalid_argument"
    NOT_FOUND = "not_found"
    PROVIDER_ERROR = "provider_error"
    PROVIDER_CRASHED = "provider_crashed"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    PROVIDER_LOGIN_REQUIRED = "provider_login_required"  # the provider's CLI has no login
    EXECUTION_ABANDONED = "execution_abandoned"
    HOST_STOPPED = "host_stopped"
    STORE_ERROR = "store_error"
    WORKTREE_DIRTY = "worktree_dirty"
    READ_ONLY = "read_only"  # an archived session or a read-only chat refused a request
    LEASE_HELD = "lease_held"  # another live shard holds the session: ask that one
    LEASE_LOST = "lease_lost"  # a stale shard's write was refused: the session moved
    SHARD_LOST = "shard_lost"  # the shard holding the session died during the call
    TOO_LARGE = "too_large"  # a message, attachment or request over its limit in bytes


@attrs.frozen(kw_only=True, auto_exc=False)
class AgentHostError(Exception):
    """An expected failure: a code and a message.

    Frozen and comparable by value, so it can sit in state and events; raise
    it where the surface fails.
    """

    code: ErrorCode
    message: str
    resumable: bool = extension(default=False)
    stack: str | None = None
    meta: Json | None = wire_name("_meta", default=None)

    def __str__(self) -> str:
        return f"{self.code.value}: {self.message}"


@attrs.frozen(kw_only=True, auto_exc=False)
class ValidationError(AgentHostError):
    """A value that does not decode. `field` is the wire path of the offending
    field (`action.turnId`, `items[2]`; "" for the value itself); the message
    starts with it. The server answers it with -32602 (INVALID_PARAMS)."""

    field: str = ""

    @classmethod
    def of(cls, field: str, reason: str) -> "ValidationError":
        return cls(
            code=ErrorCode.INVALID_ARGUMENT,
            message=f"{field}: {reason}" if field else reason,
            field=field,
        )


_ERROR_FIELDS = frozenset(field.name for field in attrs.fields(ValidationError))


def _set_annotation(self: AgentHostError, name: str, value: object) -> None:
    """The fields stay frozen; anything else may be set, as on any exception:
    frameworks annotate exceptions they pass through (typer marks each one it
    re-raises), and a frozen exception would fail inside their handlers."""
    if name in _ERROR_FIELDS:
        raise attrs.exceptions.FrozenInstanceError
    Exception.__setattr__(self, name, value)


AgentHostError.__setattr__ = _set_annotation  # type: ignore[method-assign, assignment]
ValidationError.__setattr__ = _set_annotation  # type: ignore[method-assign, assignment]


class JsonRpcErrorCode(IntEnum):
    """The JSON-RPC 2.0 codes and AHP's application codes (-32000 to -32099).
    An error response's `code` is a plain int on the wire, so a peer's unknown
    code survives; these are the ones agenthost sends and reads."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    SESSION_NOT_FOUND = -32001
    PROVIDER_NOT_FOUND = -32002
    SESSION_ALREADY_EXISTS = -32003
    TURN_IN_PROGRESS = -32004
    UNSUPPORTED_PROTOCOL_VERSION = -32005
    AUTH_REQUIRED = -32007
    NOT_FOUND = -32008
    PERMISSION_DENIED = -32009
    ALREADY_EXISTS = -32010
    CONFLICT = -32011
    # agenthost's own, in the application range AHP leaves free
    SERVER_ERROR = -32000
    RATE_LIMITED = -32029
    QUOTA_EXCEEDED = -32030  # an identity's quota (resident sessions, creations a minute)
    # A request before initialize is not a valid request at that point. (The
    # server answered -32002, LSP's ServerNotInitialized, which AHP gives to
    # ProviderNotFound.)
    NOT_INITIALIZED = -32600
