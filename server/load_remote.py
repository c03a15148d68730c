"""`agenthost load --url`: the remote driver, against a running AHP server.

A bounded number of WebSockets (`AhpConnection`, paced below the server's
rate limit), each carrying many chats (`RemoteChat`); every chat is a session
of its own, subscribed to its default chat; a turn is a dispatched
`chat/turnStarted` and ends with the first terminal action for its turn id.
Afterwards each chat's turns are read back with `fetchTurns` and its state
with a fresh `subscribe` snapshot. The per-chat loop, the invariants and the
report are server/load.py's, shared with the in-process driver.
"""

import asyncio
import itertools
import json
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import aiohttp

from agenthost.actors.deadlines import Deadlines
from agenthost.server.load import (
    PAGE,
    TERMINAL_ACTIONS,
    ChatRecord,
    LoadConfig,
    LoadError,
    LoadReport,
    build_report,
    run_chat,
)


class RemoteError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('message')} (code {error.get('code')})")
        self.code = error.get("code")


class ConnectionLost(Exception):
    pass


class AhpConnection:
    """One WebSocket to the server, carrying many chats; runs on the driver's loop.

    Paces what it sends below the server's rate limit (a token bucket), since
    the server drops a dispatch over the limit without an answer."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, rate: float, burst: int) -> None:
        self.ws = ws
        self.frames = 0
        self.chats: dict[str, RemoteChat] = {}
        self._rate = rate
        self._burst = float(burst)
        self._tokens = float(burst)
        self._refilled = time.monotonic()
        self._ids = itertools.count(1)
        self._seq = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._lost = False
        self._reader = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def open(
        cls, http: aiohttp.ClientSession, config: LoadConfig, number: int
    ) -> "AhpConnection":
        assert config.url is not None
        headers = {"Authorization": f"Bearer {config.token}"}
        try:
            ws = await asyncio.wait_for(
                http.ws_connect(config.url, headers=headers, max_msg_size=0),
                config.turn_timeout_s,
            )
        except aiohttp.ClientError as error:
            raise LoadError(f"cannot connect to {config.url}: {error}") from error
        except TimeoutError as error:
            raise LoadError(
                f"cannot connect to {config.url}: no answer within {config.turn_timeout_s} s"
            ) from error
        connection = cls(ws, config.rate, config.burst)
        await connection.call(
            "initialize",
            {
                "channel": "ahp-root://",
                "protocolVersions": ["1.1.0"],
                "clientId": f"load-{uuid.uuid4().hex[:12]}-{number}",
            },
            config.turn_timeout_s,
        )
        return connection

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                if frame.type is not aiohttp.WSMsgType.TEXT:
                    continue
                self.frames += 1
                message = json.loads(frame.data)
                if "method" not in message:
                    waiting = self._waiting.pop(message.get("id"), None)
                    if waiting is not None and not waiting.done():
                        waiting.set_result(message)
                elif message["method"] == "action":
                    params = message.get("params") or {}
                    chat = self.chats.get(str(params.get("channel")))
                    if chat is not None:
                        chat.on_action(params)
        finally:
            self._lost = True
            for waiting in self._waiting.values():
                if not waiting.done():
                    waiting.set_exception(ConnectionLost("the server closed the connection"))
            for chat in self.chats.values():
                chat.connection_lost()

    async def _pace(self) -> None:
        while True:
            now = time.monotonic()
            self._tokens = min(self._burst, self._tokens + (now - self._refilled) * self._rate)
            self._refilled = now
            if self._tokens >= 1:
                self._tokens -= 1
                return
            await asyncio.sleep((1 - self._tokens) / self._rate)

    async def call(self, method: str, params: dict[str, Any], timeout: float) -> Any:
        if self._lost:
            raise ConnectionLost("the server closed the connection")
        request_id = next(self._ids)
        answered = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = answered
        try:
            await self._send(
                {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            )
            response = await asyncio.wait_for(answered, timeout)
        finally:
            self._waiting.pop(request_id, None)
        if "error" in response:
            raise RemoteError(response["error"])
        return response["result"]

    async def dispatch(self, channel: str, action: dict[str, Any]) -> None:
        if self._lost:
            raise ConnectionLost("the server closed the connection")
        params = {"channel": channel, "clientSeq": next(self._seq), "action": action}
        await self._send({"jsonrpc": "2.0", "method": "dispatchAction", "params": params})

    async def _send(self, message: dict[str, Any]) -> None:
        await self._pace()
        try:
            await self.ws.send_json(message)
        except (ConnectionError, aiohttp.ClientError) as error:
            raise ConnectionLost(f"cannot send: {error}") from error

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()


class RemoteChat:
    """One chat on the server: a session of its own, subscribed to its default chat.

    Watches its channel's actions: which turns started, how often each ended,
    and what text streamed for each."""

    def __init__(self, connection: AhpConnection, index: int, channel: str, timeout: float) -> None:
        self.connection = connection
        self.index = index
        self.channel = channel
        self.timeout = timeout  # a turn's
        self._ends: dict[str, asyncio.Future[str]] = {}
        self.started: set[str] = set()
        self.terminals: Counter[str] = Counter()
        self.streamed: dict[str, list[str]] = {}
        self.problems: list[str] = []
        self.loaded: list[dict[str, Any]] = []  # chat/turnsLoaded, as they came
        connection.chats[channel] = self

    @classmethod
    async def open(
        cls, connection: AhpConnection, index: int, timeout: float, turn_timeout: float
    ) -> "RemoteChat":
        uri = f"ahp-session:/{uuid.uuid4()}"
        try:
            created = await connection.call("createSession", {"channel": uri}, timeout)
            channel = created["state"]["defaultChat"]
            chat = cls(connection, index, channel, turn_timeout)
            await connection.call("subscribe", {"channel": channel}, timeout)
        except (RemoteError, ConnectionLost, TimeoutError, KeyError, TypeError) as error:
            raise LoadError(f"chat {index} could not be set up: {error!r}") from error
        return chat

    async def turn(self, prompt: str) -> str:
        turn_id = uuid.uuid4().hex
        ended = asyncio.get_running_loop().create_future()
        self._ends[turn_id] = ended
        expiry = Deadlines.of(asyncio.get_running_loop()).add(ended, self.timeout)
        action = {"type": "chat/turnStarted", "turnId": turn_id, "message": {"text": prompt}}
        try:
            await self.connection.dispatch(self.channel, action)
            return await ended
        except ConnectionLost:
            return "lost"
        finally:
            expiry.discard(ended)
            self._ends.pop(turn_id, None)

    def on_action(self, params: dict[str, Any]) -> None:
        action = params.get("action") or {}
        kind = action.get("type")
        if kind == "chat/turnsLoaded":  # to this connection alone, ahead of fetchTurns' answer
            self.loaded.append(action)
            return
        turn_id = action.get("turnId")
        if not isinstance(turn_id, str):
            return
        if params.get("rejectionReason") is not None:
            if kind == "chat/turnStarted":
                self._end(turn_id, "rejected")
            return
        if kind == "chat/turnStarted":
            self.started.add(turn_id)
            self.streamed[turn_id] = []
        elif kind == "chat/responsePart":
            part = action.get("part") or {}
            if part.get("kind") == "markdown" and turn_id in self.streamed:
                self.streamed[turn_id].append(str(part.get("content", "")))
        elif kind == "chat/delta":
            if turn_id in self.streamed:
                self.streamed[turn_id].append(str(action.get("content", "")))
        elif kind in TERMINAL_ACTIONS:
            self.terminals[turn_id] += 1
            if turn_id not in self.started:
                self.problems.append(f"{kind} for turn {turn_id}, which never started")
            self._end(turn_id, TERMINAL_ACTIONS[kind])

    def _end(self, turn_id: str, outcome: str) -> None:
        ended = self._ends.get(turn_id)
        if ended is not None and not ended.done():
            ended.set_result(outcome)

    def connection_lost(self) -> None:
        for ended in self._ends.values():
            if not ended.done():
                ended.set_exception(ConnectionLost())

    async def collect(self, record: ChatRecord, timeout: float) -> None:
        """Read the chat back: its stored turns and its state now; judge the stream."""
        turns: list[dict[str, Any]] = []
        params: dict[str, Any] = {"channel": self.channel, "limit": PAGE}
        while True:  # AHP 1.1: each page arrives as chat/turnsLoaded, newest page first
            self.loaded.clear()
            answer = await self.connection.call("fetchTurns", params, timeout)
            if isinstance(answer, dict) and "turns" in answer:  # a server of before 1.1:
                turns.extend(answer["turns"])  # the page in the answer, oldest first
                cursor = answer.get("nextCursor")
            elif self.loaded:
                page = self.loaded[-1]
                turns[:0] = page.get("turns") or []
                cursor = page.get("turnsNextCursor")
            else:
                raise LoadError(f"chat {self.index}: fetchTurns sent no chat/turnsLoaded")
            if cursor is None:
                break
            params = {"channel": self.channel, "cursor": cursor, "limit": PAGE}
        record.stored = [_stored(turn) for turn in turns]
        snapshot = await self.connection.call("subscribe", {"channel": self.channel}, timeout)
        state = snapshot["snapshot"]["state"]
        record.active = state.get("activeTurn") is not None
        record.pending = sum(
            len(state.get(key) or []) for key in ("steeringMessages", "queuedMessages")
        )
        record.wire = list(self.problems)
        for turn_id in sorted(self.started):
            ends = self.terminals[turn_id]
            if ends != 1:
                record.wire.append(f"turn {turn_id} got {ends} terminal actions")
        replies = {t["id"]: text for t in turns if (text := _stored(t)[1]) is not None}
        for turn_id, parts in self.streamed.items():
            if self.terminals[turn_id] and replies.get(turn_id, "") != "".join(parts):
                record.wire.append(f"turn {turn_id}: the streamed reply differs from the stored")


def _stored(turn: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """A fetched turn as (user text, assistant text, state), as the store keeps it."""
    message = turn.get("message") or {}
    parts = [
        str(p.get("content", ""))
        for p in turn.get("responseParts") or []
        if p.get("kind") == "markdown"
    ]
    return str(message.get("text", "")), "".join(parts) if parts else None, turn.get("state")


async def load_remote(
    config: LoadConfig, progress: Callable[[], None] = lambda: None
) -> LoadReport:
    """The remote run against `config.url` with `config.token`, on the running loop.

    Raises:
        LoadError: the server cannot be reached, or a chat cannot be set up.
    """
    records = [ChatRecord(index=i) for i in range(config.chats)]
    latencies: list[float] = []
    count = config.connection_count()
    # Each WebSocket holds its HTTP connection for good: no pool limit (aiohttp's is 100).
    unlimited = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=unlimited) as http:
        connections: list[AhpConnection] = []
        try:
            for number in range(count):
                connections.append(await AhpConnection.open(http, config, number))
            chats = await asyncio.gather(
                *(
                    RemoteChat.open(
                        connections[i % count], i, config.turn_timeout_s, config.turn_timeout_s
                    )
                    for i in range(config.chats)
                )
            )
            started = time.perf_counter()
            pairs = list(zip(chats, records, strict=True))
            await asyncio.gather(*(run_chat(c, r, config, latencies, progress) for c, r in pairs))
            seconds = time.perf_counter() - started
            try:
                await asyncio.gather(*(c.collect(r, config.turn_timeout_s) for c, r in pairs))
            except (RemoteError, ConnectionLost, TimeoutError) as error:
                raise LoadError(f"cannot read the chats back: {error!r}") from error
        except RemoteError as error:
            raise LoadError(str(error)) from error
        finally:
            for connection in connections:
                await connection.close()
    return build_report(
        config,
        "remote",
        records,
        latencies,
        seconds,
        connections=count,
        frames_received=sum(c.frames for c in connections),
    )
