"""The AHP requests the server answers: one async handler per method, taking
the method's typed params (messages/protocol.py, decoded by the connection
with `rpc.decode_params`) and returning its typed result (encoded with
`to_wire`), or raising RpcError / AgentHostError.

`REQUESTS` is the table; adding a method is one entry (a method of
`rpc.CLIENT_REQUESTS` that has none is answered -32601). `NOTIFICATIONS`
likewise for the client's notifications (dispatchAction's handler is the
connection's ordered queue, then server/actions.py).

Rules kept here:
- a session is visible only to the identity that created it: anyone else is
  told "not found", never its contents (server/registry.py);
- `ping`, `initialize` and `reconnect` are answered before initialize; every
  other request is refused (-32600) until then;
- `initialize` negotiates as upstream does (`versions.negotiate`): the
  highest offered version within a served caret range, always one the client
  offered; none is -32005 with `supportedVersions`, then the socket closes
  (after the answer: server/connection.py);
- the creator of a session follows its lifecycle: creating -> ready, or
  creationFailed;
- a `subscribe` offering `flowControl` on a 1.1 connection is windowed
  (server/windows.py): answered with the limits, the snapshot in frames
  after the answer; `reconnect.windows` resumes such subscriptions apart
  from the inline replay.
"""

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

from agenthost.actors.aio import AsyncSession
from agenthost.messages import protocol as p
from agenthost.messages import rpc, versions
from agenthost.messages.common import Implementation
from agenthost.messages.errors import AgentHostError, JsonRpcErrorCode
from agenthost.messages.events import TurnsLoaded
from agenthost.messages.session_events import SessionCreationFailed, SessionReady
from agenthost.messages.sizes import value_bytes
from agenthost.messages.state import SessionState, Turn
from agenthost.messages.wire import to_wire
from agenthost.server import actions, authentication, completions, session_config, windows
from agenthost.server.channels import CHAT_PREFIX, ROOT, SESSION_PREFIX, chat_uri
from agenthost.server.errors import RpcError, bad_param
from agenthost.server.session_sync import for_version
from agenthost.server.views import (
    CreatedChat,
    CreatedSession,
    ListedSession,
    SessionRemoved,
    SessionsPage,
    TurnsPage,
    listed,
    root_state,
)

if TYPE_CHECKING:
    from agenthost.server.connection import Connection

MAX_PAGE = 1000


def _as_sent(params: Any) -> Any:
    return params


@attrs.frozen(kw_only=True)
class Request:
    """A request's handler. `adapt` turns an older form of the params into the
    one its type decodes; `before_initialize`: answered before initialize."""

    handler: Callable[["Connection", Any], Awaitable[Any]]
    before_initialize: bool = False
    adapt: Callable[[Any], Any] = _as_sent


@attrs.frozen(kw_only=True)
class Notification:
    """A notification's handler: its typed params and the params as sent."""

    handler: Callable[["Connection", Any, Any], None]
    adapt: Callable[[Any], Any] = _as_sent


# -- ping, initialize, reconnect ---------------------------------------------------------
async def ping(conn: "Connection", params: p.PingParams) -> None:
    return None


def _singular_version(params: Any) -> Any:
    """Older clients offer one `protocolVersion`."""
    if (
        isinstance(params, dict)
        and "protocolVersions" not in params
        and "protocolVersion" in params
    ):
        return {**params, "protocolVersions": [params["protocolVersion"]]}
    return params


async def initialize(conn: "Connection", params: p.InitializeParams) -> p.InitializeResult:
    version = versions.negotiate(params.protocol_versions)
    if version is None:  # answered, then the connection closes
        refused = rpc.unsupported_version(None, versions.supported_versions())["error"]
        raise RpcError(refused["code"], refused["message"], refused["data"])
    await conn.bind_client(params.client_id)
    conn.version = version
    snapshots = [await subscribe_to(conn, uri) for uri in params.initial_subscriptions]
    return p.InitializeResult(
        protocol_version=version,
        server_seq=conn.server.sequencer.seq,
        snapshots=tuple(snapshots),
        server_info=Implementation(name="agenthost"),
        completion_trigger_characters=completions.TRIGGERS,
    )


