"""Who listens to which channel, and what the server tells them unasked:
session channel actions and the root's session notifications.

`Listeners` maps a channel to the connections subscribed to it. The root is
per identity (`listening_key`): an identity's root notifications reach only
its own connections. On a sharded server of several fronts, root/sessionAdded
and root/sessionRemoved are relayed to the other fronts too (`RootNotice`,
best effort: shards/router.py), so the identity's connections there hear them.
`SummaryChecks` runs when the host says a session may have changed
(`AsyncHost.on_session_changed`, and the chat events the channels see): it
sends root/sessionSummaryChanged when the session's summary changed, to its
owner's connections on the root of this front (only what changed), and the
session actions that carry the session channel's subscribers from the state
they were shown to the session's state now (server/session_sync.py), whatever
changed it: a title the host derived, the read flag, a chat created,
disposed or changing status, the input the session waits for.

Invariants (loop thread only):
1. One summary check per session at a time; a change meanwhile runs one more
   check after it, so the last summary sent is never an older one.
2. With none of the owner's connections on the root nothing is checked and
   the summary last sent is forgotten, so the next check sends what it finds;
   likewise the state shown to a session channel nobody follows.
3. A check whose session was disposed (or left memory) meanwhile sends
   nothing: the id may be another identity's by now.
4. What is kept per session (the last summary sent, the state shown) goes
   when the session leaves memory: the tables hold resident sessions only.
5. Every subscriber of a session channel was shown the same state
   (`_shown`): a new subscriber joins, under the session's lock, after the
   others were sent what changed, with that state as its snapshot; a
   client's own session action is reduced into it as it is broadcast. So a
   subscriber that reduces what it received has what a fresh snapshot shows
   (its `status` through the extension x-session/statusChanged where no 1.1
   action carries it: server/session_sync.py).
"""

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import attrs
import structlog

from agenthost.actors.aio import AsyncSession
from agenthost.messages import rpc, versions
from agenthost.messages.errors import AgentHostError
from agenthost.messages.protocol import ActionOrigin
from agenthost.messages.reducers import reduce_session
from agenthost.messages.session_events import SessionEvent
from agenthost.messages.state import SessionState
from agenthost.messages.wire import to_wire
from agenthost.server.channels import ROOT, Sequencer, identity_root, session_uri
from agenthost.server.errors import RpcError
from agenthost.server.registry import Registry
from agenthost.server.session_sync import changes as session_changes
from agenthost.server.session_sync import channel_state
from agenthost.server.views import (
    ListedSession,
    SessionAdded,
    SummaryChanged,
    listed,
    summary_changes,
)

log = structlog.get_logger(__name__)


class Listener(Protocol):
    def offer(self, message: dict[str, Any]) -> None: ...
    def leave(self, uri: str) -> None: ...


def listening_key(identity: str, uri: str) -> str:
    """Whose subscriptions a channel's broadcasts reach: the root's are per identity."""
    return identity_root(identity) if uri == ROOT else uri


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
        """A session channel's accepted action, sequenced and sent to its
        subscribers whose version knows it."""
        uri = session_uri(session_id)
        envelope = self._sequencer.stamp(
            uri, to_wire(action), None if origin is None else to_wire(origin)
        )
        frame = {"jsonrpc": "2.0", "method": "action", "params": envelope}
        kind = envelope["action"].get("type", "")
        for listener in tuple(self._by_key.get(uri, ())):
            version = getattr(listener, "version", None)
            if version is None or versions.knows_action(version, kind):
                listener.offer(frame)

    def on_channel(self, uri: str) -> bool:
        return bool(self._by_key.get(uri))

    def root_action(self, action: Any) -> None:
        """A root action (the host's, for every identity: its agents),
        sequenced once and sent to every connection on the root."""
        envelope = self._sequencer.stamp(ROOT, to_wire(action))
        frame = {"jsonrpc": "2.0", "method": "action", "params": envelope}
        for key, listeners in list(self._by_key.items()):
            if key.startswith(f"{ROOT} "):
                for listener in tuple(listeners):
                    listener.offer(frame)

    def identity_root_action(self, identity: str, action: Any) -> None:
        """A root action for one identity alone (its activeSessions), sequenced
        and sent to its connections on the root; replayed to that identity only."""
        key = listening_key(identity, ROOT)
        envelope = self._sequencer.stamp(ROOT, to_wire(action), recorded_as=key)
        frame = {"jsonrpc": "2.0", "method": "action", "params": envelope}
        for listener in tuple(self._by_key.get(key, ())):
            listener.offer(frame)

    def __len__(self) -> int:
        return len(self._by_key)


@attrs.define
class _Check:
    """A session's summary check in flight; `again`: it may have changed since."""

    again: bool = False


Spawn = Callable[[Coroutine[Any, Any, None]], None]


