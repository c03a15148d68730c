"""`authenticate` for a resource a tool call waits on: the token goes to the
chats of the caller's own sessions whose running turn has an MCP tool call
blocked on that resource (chat/toolCallAuthRequired; the session lists it in
`inputNeeded` as toolAuthentication).

Where the server looks is the request's `channel`: a chat's (that chat), a
session's (its chats), or the root (every session of the caller's identity in
memory: a session with a running turn always is). Rules:
1. Scoped to the identity: only sessions it owns are looked into. Another
   identity's session or chat is never named: its channel is answered like
   one nothing waits on, so nothing says it exists.
2. A resource nothing of the caller's waits on is refused -32602 (`resource`),
   as is an empty token (revoking is for the server's own resource only).
3. Each waiting chat gets the token once (Chat.authenticate: every call of
   its turn that waits on the resource gets it, and the host then sends
   chat/toolCallAuthResolved). A call that ended meanwhile is passed over; if
   every one did, the request is refused as in rule 2.
4. The token is handed on, never kept, logged or echoed; `expiresIn` and
   `scopes` are not used (the provider gets the token only).
5. A lapsed connection (server/authentication.py) routes nothing: -32007.

Loop thread only.
"""

from typing import TYPE_CHECKING

from agenthost.actors.aio import AsyncChat, AsyncSession
from agenthost.messages import protocol as p
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.state import SessionInputKind, SessionState
from agenthost.server.channels import CHAT_PREFIX, SESSION_PREFIX
from agenthost.server.errors import RpcError, bad_param, is_not_found

if TYPE_CHECKING:
    from agenthost.server.connection import Connection


def waiting_chats(state: SessionState, resource: str, only: str | None = None) -> list[str]:
    """The ids of the session's chats with a tool call waiting on `resource`
    (`only`: that chat's id, if it is one of them)."""
    found: list[str] = []
    for entry in state.input_requests:
        call = entry.tool_call
        if (
            entry.kind == SessionInputKind.TOOL_AUTHENTICATION
            and call is not None
            and call.auth is not None
            and call.auth.resource.resource == resource
        ):
            chat_id = entry.chat.removeprefix(CHAT_PREFIX)
            if chat_id not in found and (only is None or chat_id == only):
                found.append(chat_id)
    return found


async def _sessions(conn: "Connection", channel: str) -> list[tuple[AsyncSession, str | None]]:
    """The caller's sessions to look into, each with the one chat meant (None: all)."""
    registry = conn.server.registry
    try:
        if channel.startswith(CHAT_PREFIX):
            session, _ = await registry.chat(channel.removeprefix(CHAT_PREFIX), conn.identity)
            return [(session, channel.removeprefix(CHAT_PREFIX))]
        if channel.startswith(SESSION_PREFIX):
            session_id = channel.removeprefix(SESSION_PREFIX)
            return [(await registry.session(session_id, conn.identity), None)]
    except RpcError as error:
        if is_not_found(error):
            return []  # another's, or none: alike (rule 1)
        raise
    return [(await registry.open(sid), None) for sid in registry.owned_by(conn.identity)]


async def route(conn: "Connection", params: p.AuthenticateParams) -> None:
    """Hand the token to every chat of the caller's that waits on its resource.

    Raises:
        RpcError: -32602 when nothing of the caller's waits on the resource,
            or the token is empty.
    """
    resource = params.resource
    if not params.token:
        raise bad_param("token", "must not be empty for a tool call's resource")
    given = 0
    for session, only in await _sessions(conn, params.channel):
        try:
            state = await session.state()
        except AgentHostError:
            continue  # it left memory meanwhile: nothing of it runs
        for chat_id in waiting_chats(state, resource, only):
            chat: AsyncChat = await session.chat(chat_id)
            try:
                await chat.authenticate(resource, params.token, client_id=conn.client_id)
            except AgentHostError as error:
                if error.code is not ErrorCode.NOT_FOUND:
                    raise
                continue  # the call ended meanwhile (rule 3)
            given += 1
    if not given:
        raise bad_param(
            "resource",
            "not a resource this server protects (urn:agenthost:ahp), nor one a tool call"
            f" of yours waits on: {resource}",
        )
