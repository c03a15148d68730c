"""The server's JSON-RPC errors: what a request or a frame is answered with.

`RpcError` carries a code (`messages.errors.JsonRpcErrorCode`, the one
declaration of every code; a plain int where a peer's unknown code passes
through), a message a person can act on, and optional `data`. The helpers map
what the layers below raise to it:
- `invalid_params(ValidationError)`: -32602 naming the field, the field in
  `data.field` too;
- `from_host_error(AgentHostError)`: not_found -> -32008, invalid_argument ->
  -32602, anything else -32000 with the host's code in `data.errorType`.

Invariant: nothing here puts a token, a prompt or a traceback in a message.
"""

from typing import Any

from agenthost.messages import rpc
from agenthost.messages.errors import AgentHostError, ErrorCode, JsonRpcErrorCode, ValidationError

HOST_LATE = "the host did not answer in time (it may still act)"
"""What a request or an action is told when the host did not answer in time."""


class RpcError(Exception):
    """An answer to a request that failed: `frame(id)` is the error frame."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message
        self.data = data

    def frame(self, request_id: int | str | None) -> dict[str, Any]:
        return rpc.failure(request_id, self.code, self.message, self.data)


def invalid_params(error: ValidationError, prefix: str = "invalid params") -> RpcError:
    """-32602 naming the offending field (`'action.turnId': expected a string ...`)."""
    if not error.field:
        return RpcError(JsonRpcErrorCode.INVALID_PARAMS, f"{prefix}: {error.message}")
    reason = error.message.removeprefix(f"{error.field}: ")
    return RpcError(
        JsonRpcErrorCode.INVALID_PARAMS,
        f"{prefix}: {error.field!r}: {reason}",
        {"field": error.field},
    )


def bad_param(field: str, reason: str) -> RpcError:
    """-32602 for a value that decoded but is not acceptable here."""
    return invalid_params(ValidationError.of(field, reason))


def from_host_error(error: AgentHostError) -> RpcError:
    """The answer to a request the host refused."""
    if isinstance(error, ValidationError):
        return invalid_params(error)
    code = {
        ErrorCode.NOT_FOUND: JsonRpcErrorCode.NOT_FOUND,
        ErrorCode.INVALID_ARGUMENT: JsonRpcErrorCode.INVALID_PARAMS,
    }.get(error.code, JsonRpcErrorCode.SERVER_ERROR)
    return RpcError(code, error.message, {"errorType": error.code.value})


def session_not_found(session_id: str) -> RpcError:
    return RpcError(JsonRpcErrorCode.SESSION_NOT_FOUND, f"session {session_id} not found")


def chat_not_found(chat_id: str) -> RpcError:
    return RpcError(JsonRpcErrorCode.NOT_FOUND, f"chat {chat_id} not found")


def is_not_found(error: RpcError) -> bool:
    """A channel the caller may not see or that does not exist."""
    return error.code in (JsonRpcErrorCode.NOT_FOUND, JsonRpcErrorCode.SESSION_NOT_FOUND)
