"""Fake model APIs for the real CLIs: the Anthropic Messages API and the OpenAI
Responses API, both streaming (SSE), written with aiohttp for these tests.

Each serves on 127.0.0.1 inside the loopback namespace (netns.py) and is
scripted by the text of the conversation's latest user message: a rule whose
trigger that text contains answers with its steps; anything else is answered
"echo: <text>". Steps: `Text` (a streamed delta), `Hold` (the stream stops
until the test releases the gate, so steering and cancel can happen while it
runs), `Tool` (the model calls a tool; the CLI runs it, asking permission when
it must, and sends the result back, which is answered `after`), `Fail` (the
API refuses the request with an HTTP error status and its own error body, as
the vendor's API does; a rule of it answers every request of that
conversation). Every request is kept (`requests`), so a test sees what
history the CLI sent.
"""

import asyncio
import itertools
import json
import re
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

import attrs
from aiohttp import web

from tests.integration.netns import LoopbackNamespace

WAIT_S = 60.0


@attrs.frozen
class Text:
    text: str


@attrs.frozen
class Hold:
    gate: str


@attrs.frozen
class Tool:
    name: str
    arguments: dict[str, Any]


@attrs.frozen
class Fail:
    """The API refuses: `status` with the vendor's error body saying `message`."""

    status: int
    message: str


Step = Text | Hold | Tool | Fail


@attrs.frozen
class Rule:
    trigger: str
    steps: tuple[Step, ...]
    after: str  # the answer once the tool's result came back


class Gate:
    """A point a stream stops at until the test opens it."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.opened: asyncio.Event | None = None  # made on the API's loop


class FakeAPI:
    """What both fakes share: the script, the gates, the recorded requests."""

    kind = ""

    def __init__(self, netns: LoopbackNamespace) -> None:
        self._netns = netns
        self._rules: list[Rule] = []
        self._gates: dict[str, Gate] = {}
        self.requests: list[dict[str, Any]] = []
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._ids = itertools.count(1)

    # -- the test's side ------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def on(self, trigger: str, *steps: Step, after: str = "tool done") -> "FakeAPI":
        self._rules.insert(0, Rule(trigger, steps, after))
        return self

    def reset(self) -> None:
        self._rules.clear()
        self.requests.clear()
        for name in list(self._gates):
            self.open(name)
        self._gates.clear()

    def wait_reached(self, gate: str, timeout: float = WAIT_S) -> None:
        if not self._gate(gate).reached.wait(timeout):
            raise TimeoutError(f"the {self.kind} stream never reached gate {gate!r}")

    def open(self, gate: str) -> None:
        found = self._gate(gate)

        def set_it() -> None:
            if found.opened is None:
                found.opened = asyncio.Event()
            found.opened.set()

        self._netns.call_soon(set_it)

    def user_texts(self) -> list[list[str]]:
        """Per model request: every user text the conversation carried, in order."""
        return [self._user_texts(body) for body in self.requests]

    def start(self) -> "FakeAPI":
        self._netns.serve_in(self._start())
        return self

    def stop(self) -> None:
        if self._runner is not None:
            self._netns.serve_in(self._runner.cleanup())

    # -- the API's loop -------------------------------------------------------------------
    async def _start(self) -> None:
        app = web.Application()
        self.routes(app)
        app.router.add_route("*", "/{tail:.*}", self._unknown)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def _unknown(self, request: web.Request) -> web.Response:
        error = {"error": {"message": f"no such route {request.path}"}}
        return web.json_response(error, status=404)

    @staticmethod
    async def _sse(request: web.Request, chunks: AsyncIterator[bytes]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        async for chunk in chunks:
            await response.write(chunk)
        await response.write_eof()
        return response

    def _gate(self, name: str) -> Gate:
        return self._gates.setdefault(name, Gate())

    async def _hold(self, name: str) -> None:
        gate = self._gate(name)
        if gate.opened is None:
            gate.opened = asyncio.Event()
        gate.reached.set()
        await asyncio.wait_for(gate.opened.wait(), WAIT_S)

    def _plan(self, body: dict[str, Any]) -> tuple[Step, ...]:
        """The steps that answer this request."""
        if self.answers_a_tool(body):
            text = self._latest_text(body)
            for rule in self._rules:
                if rule.trigger in text:
                    return (Text(rule.after),)
            return (Text("tool done"),)
        text = self._latest_text(body)
        for rule in self._rules:
            if rule.trigger in text:
                return rule.steps
        return (Text("echo: "), Text(text))

    def _latest_text(self, body: dict[str, Any]) -> str:
        texts = self._user_texts(body)
        return texts[-1] if texts else ""

    def _user_texts(self, body: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def answers_a_tool(self, body: dict[str, Any]) -> bool:
        raise NotImplementedError

    def has_tool_result(self, body: dict[str, Any]) -> bool:
        """Whether the conversation of a request carries a tool's result."""
        dumped = json.dumps(body)
        return '"tool_result"' in dumped or '"function_call_output"' in dumped

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids)}_{uuid.uuid4().hex[:8]}"


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _refusal(steps: tuple[Step, ...]) -> Fail | None:
    """The Fail a rule answers with, if it does (it answers the whole request)."""
    return next((step for step in steps if isinstance(step, Fail)), None)


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