class SummaryChecks:
    """Tells owners on the root when a session's summary changed, and a session
    channel's subscribers what changed in the session."""

    def __init__(self, registry: Registry, listeners: Listeners, spawn: Spawn) -> None:
        self._registry = registry
        self._listeners = listeners
        self._spawn = spawn
        self._sent: dict[str, ListedSession] = {}  # session id -> the last summary sent
        self._shown: dict[str, SessionState] = {}  # session id -> its channel's state
        self._checking: dict[str, _Check] = {}  # session id -> its check in flight
        self._locks: dict[str, asyncio.Lock] = {}  # session id -> held while it syncs
        self._adding: set[str] = set()  # created, root/sessionAdded not sent yet

    def may_have_changed(self, session_id: str) -> None:
        owner = self._registry.owner(session_id)
        if owner is None:
            return
        running = self._checking.get(session_id)
        if running is not None:
            running.again = True
            return
        on_root = self._listeners.on_root(owner)
        on_channel = self._listeners.on_channel(session_uri(session_id))
        if not on_root:
            self._sent.pop(session_id, None)
        if not on_channel:
            self._shown.pop(session_id, None)
        if not on_root and not on_channel:
            return
        current = self._checking[session_id] = _Check()
        self._spawn(self._check(session_id, owner, current))

    async def _check(self, session_id: str, owner: str, current: _Check) -> None:
        try:
            while True:
                session = await self._registry.open(session_id)
                async with self._lock(session_id):
                    if self._checking.get(session_id) is not current:
                        return  # disposed meanwhile: the id may be another owner's now
                    await self._sync(session, owner, current)
                if not current.again:
                    return
                current.again = False
        except (AgentHostError, RpcError, TimeoutError) as error:  # gone, or the host stops
            log.info("summary_check_skipped", session_id=session_id, error=str(error))
        finally:
            if self._checking.get(session_id) is current:
                del self._checking[session_id]

    def _lock(self, session_id: str) -> asyncio.Lock:
        lock = self._locks.get(session_id)
        if lock is None:
            lock = self._locks[session_id] = asyncio.Lock()
        return lock

    async def _sync(
        self, session: AsyncSession, owner: str, current: _Check | None
    ) -> tuple[SessionState, ListedSession]:
        """(under the session's lock) Send what changed; the channel's state now,
        and the session as listed."""
        session_id = session.id
        view = await session.view()
        summary = listed(view.summary)
        if current is not None and self._checking.get(session_id) is not current:
            return channel_state(view), summary  # disposed while it answered: nothing sent
        uri = session_uri(session_id)
        if not self._listeners.on_root(owner):
            self._sent.pop(session_id, None)  # what the root was sent is forgotten (2.)
        elif session_id not in self._adding:
            changes = summary_changes(self._sent.get(session_id), summary)
            self._sent[session_id] = summary
            if changes is not None:
                changed = SummaryChanged(channel=ROOT, session=uri, changes=changes)
                self._listeners.root(owner, "root/sessionSummaryChanged", changed)
        state = channel_state(view)
        shown = self._shown.get(session_id)
        if self._listeners.on_channel(uri):
            if shown is not None:
                for action in session_changes(shown, state):
                    self._listeners.session_action(session_id, action)
            self._shown[session_id] = state
        else:
            self._shown.pop(session_id, None)
        return state, summary

    def adding(self, session_id: str) -> None:
        """A session is being created: no summary change goes out before its
        root/sessionAdded (`joined(added=True)`)."""
        self._adding.add(session_id)

    async def joined(
        self, session: AsyncSession, owner: str, join: Callable[[], None], *, added: bool = False
    ) -> tuple[SessionState, ListedSession]:
        """A connection subscribes to the session's channel: the others are sent
        what changed, then it joins (`join`), with the state they now have (and
        the session as listed). `added`: the session was just created, and the
        owner's connections on the root are told (root/sessionAdded)."""
        async with self._lock(session.id):
            state, summary = await self._sync(session, owner, None)
            join()
            self._shown[session.id] = state
            if added:
                self._adding.discard(session.id)
                self._sent[session.id] = summary
                added_params = SessionAdded(channel=ROOT, summary=summary)
                self._listeners.root(owner, "root/sessionAdded", added_params)
            return state, summary

    def client_action(
        self, session_id: str, action: SessionEvent, origin: ActionOrigin | None
    ) -> None:
        """A client's accepted session action: broadcast with its origin, and
        reduced into what the channel was shown (a check after it finds it
        sent)."""
        self._listeners.session_action(session_id, action, origin)
        shown = self._shown.get(session_id)
        if shown is not None:
            self._shown[session_id] = reduce_session(shown, action)

    def departed(self, session_id: str) -> None:
        """The session left memory or was disposed: a check in flight sends nothing."""
        self._sent.pop(session_id, None)
        self._shown.pop(session_id, None)
        self._adding.discard(session_id)
        self._checking.pop(session_id, None)
        self._locks.pop(session_id, None)  # a session reusing the id gets a lock of its own

    def sizes(self) -> tuple[int, int]:
        return len(self._sent) + len(self._shown), len(self._checking)
