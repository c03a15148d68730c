"""Error codes and the one error type of agenthost.

An error is data: `AgentHostError` is a frozen value with a `code` from
`ErrorCode` and a `message` a person can act on. It is also an exception, so
the public surface raises the same value it stores on a failed turn.
"""

from enum import StrEnum

import attrs

from agenthost.messages.fields import extension


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


@attrs.frozen(kw_only=True, auto_exc=False)
class AgentHostError(Exception):
    """An expected failure: a code and a message.

    Frozen and comparable by value, so it can sit in state and events; raise
    it where the surface fails.
    """

    code: ErrorCode
    message: str
    resumable: bool = extension(default=False)

    def __str__(self) -> str:
        return f"{self.code.value}: {self.message}"


_ERROR_FIELDS = frozenset(field.name for field in attrs.fields(AgentHostError))


def _set_annotation(self: AgentHostError, name: str, value: object) -> None:
    """The fields stay frozen; anything else may be set, as on any exception:
    frameworks annotate exceptions they pass through (typer marks each one it
    re-raises), and a frozen exception would fail inside their handlers."""
    if name in _ERROR_FIELDS:
        raise attrs.exceptions.FrozenInstanceError
    Exception.__setattr__(self, name, value)


AgentHostError.__setattr__ = _set_annotation  # type: ignore[method-assign, assignment]
