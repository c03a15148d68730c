"""Who listens to which channel, and what the server tells them unasked:
session channel actions and the root's session notifications.

`Listeners` maps a channel to the connections subscribed to it. The root is
per identity (`listening_key`): an identity's root notifications reach only
its own connections. On a sharded server of several fronts, root/sessionAdded
and root/sessionRemoved are relayed to the other fronts too (`RootNotice`,
best effort: shards/router.py), so the identity's connections there hear them.
`SummaryChecks` sends root/sessionSummaryChanged when a session's summary
changed, to its owner's connections on the root (of this front).

Invariants (loop thread only):
1. One summary check per session at a time; a change meanwhile runs one more
   check after it, so the last summary sent is never an older one.
2. With none of the owner's connections on the root nothing is checked and
   the summary last sent is forgotten, so the next check sends what it finds.
3. A check whose session was disposed (or left memory) meanwhile sends
   nothing: the id may be another identity's by now.
4. What is kept per session (the last summary sent) goes when the session
   leaves memory: the table holds resident sessions only.
"""

from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import attrs
import structlog

from agenthost.messages import rpc
from agenthost.messages.errors import AgentHostError
from agenthost.messages.protocol import ActionOrigin
from agenthost.messages.wire import to_wire
from agenthost.server.channels import ROOT, Sequencer, session_uri
from agenthost.server.errors import RpcError
from agenthost.server.registry import Registry
from agenthost.server.views import ListedSession, SummaryChanged, listed

log = structlog.get_logger(__name__)


class Listener(Protocol):
    def offer(self, message: dict[str, Any]) -> None: ...
    def leave(self, uri: str) -> None: ...


def listening_key(identity: str, uri: str) -> str:
    """Whose subscriptions a channel's broadcasts reach: the root's are per identity."""
    return f"{ROOT} {identity}" if uri == ROOT else uri


RELAYED = frozenset({"root/sessionAdded", "root/sessionRemoved"})
"""The root notifications other fronts hear too (a summary change is checked
where its chat's channel is open, for the root listeners there)."""


@attrs.frozen
class RootNotice:
    """A root notification for `identity`'s connections on another front."""

    identity: str
    frame: dict[str, Any]


class Listeners:
    """Channel -> the connections subscribed to it."""

    def __init__(
        self, sequencer: Sequencer, relay: Callable[[RootNotice], None] | None = None
    ) -> None:
        self._sequencer = sequencer
        self._relay = relay  # to the other fronts (a sharded host's), if any
        self._by_key: dict[str, set[Listener]] = {}

    def join(self, identity: str, uri: str, listener: Listener) -> None:
        self._by_key.setdefault(listening_key(identity, uri), set()).add(listener)

    def leave(self, identity: str, uri: str, listener: Listener) -> None:
        key = listening_key(identity, uri)
        listeners = self._by_key.get(key)
        if listeners is not None:
            listeners.discard(listener)
            if not listeners:
                del self._by_key[key]

    def of(self, identity: str, uri: str) -> tuple[Listener, ...]:
        """The channel's listeners (`identity` matters for the root alone)."""
        return tuple(self._by_key.get(listening_key(identity, uri), ()))

    def on_root(self, identity: str) -> bool:
        return bool(self._by_key.get(listening_key(identity, ROOT)))

    def root(self, identity: str, method: str, params: Any) -> None:
        """A root notification (typed params), to the identity's connections on the root."""
        listeners = self.of(identity, ROOT)
        relayed = self._relay is not None and method in RELAYED
        if listeners or relayed:
            frame = rpc.notification(method, params)
            for listener in listeners:
                listener.offer(frame)
            if relayed:
                assert self._relay is not None
                self._relay(RootNotice(identity=identity, frame=frame))

    def relayed(self, notice: RootNotice) -> None:
        """Another front's root notification, to the identity's connections here."""
        for listener in self.of(notice.identity, ROOT):
            listener.offer(notice.frame)

    def session_action(
        self, session_id: str, action: Any, origin: ActionOrigin | None = None
    ) -> None:
        """A session channel's accepted action, sequenced and sent to its subscribers."""
        uri = session_uri(session_id)
        envelope = self._sequencer.stamp(
            uri, to_wire(action), None if origin is None else to_wire(origin)
        )
        frame = {"jsonrpc": "2.0", "method": "action", "params": envelope}
        for listener in tuple(self._by_key.get(uri, ())):
            listener.offer(frame)

    def root_action(self, action: Any) -> None:
        """A root action (the host's, for every identity: its agents),
        sequenced once and sent to every connection on the root."""
        envelope = self._sequencer.stamp(ROOT, to_wire(action))
        frame = {"jsonrpc": "2.0", "method": "action", "params": envelope}
        for key, listeners in list(self._by_key.items()):
            if key.startswith(f"{ROOT} "):
                for listener in tuple(listeners):
                    listener.offer(frame)

    def __len__(self) -> int:
        return len(self._by_key)


@attrs.define
class _Check:
    """A session's summary check in flight; `again`: it may have changed since."""

    again: bool = False


Spawn = Callable[[Coroutine[Any, Any, None]], None]


class SummaryChecks:
    """Tells owners on the root when a session's summary changed."""

    def __init__(self, registry: Registry, listeners: Listeners, spawn: Spawn) -> None:
        self._registry = registry
        self._listeners = listeners
        self._spawn = spawn
        self._sent: dict[str, ListedSession] = {}  # session id -> the last summary sent
        self._checking: dict[str, _Check] = {}  # session id -> its check in flight

    def may_have_changed(self, session_id: str) -> None:
        owner = self._registry.owner(session_id)
        if owner is None:
            return
        running = self._checking.get(session_id)
        if running is not None:
            running.again = True
            return
        if not self._listeners.on_root(owner):
            self._sent.pop(session_id, None)
            return
        current = self._checking[session_id] = _Check()
        self._spawn(self._check(session_id, owner, current))

    async def _check(self, session_id: str, owner: str, current: _Check) -> None:
        try:
            while True:
                session = await self._registry.open(session_id)
                summary = listed(await session.summary())
                if self._checking.get(session_id) is not current:
                    return  # disposed meanwhile: the id may be another owner's now
                if self._sent.get(session_id) != summary:
                    self._sent[session_id] = summary
                    uri = session_uri(session_id)
                    changed = SummaryChanged(
                        channel=ROOT, session=uri, changes=summary, summary=summary
                    )
                    self._listeners.root(owner, "root/sessionSummaryChanged", changed)
                if not current.again:
                    return
                current.again = False
        except (AgentHostError, RpcError, TimeoutError) as error:  # gone, or the host stops
            log.info("summary_check_skipped", session_id=session_id, error=str(error))
        finally:
            if self._checking.get(session_id) is current:
                del self._checking[session_id]

    def departed(self, session_id: str) -> None:
        """The session left memory or was disposed: a check in flight sends nothing."""
        self._sent.pop(session_id, None)
        self._checking.pop(session_id, None)

    def sizes(self) -> tuple[int, int]:
        return len(self._sent), len(self._checking)