async def reconnect(conn: "Connection", params: p.ReconnectParams) -> Any:
    """Both shapes (told apart by shape, messages/protocol.py): connection-wide,
    one `lastSeenServerSeq` for every subscription, answered with one replay or
    every snapshot; per channel, a cursor for each, answered with a recovery
    for each (`reconnect_channels`)."""
    if isinstance(params, p.ChannelReconnectParams):
        return await reconnect_channels(conn, params)
    await conn.bind_client(params.client_id)
    conn.version = conn.version or versions.PROTOCOL_VERSION
    checkpoints = params.windows.items if params.windows is not None else ()
    windowed = windows.requested(checkpoints)  # they recover apart, through their frames
    snapshots: list[p.Snapshot] = []
    missing: list[str] = []
    for uri in params.subscriptions:
        if uri in windowed:
            continue
        try:
            snapshots.append(await subscribe_to(conn, uri))
        except RpcError:
            missing.append(uri)
    legacy = set(conn.channels) - windowed
    replay = conn.server.sequencer.since(params.last_seen_server_seq, legacy, conn.identity)
    resumed = None
    if params.windows is not None:
        resumed = await resume_windows(conn, checkpoints, set(params.subscriptions))
    if replay is None:
        return p.ReconnectSnapshot(
            snapshots=tuple(snapshots), missing=tuple(missing), windows=resumed
        )
    sent = tuple(e for e in replay if versions.sent_to(conn.version, e["action"]))
    return Replayed(actions=sent, missing=tuple(missing), windows=resumed)


async def reconnect_channels(
    conn: "Connection", params: p.ChannelReconnectParams
) -> "ChannelsRecovered":
    """Per channel, in the order asked: its missed actions (`replay`), its
    fresh snapshot when the buffer no longer reaches back to its cursor
    (`snapshot`), or `missing` when it is gone or not the caller's. Every
    channel not missing is followed again."""
    await conn.bind_client(params.client_id)
    conn.version = conn.version or versions.PROTOCOL_VERSION
    snapshots: list[p.Snapshot | None] = []
    for cursor in params.subscriptions:
        try:
            snapshots.append(await subscribe_to(conn, cursor.channel))
        except RpcError:
            snapshots.append(None)
    recoveries: list[Any] = []
    for cursor, snapshot in zip(params.subscriptions, snapshots, strict=True):
        if snapshot is None:
            recoveries.append(p.ChannelMissing(channel=cursor.channel))
            continue
        replay = conn.server.sequencer.since(
            cursor.last_seen_server_seq, {cursor.channel}, conn.identity
        )
        if replay is None:
            recoveries.append(p.ChannelSnapshot(channel=cursor.channel, snapshot=snapshot))
        else:
            recoveries.append(ChannelReplayed(channel=cursor.channel, actions=tuple(replay)))
    return ChannelsRecovered(channels=tuple(recoveries))


@attrs.frozen(kw_only=True)
class ChannelReplayed:
    """One channel's replay: the envelopes as they were sent (already wire JSON)."""

    channel: str
    actions: tuple[dict[str, Any], ...]
    kind: str = "replay"


@attrs.frozen(kw_only=True)
class ChannelsRecovered:
    """The per-channel reconnect's answer (AHP's ChannelReconnectResult, its
    replays as sent)."""

    channels: tuple[ChannelReplayed | p.ChannelSnapshot | p.ChannelMissing, ...]


@attrs.frozen(kw_only=True)
class Replayed:
    """reconnect's replay: the envelopes as they were sent (already wire JSON)."""

    actions: tuple[dict[str, Any], ...]
    missing: tuple[str, ...]
    windows: p.ChannelWindows | None = None
    type: str = "replay"


