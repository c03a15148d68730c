"""Client ids: which identity holds each, which connections speak for it, and
what happens when a client leaves.

A `clientId` is bound to the identity that first claimed it; another identity
is refused it. The binding is kept in the store (`AsyncHost.claim_client`),
so no restart hands a client id to another identity; nothing of it is kept
here. A client that acted in a session and then left (its last
connection closed) is removed from those sessions after a grace period, so
its parked client-tool calls fail (DESIGN.md rule 6); coming back within the
grace keeps them.

Invariants (loop thread only):
1. The table of sessions a client acted in holds resident sessions only: a
   session that leaves memory has no parked calls, and leaves the table.
2. A grace timer exists only for a client with no connection, and goes when
   it fires or the client comes back.
"""

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import attrs

from agenthost.actors.aio import AsyncHost


@attrs.frozen(kw_only=True)
class ClientTableSizes:
    connected: int
    graces: int
    acted_in: int
    sessions: int


class Clients:
    """Client ids and their connections (event loop thread only)."""

    def __init__(
        self,
        host: AsyncHost,
        grace_s: float,
        remove: Callable[[str, str], Coroutine[Any, Any, None]],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self._host = host
        self._grace_s = grace_s
        self._remove = remove  # (session id, client id): the client's calls there fail
        self._spawn = spawn
        self._connected: dict[str, int] = {}  # client id -> its open connections
        self._grace: dict[str, asyncio.TimerHandle] = {}  # client id -> pending removal
        self._acted_in: dict[str, set[str]] = {}  # client id -> sessions it acted in
        self._clients_of: dict[str, set[str]] = {}  # session id -> clients that acted in it

    async def claim(self, client_id: str, identity: str) -> bool:
        """Bind a client id to an identity; False if another identity holds it.
        The binding is the store's, committed before this answers."""
        binding = await self._host.claim_client(client_id, identity)
        return binding.identity == identity

    def attach(self, client_id: str) -> None:
        """A connection speaks for the client now: its removal, if pending, is off."""
        self._connected[client_id] = self._connected.get(client_id, 0) + 1
        timer = self._grace.pop(client_id, None)
        if timer is not None:
            timer.cancel()

    def detach(self, client_id: str) -> None:
        """A connection of the client closed; with its last one, the grace starts."""
        left = self._connected.get(client_id, 0) - 1
        if left > 0:
            self._connected[client_id] = left
            return
        self._connected.pop(client_id, None)
        if client_id in self._acted_in and client_id not in self._grace:
            loop = asyncio.get_running_loop()
            self._grace[client_id] = loop.call_later(self._grace_s, self._expired, client_id)

    def _expired(self, client_id: str) -> None:
        self._grace.pop(client_id, None)
        for session_id in self._acted_in.pop(client_id, set()):
            self._unlink(session_id, client_id)
            self._spawn(self._remove(session_id, client_id))

    def touched(self, client_id: str | None, session_id: str) -> None:
        """The client acted in the session."""
        if client_id is None:
            return
        self._acted_in.setdefault(client_id, set()).add(session_id)
        self._clients_of.setdefault(session_id, set()).add(client_id)

    def departed(self, session_id: str) -> None:
        """The session left memory: no call of any client is parked there."""
        for client_id in self._clients_of.pop(session_id, set()):
            sessions = self._acted_in.get(client_id)
            if sessions is not None:
                sessions.discard(session_id)
                if not sessions:
                    del self._acted_in[client_id]
                    timer = self._grace.pop(client_id, None)
                    if timer is not None:
                        timer.cancel()

    def _unlink(self, session_id: str, client_id: str) -> None:
        clients = self._clients_of.get(session_id)
        if clients is not None:
            clients.discard(client_id)
            if not clients:
                del self._clients_of[session_id]

    def close(self) -> None:
        for timer in self._grace.values():
            timer.cancel()
        self._grace.clear()

    def sizes(self) -> ClientTableSizes:
        return ClientTableSizes(
            connected=len(self._connected),
            graces=len(self._grace),
            acted_in=len(self._acted_in),
            sessions=len(self._clients_of),
        )
