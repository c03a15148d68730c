"""A stand-in chat-completions endpoint on loopback (aiohttp, its own thread).

It speaks the wire protocol the `openai` package reads: `POST
/v1/chat/completions` with `stream: true` answers server-sent events, one
`data: {chunk}` per piece of text, a chunk carrying the finish reason, a
usage chunk (empty choices) when the request asked for it with
`stream_options.include_usage`, then `data: [DONE]`. It records every request
body and its Authorization header, and plays `Reply` scripts in request order
(unscripted requests are answered `echo: <last user text>`).
"""

import asyncio
import json
import threading
from typing import Any, Literal

import attrs
from aiohttp import web


@attrs.frozen(kw_only=True)
class Reply:
    """How the stand-in answers one request.

    `chunks`: the streamed text pieces (None: `echo: <last user text>` in two).
    `finish_reason`: sent on a last chunk; None sends none at all.
    `usage`: (prompt, completion) tokens; None counts words.
    `fail_after`: fail after this many chunks, by an error event or by
    dropping the connection (`failure`). `hold_after`: stop after this many
    chunks until released, the client goes away, or the stand-in stops.
    `status`: answer this HTTP status with an error body instead of a stream.
    """

    chunks: tuple[str, ...] | None = None
    finish_reason: str | None = "stop"
    usage: tuple[int, int] | None = None
    fail_after: int | None = None
    failure: Literal["event", "disconnect"] = "event"
    error_message: str = "the model server fell over"
    hold_after: int | None = None
    status: int = 200


@attrs.frozen(kw_only=True)
class Request:
    body: dict[str, Any]
    authorization: str

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.body["messages"]
        return messages


class StandIn:
    """Start with `StandIn.start()`; `url` is the API root for `base_url`."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._replies: list[Reply] = []
        self._requests: list[Request] = []
        self._held = 0
        self._dropped = 0  # streams the client closed while held
        self._loop = asyncio.new_event_loop()
        self._stopping: asyncio.Event | None = None
        self._released: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.url = ""

    @classmethod
    def start(cls) -> "StandIn":
        standin = cls()
        standin._thread.start()
        port = asyncio.run_coroutine_threadsafe(standin._serve(), standin._loop).result(10)
        standin.url = f"http://127.0.0.1:{port}/v1"
        return standin

    async def _serve(self) -> int:
        self._stopping = asyncio.Event()
        self._released = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        # A client that goes away cancels its handler, as a real server notices.
        self._runner = web.AppRunner(app, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        address = self._runner.addresses[0]
        return int(address[1])

    def stop(self) -> None:
        async def close() -> None:
            assert self._stopping is not None and self._runner is not None
            self._stopping.set()
            await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    # -- scripting and records (any thread) ---------------------------------------------
    def release(self) -> None:
        """Let held streams go on, now and later."""
        assert self._released is not None
        self._loop.call_soon_threadsafe(self._released.set)

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with these, in order."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    def wait_held(self, count: int = 1, timeout: float = 10.0) -> None:
        """Return once `count` streams in all have been held.

        Raises:
            TimeoutError: fewer within `timeout`.
        """
        with self._lock:
            if not self._lock.wait_for(lambda: self._held >= count, timeout):
                raise TimeoutError(f"{self._held} of {count} held streams within {timeout} s")

    def wait_dropped(self, count: int = 1, timeout: float = 10.0) -> None:
        """Return once the client closed `count` held streams in all.

        Raises:
            TimeoutError: fewer within `timeout`.
        """
        with self._lock:
            if not self._lock.wait_for(lambda: self._dropped >= count, timeout):
                raise TimeoutError(f"{self._dropped} of {count} dropped streams in {timeout} s")

    # -- the server (its loop) -------------------------------------------------------------
    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        with self._lock:
            self._requests.append(
                Request(body=body, authorization=request.headers.get("Authorization", ""))
            )
            reply = self._replies.pop(0) if self._replies else Reply()
        if reply.status != 200:
            error = {"message": reply.error_message, "type": "server_error", "code": None}
            return web.json_response({"error": error}, status=reply.status)
        chunks = reply.chunks
        if chunks is None:
            text = f"echo: {body['messages'][-1]['content']}"
            middle = len(text) // 2
            chunks = (text[:middle], text[middle:])
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        model = body.get("model", "")

        async def event(data: dict[str, Any] | str) -> None:
            payload = data if isinstance(data, str) else json.dumps(data)
            await response.write(f"data: {payload}\n\n".encode())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": "chatcmpl-standin",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        for index, piece in enumerate(chunks):
            if reply.fail_after == index:
                return await self._fail(request, response, reply, event)
            if reply.hold_after == index:
                await self._hold()
            delta = {"role": "assistant", "content": piece} if index == 0 else {"content": piece}
            await event(chunk(delta))
        if reply.fail_after is not None and reply.fail_after >= len(chunks):
            return await self._fail(request, response, reply, event)
        if reply.hold_after is not None and reply.hold_after >= len(chunks):
            await self._hold()
        if reply.finish_reason is not None:
            await event(chunk({}, reply.finish_reason))
        if body.get("stream_options", {}).get("include_usage"):
            prompt, completion = reply.usage or (
                sum(len(str(m["content"]).split()) for m in body["messages"]),
                len("".join(chunks).split()),
            )
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
            await event({**chunk({}), "choices": [], "usage": usage})
        await event("[DONE]")
        await response.write_eof()
        return response

    async def _fail(
        self, request: web.Request, response: web.StreamResponse, reply: Reply, event: Any
    ) -> web.StreamResponse:
        if reply.failure == "event":
            await event({"error": {"message": reply.error_message, "type": "server_error"}})
            await response.write_eof()
        else:
            assert request.transport is not None
            request.transport.abort()  # the connection drops mid-body
        return response

    async def _hold(self) -> None:
        assert self._stopping is not None and self._released is not None
        with self._lock:
            self._held += 1
            self._lock.notify_all()
        waits = [asyncio.ensure_future(e.wait()) for e in (self._stopping, self._released)]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            with self._lock:
                self._dropped += 1
                self._lock.notify_all()
            raise
        finally:
            for wait in waits:
                wait.cancel()