async def resume_windows(
    conn: "Connection", checkpoints: tuple[p.ChannelCheckpoint, ...], subscribed: set[str]
) -> p.ChannelWindows:
    """The client's windowed subscriptions, resumed with the limits they had
    and fresh counters: replay after the applied checkpoint where the replay
    buffer still holds it, else a snapshot, through the window's frames. One
    the host no longer has (unknown limits, a channel gone, not among the
    subscriptions) is left out: the client disposes it."""
    server = conn.server
    items = []
    for checkpoint in checkpoints:
        uri = checkpoint.channel
        assert conn.client_id is not None
        flow = _taken_over(conn, uri) or server.remembered_windows.take(conn.client_id, uri)
        if flow is None or uri not in subscribed:
            continue
        if uri in conn.channels:
            conn.leave(uri)
        window = conn.windows[uri] = windows.Window(conn, uri, flow, conn.limits.windows)
        try:
            snapshot = await subscribe_to(conn, uri)
        except RpcError:
            conn.windows.pop(uri, None)
            continue
        seen = checkpoint.last_applied_server_seq
        envelopes = None if seen is None else server.sequencer.since(seen, {uri}, conn.identity)
        if envelopes is None:
            recovery = "snapshot"
            bootstrap = [windows.snapshot_message(snapshot)]
            after: int | None = snapshot.from_seq
        else:
            recovery = "replay"
            bootstrap = [
                rpc.notification("action", envelope)
                for envelope in envelopes
                if versions.sent_to(conn.version, envelope["action"])
            ]
            after = envelopes[-1]["serverSeq"] if envelopes else seen
        windows.start_after_answer(window, bootstrap, after)
        items.append(p.ChannelWindow(channel=uri, flow_control=flow, recovery=recovery))
    return p.ChannelWindows(items=tuple(items))


def _taken_over(conn: "Connection", uri: str) -> p.ChannelFlowControl | None:
    """The window the client's older connection still holds on `uri` (its
    close not yet seen here): it ends there, and its limits go on here."""
    for other in list(conn.server.connections):
        window = other.windows.get(uri)
        if other is not conn and other.client_id == conn.client_id and window is not None:
            other.leave(uri)
            return window.flow
    return None


# -- subscriptions -----------------------------------------------------------------------
async def subscribe(conn: "Connection", params: p.SubscribeParams) -> p.SubscribeResult:
    if params.flow_control is not None and windows.offered(conn, params.flow_control):
        return await subscribe_windowed(conn, params.channel, params.flow_control)
    if params.channel in conn.windows:  # an ordinary subscription replaces the windowed one
        conn.leave(params.channel)
    return p.SubscribeResult(snapshot=await subscribe_to(conn, params.channel))


async def subscribe_windowed(
    conn: "Connection", uri: str, offer: p.SubscribeFlowControl
) -> p.SubscribeResult:
    """Accept a flow-control offer (server/windows.py): the answer carries the
    limits and no snapshot; the snapshot follows in frames, then channel/ready."""
    flow = windows.accepted(uri, offer, conn.limits.windows, conn.limits.frame_bytes)
    if uri in conn.channels:  # one subscription a channel: this one replaces it
        conn.leave(uri)
    window = conn.windows[uri] = windows.Window(conn, uri, flow, conn.limits.windows)
    try:
        snapshot = await subscribe_to(conn, uri)
    except BaseException:
        if conn.windows.get(uri) is window:  # not subscribed: no window stays behind
            conn.leave(uri)
        raise
    windows.start_after_answer(window, [windows.snapshot_message(snapshot)], snapshot.from_seq)
    return p.SubscribeResult(flow_control=flow)


