"""A raw AHP client for tests: JSON-RPC frames over a real WebSocket."""

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp

from agenthost.actors import Host
from agenthost.server.ahp import Limits
from agenthost.server.serve import ServeConfig, serve

TOKEN = "t" * 32
OTHER_TOKEN = "o" * 32
TOKENS = {TOKEN: "alice", OTHER_TOKEN: "bob"}
WAIT_S = 10.0


class RpcFailed(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.error = error
        self.code = error.get("code")


class Received(dict[str, Any]):
    """A notification as parsed, with its frame's `text` as it arrived and its
    place in the order of everything received (cleared with the notifications)."""

    text: str = ""
    order: int = 0


class AhpClient:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self._ids = itertools.count(1)
        self._seq = itertools.count(1)
        self.notifications: list[dict[str, Any]] = []
        self._received = itertools.count()
        self.answered_at = -1  # the place of the latest response among what was received
        self._responses: dict[Any, dict[str, Any]] = {}
        self._arrived = asyncio.Condition()
        self._reader = asyncio.get_running_loop().create_task(self._read())
        self.closed = asyncio.Event()

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                if frame.type is not aiohttp.WSMsgType.TEXT:
                    continue
                message = json.loads(frame.data)
                order = next(self._received)
                async with self._arrived:
                    if "id" in message and "method" not in message:
                        self._responses[message["id"]] = message
                        self.answered_at = order
                    else:
                        received = Received(message)
                        received.text, received.order = frame.data, order
                        self.notifications.append(received)
                    self._arrived.notify_all()
        finally:
            self.closed.set()
            async with self._arrived:
                self._arrived.notify_all()

    async def send_raw(self, text: str) -> None:
        await self.ws.send_str(text)

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        request_id = next(self._ids)
        await self.ws.send_json(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
        )
        response = await self.response(request_id)
        if "error" in response:
            raise RpcFailed(response["error"])
        return response["result"]

    async def response(self, request_id: Any) -> dict[str, Any]:
        async def arrived() -> dict[str, Any]:
            async with self._arrived:
                await self._arrived.wait_for(
                    lambda: request_id in self._responses or self.closed.is_set()
                )
                return self._responses.pop(request_id)

        return await asyncio.wait_for(arrived(), WAIT_S)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.ws.send_json({"jsonrpc": "2.0", "method": method, "params": params})

    async def dispatch(self, channel: str, action: dict[str, Any]) -> int:
        client_seq = next(self._seq)
        await self.notify(
            "dispatchAction", {"channel": channel, "clientSeq": client_seq, "action": action}
        )
        return client_seq

    async def wait_for(self, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first notification (seen or to come) that matches."""

        async def found() -> dict[str, Any]:
            async with self._arrived:
                await self._arrived.wait_for(lambda: any(map(match, self.notifications)))
                return next(n for n in self.notifications if match(n))

        return await asyncio.wait_for(found(), WAIT_S)

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Wait until `condition` (over what has arrived) holds."""

        async def holds() -> None:
            async with self._arrived:
                await self._arrived.wait_for(condition)

        await asyncio.wait_for(holds(), WAIT_S)

    def actions(self, channel: str | None = None) -> list[dict[str, Any]]:
        return [
            n["params"]
            for n in self.notifications
            if n.get("method") == "action" and channel in (None, n["params"]["channel"])
        ]

    async def initialize(self, client_id: str = "c1", **extra: Any) -> Any:
        return await self.call(
            "initialize",
            {
                "channel": "ahp-root://",
                "protocolVersions": ["1.1.0"],
                "clientId": client_id,
                **extra,
            },
        )


def action_of(kind: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    def match(n: dict[str, Any]) -> bool:
        if n.get("method") != "action":
            return False
        action = n["params"]["action"]
        return action.get("type") == kind and all(action.get(k) == v for k, v in fields.items())

    return match


class Server:
    def __init__(
        self,
        url: str,
        session: aiohttp.ClientSession,
        stopping: asyncio.Event | None = None,
        task: "asyncio.Task[None] | None" = None,
    ) -> None:
        self.url = url
        self.http = session
        self._stopping = stopping
        self._task = task

    async def stop(self) -> None:
        """Stop the server as SIGTERM would, and wait until it has."""
        assert self._stopping is not None and self._task is not None
        self._stopping.set()
        await asyncio.wait_for(self._task, WAIT_S)

    @asynccontextmanager
    async def client(
        self, token: str | None = TOKEN, headers: dict[str, str] | None = None
    ) -> AsyncIterator[AhpClient]:
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        ws = await self.http.ws_connect(self.url.replace("http", "ws", 1) + "ahp", headers=sent)
        client = AhpClient(ws)
        try:
            yield client
        finally:
            await ws.close()
            client._reader.cancel()


@asynccontextmanager
async def running(host: Host, limits: Limits | None = None) -> AsyncIterator[Server]:
    stop = asyncio.Event()
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    config = ServeConfig(port=0, drain_s=5.0, limits=limits or Limits())
    task = asyncio.get_running_loop().create_task(
        serve(host, TOKENS, config, ready=ready.set_result, stop=stop)
    )
    url = await asyncio.wait_for(ready, WAIT_S)
    async with aiohttp.ClientSession() as http:
        try:
            yield Server(url, http, stop, task)
        finally:
            stop.set()
            await asyncio.wait_for(task, WAIT_S)
