"""`authenticate` and `auth/required`: the server's own bearer tokens, pushed
over AHP, with a lifetime.

The server is a protected resource (`RESOURCE`, RFC 9728 metadata, listed in
every agent's `protectedResources` in the root state). A connection is
authenticated by its upgrade's token (server/auth.py), which has no
lifetime. `authenticate {resource, token, expiresIn?}` re-authenticates it:
- `resource` must be `RESOURCE.resource`, or one a tool call of the caller's
  waits on (the token then goes to that call: server/tool_tokens.py), else
  -32602;
- `token` must be one the server accepts at the upgrade, and of the
  connection's own identity (an identity never changes under a connection),
  else -32007 AuthRequired, saying only that the token is not valid here;
- `expiresIn` (seconds, a positive integer) gives it a lifetime: when it
  runs out (on the host's clock, injectable) the connection lapses;
- an empty token revokes: the connection lapses at once.
A lapsed connection is sent `auth/required {channel: ahp-root://, resource,
reason: expired}` (not for a revocation it asked for), leaves every channel
(no session data flows on a token that ran out), and every request but
`ping` and `authenticate` is answered -32007 with `data: [RESOURCE]`;
dispatched actions are echoed with a rejectionReason. An `authenticate`
with a valid token makes it whole again; the client subscribes anew.

Loop thread only; the clock's timer hops onto the loop. Nothing here logs a
token, or says whose it was.
"""

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from agenthost.actors.clock import Clock, TimerHandle
from agenthost.messages import protocol as p
from agenthost.messages.common import AuthRequiredReason, ProtectedResourceMetadata
from agenthost.messages.errors import JsonRpcErrorCode
from agenthost.messages.wire import to_wire
from agenthost.server import tool_tokens
from agenthost.server.channels import ROOT
from agenthost.server.errors import RpcError, bad_param

if TYPE_CHECKING:
    from agenthost.server.connection import Connection

RESOURCE = ProtectedResourceMetadata(
    resource="urn:agenthost:ahp",
    resource_name="agenthost",
    bearer_methods_supported=("header",),
    required=True,
)
"""The server as a protected resource: what `authenticate` names."""

ANSWERED_WHEN_LAPSED = frozenset({"ping", "authenticate"})


def auth_required() -> RpcError:
    return RpcError(JsonRpcErrorCode.AUTH_REQUIRED, "authentication required", [to_wire(RESOURCE)])


@attrs.define
class Authentication:
    """One connection's authentication: since when it lapses (`expires_at`, on
    the clock; None: never) or whether it was revoked."""

    clock: Clock
    on_lapse: Callable[[], None]
    expires_at: float | None = None
    revoked: bool = False
    _timer: TimerHandle | None = None

    @property
    def lapsed(self) -> bool:
        if self.revoked:
            return True
        return self.expires_at is not None and self.clock.now() >= self.expires_at

    def accept(self, expires_in: int | None) -> None:
        """A valid token: whole again, for `expires_in` seconds (None: no end)."""
        self.close()
        self.revoked = False
        if expires_in is None:
            self.expires_at = None
            return
        self.expires_at = self.clock.now() + expires_in
        loop = asyncio.get_running_loop()

        def due() -> None:  # on the clock's thread
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(self._due)

        self._timer = self.clock.call_later(expires_in, due)

    def _due(self) -> None:
        self._timer = None
        if self.lapsed:  # not renewed meanwhile
            self.on_lapse()

    def revoke(self) -> None:
        self.close()
        self.revoked = True

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def lapse(conn: "Connection", reason: AuthRequiredReason | None) -> None:
    """The connection's authentication ran out (`reason`) or was revoked (None):
    it leaves every channel, and is told why unless it asked."""
    for uri in list(conn.channels):
        conn.leave(uri)
    if reason is not None:
        params = p.AuthRequiredParams(channel=ROOT, resource=RESOURCE, reason=reason)
        conn.offer({"jsonrpc": "2.0", "method": "auth/required", "params": to_wire(params)})


async def authenticate(conn: "Connection", params: p.AuthenticateParams) -> "Authenticated":
    if params.resource != RESOURCE.resource:
        if conn.auth.lapsed:
            raise auth_required()  # no session data flows on a token that ran out
        await tool_tokens.route(conn, params)
        return Authenticated()
    if not params.token:
        conn.auth.revoke()
        lapse(conn, None)
        return Authenticated()
    if params.expires_in is not None and params.expires_in < 1:
        raise bad_param("expiresIn", "must be a positive integer (seconds)")
    if conn.server.tokens.get(params.token) != conn.identity:
        raise RpcError(JsonRpcErrorCode.AUTH_REQUIRED, "invalid token", [to_wire(RESOURCE)])
    conn.auth.accept(params.expires_in)
    return Authenticated()


@attrs.frozen
class Authenticated:
    """authenticate's answer: `{}`."""