async def subscribe_to(conn: "Connection", uri: str) -> p.Snapshot:
    """Follow a channel; its snapshot."""
    server = conn.server
    if uri not in conn.channels and len(conn.channels) >= conn.limits.subscriptions:
        raise RpcError(JsonRpcErrorCode.INVALID_PARAMS, "too many subscriptions on this connection")
    if uri == ROOT:
        conn.join(uri)
        count = await server.active_sessions.snapshot(conn.identity)
        state = root_state(server.available_providers(), (authentication.RESOURCE,), count)
        return p.Snapshot(resource=ROOT, state=state, from_seq=server.sequencer.seq)
    if uri.startswith(SESSION_PREFIX):
        session = await server.registry.session(uri[len(SESSION_PREFIX) :], conn.identity)
        shown, _ = await session_snapshot(conn, session, lambda: conn.join(uri))
        return p.Snapshot(resource=uri, state=shown, from_seq=server.sequencer.seq)
    if uri.startswith(CHAT_PREFIX):
        _, chat = await server.registry.chat(uri[len(CHAT_PREFIX) :], conn.identity)
        channel = await server.channels.channel(chat)
        conn.join(uri)
        channel.subscribers.add(conn.sink(uri))
        return channel.snapshot(legacy_steering=conn.legacy_steering)
    raise RpcError(JsonRpcErrorCode.NOT_FOUND, f"unknown channel {uri}")


def unsubscribe(conn: "Connection", params: p.UnsubscribeParams, sent: Any) -> None:
    if params.channel in conn.channels:
        conn.leave(params.channel)


async def session_snapshot(
    conn: "Connection", session: AsyncSession, join: Callable[[], None]
) -> tuple[SessionState, ListedSession]:
    """Join the session's channel (`join`): its state as this peer's version
    shows it, the state its other subscribers were just brought to
    (server/broadcasts.py), and the session as listed."""
    state, summary = await conn.server.summaries.joined(session, conn.identity, join)
    chats = [chat.resource.removeprefix(CHAT_PREFIX) for chat in state.chats]
    conn.server.registry.note_chats(session.id, chats)
    return for_version(state, conn.version), summary


# -- sessions and chats ------------------------------------------------------------------
def _session_id(uri: str) -> str:
    if not uri.startswith(SESSION_PREFIX) or len(uri) == len(SESSION_PREFIX):
        raise bad_param("channel", "must be ahp-session:/<id>")
    return uri[len(SESSION_PREFIX) :]


async def create_session(conn: "Connection", params: p.CreateSessionParams) -> CreatedSession:
    server = conn.server
    uri = params.channel
    session_id = _session_id(uri)
    provider = params.provider or sorted(server.host.services.providers)[0]
    config = session_config.checked(params.config)  # refused before anything is created
    client = params.active_client
    if client is not None:
        actions.own_client(conn, client.client_id, "activeClient.clientId")
    if server.registry.owner(session_id) is not None or await server.registry.find(session_id):
        raise RpcError(JsonRpcErrorCode.SESSION_ALREADY_EXISTS, f"session {session_id} exists")
    with server.quotas.creating(conn.identity, server.registry.resident_of(conn.identity)):
        conn.join(uri)  # the creator follows the lifecycle: creating -> ready, or creationFailed
        server.summaries.adding(session_id)
        try:
            session = await server.host.create_session(provider, session_id=session_id)
        except AgentHostError as error:
            server.listeners.session_action(session_id, SessionCreationFailed(error=error))
            server.summaries.departed(session_id)
            conn.leave(uri)
            raise
        await server.sessions_owned(session, conn.identity)
        server.active_sessions.changed(conn.identity)
        if config:
            await session.set_config(config)
        if client is not None:  # as session/activeClientSet would
            await session.set_client_tools(client.client_id, client.tools, shown=client)
            server.clients.touched(client.client_id, session_id)
    server.listeners.session_action(session_id, SessionReady())
    state, _ = await server.summaries.joined(session, conn.identity, lambda: None, added=True)
    server.registry.note_chats(
        session_id, [c.resource.removeprefix(CHAT_PREFIX) for c in state.chats]
    )
    return CreatedSession(resource=uri, state=for_version(state, conn.version))