_CONTEXT = re.compile(r"<([a-z_-]+)>.*?</\1>", re.DOTALL)  # a CLI's <tag>...</tag> blocks


def _said(text: str) -> str:
    """What a person wrote in a user text, without the context blocks a CLI wraps
    around it or sends beside it (<system-reminder>, <current_datetime>, ...)."""
    return _CONTEXT.sub("", text).strip()


class AnthropicAPI(FakeAPI):
    """POST /v1/messages (streaming or not) and /v1/messages/count_tokens."""

    kind = "anthropic"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count)

    async def _count(self, request: web.Request) -> web.Response:
        return web.json_response({"input_tokens": 10})

    def _user_texts(self, body: dict[str, Any]) -> list[str]:
        return [said for text in self._texts(body, "user") if (said := _said(text))]

    def assistant_texts(self, body: dict[str, Any]) -> list[str]:
        return self._texts(body, "assistant")

    @staticmethod
    def _texts(body: dict[str, Any], role: str) -> list[str]:
        texts = []
        for message in body.get("messages", []):
            if message.get("role") != role:
                continue
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            texts.extend(b.get("text", "") for b in blocks or [] if b.get("type") == "text")
        return texts

    def answers_a_tool(self, body: dict[str, Any]) -> bool:
        messages = body.get("messages") or [{}]
        content = messages[-1].get("content")
        if not isinstance(content, list):
            return False
        kinds = [b.get("type") for b in content]
        texts = [_said(b.get("text", "")) for b in content if b.get("type") == "text"]
        return "tool_result" in kinds and not any(texts)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not body.get("tools") and not body.get("stream"):
            # a CLI's side request (a title, a summary): answered, not recorded
            return web.json_response(self._whole(body, "A title"))
        self.requests.append(body)
        steps = self._plan(body)
        refusal = _refusal(steps)
        if refusal is not None:
            error = {
                "type": _ERROR_TYPES.get(refusal.status, "api_error"),
                "message": refusal.message,
            }
            return web.json_response({"type": "error", "error": error}, status=refusal.status)
        if not body.get("stream"):
            said = "".join(s.text for s in steps if isinstance(s, Text))
            return web.json_response(self._whole(body, said))
        return await self._sse(request, self._stream(body, steps))

    def _whole(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        return {
            "id": self.new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-fake"),
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    async def _stream(self, body: dict[str, Any], steps: tuple[Step, ...]) -> AsyncIterator[bytes]:
        message = {
            "id": self.new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-fake"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }
        yield _sse("message_start", {"type": "message_start", "message": message})
        index, text_open, stop = 0, False, "end_turn"
        for step in steps:
            if isinstance(step, Text):
                if not text_open:
                    block = {"type": "text", "text": ""}
                    yield _sse(
                        "content_block_start",
                        {"type": "content_block_start", "index": index, "content_block": block},
                    )
                    text_open = True
                delta = {"type": "text_delta", "text": step.text}
                yield _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            elif isinstance(step, Hold):
                yield _sse("ping", {"type": "ping"})
                await self._hold(step.gate)
            elif isinstance(step, Tool):
                if text_open:
                    yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
                    index, text_open = index + 1, False
                block = {"type": "tool_use", "id": self.new_id("toolu"), "name": step.name}
                yield _sse(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {**block, "input": {}},
                    },
                )
                delta = {"type": "input_json_delta", "partial_json": json.dumps(step.arguments)}
                yield _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
                yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
                index, stop = index + 1, "tool_use"
        if text_open:
            yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
        yield _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
        yield _sse("message_stop", {"type": "message_stop"})


class ResponsesAPI(FakeAPI):
    """POST /v1/responses, streaming: the OpenAI Responses API as codex speaks it."""

    kind = "responses"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/responses", self._responses)

    def _user_texts(self, body: dict[str, Any]) -> list[str]:
        texts = []
        for item in body.get("input", []):
            if item.get("type", "message") != "message" or item.get("role") != "user":
                continue
            for part in item.get("content") or []:
                said = _said(part.get("text", "")) if part.get("type") == "input_text" else ""
                if said:
                    texts.append(said)
        return texts

    def assistant_texts(self, body: dict[str, Any]) -> list[str]:
        texts = []
        for item in body.get("input", []):
            if item.get("type", "message") != "message" or item.get("role") != "assistant":
                continue
            texts.extend(p.get("text", "") for p in item.get("content") or [])
        return texts

    def answers_a_tool(self, body: dict[str, Any]) -> bool:
        items = body.get("input") or [{}]
        return items[-1].get("type") in ("function_call_output", "custom_tool_call_output")

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        steps = self._plan(body)
        refusal = _refusal(steps)
        if refusal is not None:
            error = {
                "message": refusal.message,
                "type": _ERROR_TYPES.get(refusal.status, "api_error"),
                "param": None,
                "code": None,
            }
            return web.json_response({"error": error}, status=refusal.status)
        return await self._sse(request, self._stream(body, steps))

    async def _stream(self, body: dict[str, Any], steps: tuple[Step, ...]) -> AsyncIterator[bytes]:
        response_id = self.new_id("resp")
        shell = {"id": response_id, "object": "response", "status": "in_progress", "output": []}
        yield _sse("response.created", {"type": "response.created", "response": shell})
        output: list[dict[str, Any]] = []
        said: list[str] = []
        message_id: str | None = None

        def close_message() -> list[bytes]:
            nonlocal message_id
            if message_id is None:
                return []
            text = "".join(said)
            part = {"type": "output_text", "text": text, "annotations": []}
            item = {
                "type": "message",
                "id": message_id,
                "role": "assistant",
                "status": "completed",
                "content": [part],
            }
            index = len(output)
            output.append(item)
            message_id = None
            said.clear()
            return [
                _sse(
                    "response.output_text.done",
                    {
                        "type": "response.output_text.done",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "text": text,
                    },
                ),
                _sse(
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": index, "item": item},
                ),
            ]

        for step in steps:
            if isinstance(step, Text):
                if message_id is None:
                    message_id = self.new_id("msg")
                    item = {
                        "type": "message",
                        "id": message_id,
                        "role": "assistant",
                        "status": "in_progress",
                        "content": [],
                    }
                    yield _sse(
                        "response.output_item.added",
                        {
                            "type": "response.output_item.added",
                            "output_index": len(output),
                            "item": item,
                        },
                    )
                said.append(step.text)
                yield _sse(
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": message_id,
                        "output_index": len(output),
                        "content_index": 0,
                        "delta": step.text,
                    },
                )
            elif isinstance(step, Hold):
                await self._hold(step.gate)
            elif isinstance(step, Tool):
                for chunk in close_message():
                    yield chunk
                call = {
                    "type": "function_call",
                    "id": self.new_id("fc"),
                    "call_id": self.new_id("call"),
                    "name": step.name,
                    "arguments": json.dumps(step.arguments),
                    "status": "completed",
                }
                index = len(output)
                output.append(call)
                yield _sse(
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": index, "item": call},
                )
                yield _sse(
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": index, "item": call},
                )
        for chunk in close_message():
            yield chunk
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        done = {**shell, "status": "completed", "output": output, "usage": usage}
        yield _sse("response.completed", {"type": "response.completed", "response": done})
