"""The root's `activeSessions`: how many sessions an identity holds (the root
here is per identity), in its root snapshot and, as it changes,
`root/activeSessionsChanged` to that identity's connections on the root.

The count is the store's (`AsyncHost.count_sessions`: one row it keeps as
sessions are created and disposed), read at a root subscribe and after a
change: a session created or disposed here (createSession, disposeSession, a
session the host collected), or on another front (its relayed
root/sessionAdded or root/sessionRemoved).

Invariants (loop thread only):
1. One count per identity at a time; a change meanwhile counts once more
   after it, so the last count sent is never an older one.
2. A count equal to the one last sent is not sent again.
3. With none of the identity's connections on the root nothing is read and
   what was last sent is forgotten (the table holds listening identities only).
4. The action is the identity's alone: numbered like any root action, but
   replayed only to that identity (`Listeners.identity_root_action`).
"""

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import attrs
import structlog

from agenthost.messages.errors import AgentHostError
from agenthost.messages.session_events import ActiveSessionsChanged
from agenthost.server.broadcasts import Listeners

log = structlog.get_logger(__name__)

Count = Callable[[str], Awaitable[int]]
Spawn = Callable[[Coroutine[Any, Any, None]], None]


@attrs.define
class _Counting:
    """An identity's count in flight; `again`: it may have changed since."""

    again: bool = False


class ActiveSessions:
    """Counts an identity's sessions for its root, and tells it when they change."""

    def __init__(self, count: Count, listeners: Listeners, spawn: Spawn) -> None:
        self._count = count
        self._listeners = listeners
        self._spawn = spawn
        self._sent: dict[str, int] = {}  # identity -> the count its root was last told
        self._counting: dict[str, _Counting] = {}

    async def snapshot(self, identity: str) -> int:
        """The count for a root snapshot (the subscriber has joined the root)."""
        return await self._count(identity)

    def changed(self, identity: str) -> None:
        """One of the identity's sessions was created or disposed."""
        running = self._counting.get(identity)
        if running is not None:
            running.again = True
            return
        if not self._listeners.on_root(identity):
            self._sent.pop(identity, None)
            return
        current = self._counting[identity] = _Counting()
        self._spawn(self._run(identity, current))

    async def _run(self, identity: str, current: _Counting) -> None:
        try:
            while True:
                count = await self._count(identity)
                if not self._listeners.on_root(identity):
                    self._sent.pop(identity, None)
                elif self._sent.get(identity) != count:
                    self._sent[identity] = count
                    action = ActiveSessionsChanged(active_sessions=count)
                    self._listeners.identity_root_action(identity, action)
                if not current.again:
                    return
                current.again = False
        except (AgentHostError, TimeoutError) as error:  # the store failed, or the host stops
            log.info("active_sessions_skipped", error=str(error))
        finally:
            if self._counting.get(identity) is current:
                del self._counting[identity]

    def __len__(self) -> int:
        return len(self._sent)