async def dispose_session(conn: "Connection", params: p.DisposeSessionParams) -> None:
    server = conn.server
    uri = params.channel
    session = await server.registry.session(uri.removeprefix(SESSION_PREFIX), conn.identity)
    await session.dispose()
    await server.forget_session(session.id)
    removed = SessionRemoved(channel=ROOT, session=uri, resource=uri)
    server.listeners.root(conn.identity, "root/sessionRemoved", removed)
    server.active_sessions.changed(conn.identity)


async def create_chat(conn: "Connection", params: p.CreateChatParams) -> CreatedChat:
    server = conn.server
    session = await server.registry.session(
        params.channel.removeprefix(SESSION_PREFIX), conn.identity
    )
    chat = await session.create_chat()
    server.registry.note_chats(session.id, (chat.id,))
    uri = chat_uri(chat.id)
    return CreatedChat(chat=uri, resource=uri)


async def dispose_chat(conn: "Connection", params: p.DisposeChatParams) -> None:
    server = conn.server
    uri = params.channel
    session, chat = await server.registry.chat(uri.removeprefix(CHAT_PREFIX), conn.identity)
    await session.dispose_chat(chat.id)
    await server.close_channel(uri)


def _limit(limit: int | None, default: int) -> int:
    if limit is None:
        return default
    if not 1 <= limit <= MAX_PAGE:
        raise bad_param("limit", f"must be 1 to {MAX_PAGE}")
    return limit


def _offset(cursor: str | None) -> int:
    if not cursor:
        return 0
    if not cursor.isdigit():
        raise bad_param("cursor", "not a cursor this server made")
    return int(cursor)


async def list_sessions(conn: "Connection", params: p.ListSessionsParams) -> SessionsPage:
    """The identity's sessions, a page at a time (the store's cursor, opaque):
    one indexed read, whatever other identities hold."""
    limit = _limit(params.limit, conn.limits.page)
    page = await conn.server.host.list_sessions_page(
        conn.identity, limit=limit, cursor=params.cursor or None
    )
    return SessionsPage(items=tuple(listed(s) for s in page.items), next_cursor=page.next_cursor)


@attrs.frozen(kw_only=True)
class Loaded:
    """fetchTurns' answer from 0.5.1: `{}` (the turns went as chat/turnsLoaded)."""


async def fetch_turns(conn: "Connection", params: p.FetchTurnsParams) -> TurnsPage | Loaded:
    """A chat's turns, a page at a time (at most `limit` turns and
    Limits.page_bytes, the first turn always), in the form the peer's version
    knows:
    - before 0.5.1, `{before?, limit?}` -> `{turns, hasMore}`: the turns just
      before the turn `before` (None: the newest), oldest first; or, with ours
      `cursor` (an offset from the oldest turn), the page from there on, with
      `nextCursor`;
    - from 0.5.1, `{cursor?}` -> `{}`, the page arriving to this connection
      alone as `chat/turnsLoaded {turns, turnsNextCursor}`, ahead of the
      answer: the page before `cursor` (None: the newest page), and the
      cursor of the page before it (None: none is left). Chat snapshots carry
      every turn (no `turnsNextCursor`), so a client needs this only to read
      a chat's history without following it.
    """
    uri = params.channel
    _, chat = await conn.server.registry.chat(uri.removeprefix(CHAT_PREFIX), conn.identity)
    turns = (await chat.state()).turns
    limit = _limit(params.limit, conn.limits.page)
    if conn.version is not None and versions.turns_by_cursor(conn.version):
        end = len(turns) if params.cursor is None else _before(params.cursor, len(turns))
        page = bytes_page_back(turns[max(0, end - limit) : end], conn.limits.page_bytes)
        start = end - len(page)
        loaded = TurnsLoaded(turns=page, turns_next_cursor=str(start) if start else None)
        envelope = conn.server.sequencer.unrecorded(uri, to_wire(loaded))
        conn.offer({"jsonrpc": "2.0", "method": "action", "params": envelope})
        return Loaded()
    if params.cursor is not None:
        cursor = _offset(params.cursor)  # ours: forward from an offset (the oldest first)
        page = bytes_page(turns[cursor : cursor + limit], conn.limits.page_bytes)
        after = cursor + len(page)
        more = after < len(turns)
        return TurnsPage(turns=page, has_more=more, next_cursor=str(after) if more else None)
    end = len(turns)
    if params.before is not None:
        ids = [turn.id for turn in turns]
        if params.before not in ids:
            raise bad_param("before", f"no turn {params.before} in this chat")
        end = ids.index(params.before)
    page = bytes_page_back(turns[max(0, end - limit) : end], conn.limits.page_bytes)
    return TurnsPage(turns=page, has_more=end - len(page) > 0)


def _before(cursor: str, count: int) -> int:
    """A turnsNextCursor this server made: how many turns come before the page."""
    if not cursor.isdigit() or int(cursor) > count:
        raise bad_param("cursor", "not a cursor this server made")
    return int(cursor)


def bytes_page_back(turns: tuple[Turn, ...], page_bytes: int) -> tuple[Turn, ...]:
    """The last of `turns` that fit in `page_bytes` (the last one always): a
    page read backwards, from the newest."""
    return tuple(reversed(bytes_page(tuple(reversed(turns)), page_bytes)))


def bytes_page(turns: tuple[Turn, ...], page_bytes: int) -> tuple[Turn, ...]:
    """The first of `turns` that fit in `page_bytes` (the first one always): a
    page of 1000 turns of 0.9 MB would be one 900 MB frame."""
    size = 0
    for count, turn in enumerate(turns):
        size += value_bytes(turn)
        if count and size > page_bytes:
            return turns[:count]
    return turns


REQUESTS: dict[str, Request] = {
    "ping": Request(handler=ping, before_initialize=True),
    "initialize": Request(handler=initialize, before_initialize=True, adapt=_singular_version),
    "reconnect": Request(handler=reconnect, before_initialize=True),
    "subscribe": Request(handler=subscribe),
    "createSession": Request(handler=create_session),
    "disposeSession": Request(handler=dispose_session),
    "createChat": Request(handler=create_chat),
    "disposeChat": Request(handler=dispose_chat),
    "listSessions": Request(handler=list_sessions),
    "fetchTurns": Request(handler=fetch_turns),
    "completions": Request(handler=completions.completions),
    "authenticate": Request(handler=authentication.authenticate, before_initialize=True),
    "resolveSessionConfig": Request(handler=session_config.resolve_session_config),
    "sessionConfigCompletions": Request(handler=session_config.session_config_completions),
}
"""Method -> handler. A method of rpc.CLIENT_REQUESTS missing here would be
answered -32601 (none is, today)."""


def dispatch_action(conn: "Connection", params: p.DispatchActionParams, sent: Any) -> None:
    conn.enqueue(params, sent["action"])


def channel_frame(conn: "Connection", params: p.ChannelFrameParams, sent: Any) -> None:
    window = conn.windows.get(params.channel)
    if window is not None:
        window.receive(params)


def channel_credit(conn: "Connection", params: p.ChannelCreditParams, sent: Any) -> None:
    window = conn.windows.get(params.channel)
    if window is not None:  # none: reset or unsubscribed meanwhile (stale credit is harmless)
        window.credit(params.consumed_bytes)


def channel_reset(conn: "Connection", params: p.ChannelResetParams, sent: Any) -> None:
    """The client aborts a windowed subscription: it ends."""
    if params.channel in conn.windows:
        conn.leave(params.channel)


NOTIFICATIONS: dict[str, Notification] = {
    "unsubscribe": Notification(handler=unsubscribe),
    "dispatchAction": Notification(handler=dispatch_action, adapt=actions.older_shapes),
    "channel/frame": Notification(handler=channel_frame),
    "channel/credit": Notification(handler=channel_credit),
    "channel/reset": Notification(handler=channel_reset),
}
"""The client's notifications the server acts on; a dispatched action is
queued on its connection and taken in order by server/actions.py."""
