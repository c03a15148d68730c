"""The OpenAI-compatible provider: streamed chat completions from any base URL.

`OpenAICompatProvider` speaks the chat-completions API through the official
`openai` package (the optional extra `agenthost[openai]`): OpenAI itself,
GitHub Models, Azure OpenAI, or a local server (vLLM, Ollama, LM Studio).
Such a backend is stateless, so the capabilities say so: the host sends the
whole history with every turn (`stateful_prompt` False), the send call ends
with the turn (`call_settles_with_turn`), and nothing reaches a running
completion (`accepts_steering` and `can_withdraw_steering` False): the host
holds steering and sends it as the next turn.

One turn is one streamed request: system instructions (when there are any),
then the history the host built (strictly alternating user and assistant
messages), then the turn's text. The adapter reports UserMessageEcho once the
endpoint accepted the request, a ReplyDelta per streamed chunk, UsageUpdated
from the stream's usage report, and at the end of the stream one
ReplyMessage with the whole text and the finish reason (None when the
stream gave none: the final message is flushed either way, design rule 3 in
docs/design-rules.md), then Idle. A request the endpoint never accepted (refused connection, error
status) fails the send before anything streamed; a stream that breaks
mid-way fails it with the provider's own error text, the turn taken.

Runs on the provider kind's loop thread. The API key is read from the
environment once, when the provider is built, and never logged; prompt text
is never logged either (only counts and sizes).
"""

import asyncio
import os
from typing import TYPE_CHECKING, Any

import structlog

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.provider import (
    Capabilities,
    Idle,
    ProviderCancel,
    ProviderResume,
    ProviderSend,
    ReplyDelta,
    ReplyMessage,
    UsageUpdated,
    UserMessageEcho,
)
from agenthost.providers.base import Emit, Provider, ProviderAdapter, ProviderCallError

if TYPE_CHECKING:
    import types

    from openai import APIStatusError, AsyncOpenAI

log = structlog.get_logger(__name__)

CAPABILITIES = Capabilities(
    call_settles_with_turn=True,
    can_withdraw_steering=False,
    stateful_prompt=False,
    accepts_steering=False,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_TIMEOUT_S = 60.0
NO_KEY = "no-key"  # sent where the endpoint needs none (api_key_env=None), as local servers accept


class OpenAICompatProvider(Provider):
    """A chat-completions endpoint. Built on any thread; its adapters run on its loop.

    Args:
        base_url: the endpoint's API root (the part before `/chat/completions`).
        api_key_env: the environment variable holding the API key; None for an
            endpoint that needs no key (a local server).
        model: the model name sent with every request.
        temperature: sent when given.
        max_output_tokens: sent as `max_tokens` when given.
        timeout_s: every request's timeout: connecting, and each wait for the
            next streamed chunk.
        max_retries: the `openai` client's retries of a request that did not
            start (connection errors, 429 and 5xx answers); never mid-stream.
        name: how errors name this provider (the manifest passes its entry name).

    Raises:
        AgentHostError: INVALID_ARGUMENT when `api_key_env` is not set.
    """

    capabilities = CAPABILITIES

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key_env: str | None = "OPENAI_API_KEY",
        model: str,
        temperature: float | None = None,
        max_output_tokens: int | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_retries: int = 2,
        name: str = "openai",
    ) -> None:
        self.name = name
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.model = model
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._openai = _import_openai(name)  # here, not on the provider loop: it is slow
        if api_key_env is None:
            self._api_key = NO_KEY
        else:
            key = os.environ.get(api_key_env, "")
            if not key:
                raise AgentHostError(
                    code=ErrorCode.INVALID_ARGUMENT,
                    message=(
                        f"provider {name!r}: the environment variable {api_key_env} "
                        "that should hold its API key is not set"
                    ),
                )
            self._api_key = key

    def __repr__(self) -> str:
        return (
            f"OpenAICompatProvider(name={self.name!r}, base_url={self.base_url!r},"
            f" model={self.model!r})"
        )

    def open_session(self, session_id: str, chat_id: str, emit: Emit) -> "OpenAICompatAdapter":
        return OpenAICompatAdapter(self, session_id, chat_id, emit)

    def _client(self) -> "AsyncOpenAI":
        """A client for the running loop (one per adapter: its connections live on that loop)."""
        return self._openai.AsyncOpenAI(
            api_key=self._api_key,
            base_url=self.base_url,
            timeout=self.timeout_s,
            max_retries=self.max_retries,
        )

    def _scrub(self, text: str) -> str:
        """The error text, without the key should an endpoint echo it."""
        if self._api_key and self._api_key != NO_KEY:
            text = text.replace(self._api_key, "***")
        return text


class OpenAICompatAdapter(ProviderAdapter):
    """One chat's provider session: a client and at most one running stream."""

    capabilities = CAPABILITIES

    def __init__(
        self, backend: OpenAICompatProvider, session_id: str, chat_id: str, emit: Emit
    ) -> None:
        self.backend = backend
        self.session_id = session_id
        self.chat_id = chat_id
        self._emit = emit
        self._client: AsyncOpenAI | None = None
        self._task: asyncio.Task[None] | None = None
        self._task_turn: str | None = None
        self._log = log.bind(session_id=session_id, chat_id=chat_id, provider=backend.name)

    async def start(self) -> None:
        self._client = self.backend._client()

    async def resume(self, message: ProviderResume) -> None:
        """Nothing to resume: the host sends the whole history with every turn."""
        self._client = self.backend._client()

    async def send(self, message: ProviderSend) -> str | None:
        """Stream one completion; returns once the stream ended (or was cancelled).

        Raises:
            ProviderCallError: `taken` False when the endpoint never accepted the
                request; True when the stream failed after it did.
        """
        task = asyncio.get_running_loop().create_task(self._stream(message))
        self._task, self._task_turn = task, message.turn_id
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            task.cancel()  # the send itself was cancelled (the loop stops): so is its stream
            raise
        finally:
            if self._task is task:
                self._task, self._task_turn = None, None
        if task.cancelled():
            return None  # the host cancelled the turn; it has already ended it
        task.result()  # re-raises the stream's failure
        return None

    async def _stream(self, message: ProviderSend) -> None:
        turn_id = message.turn_id
        turn_log = self._log.bind(turn_id=turn_id)
        messages = _request_messages(message)
        request: dict[str, Any] = {
            "model": message.model or self.backend.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.backend.temperature is not None:
            request["temperature"] = self.backend.temperature
        if self.backend.max_output_tokens is not None:
            request["max_tokens"] = self.backend.max_output_tokens
        if self._client is None:
            self._client = self.backend._client()
        turn_log.info(
            "completion_requested",
            messages=len(messages),
            prompt_chars=sum(len(m["content"]) for m in messages),
        )
        openai = self.backend._openai
        try:
            stream = await self._client.chat.completions.create(**request)
        except openai.APIConnectionError as exc:  # includes timeouts: it never started
            reason = _root_cause(exc)
            turn_log.warning("completion_unreachable", base_url=self.backend.base_url, error=reason)
            raise self._error(
                f"could not reach {self.backend.base_url}: {reason}", taken=False
            ) from exc
        except openai.APIStatusError as exc:
            # The endpoint read the turn and refused it: the turn keeps its words.
            raise self._error(_status_text(exc), taken=True) from exc
        self._emit(UserMessageEcho(turn_id=turn_id, text=message.text))
        said: list[str] = []
        finish: str | None = None
        try:
            async with stream:
                async for chunk in stream:
                    if chunk.usage is not None:
                        self._emit(
                            UsageUpdated(
                                turn_id=turn_id,
                                prompt_tokens=chunk.usage.prompt_tokens,
                                completion_tokens=chunk.usage.completion_tokens,
                            )
                        )
                    if not chunk.choices:
                        continue
                    choice = chunk.choices[0]
                    text = choice.delta.content if choice.delta is not None else None
                    if text:
                        said.append(text)
                        self._emit(ReplyDelta(turn_id=turn_id, text=text))
                    if choice.finish_reason is not None:
                        finish = choice.finish_reason
        except openai.OpenAIError as exc:
            turn_log.warning(
                "completion_stream_failed",
                reply_chars=sum(map(len, said)),
                error_type=type(exc).__name__,
            )
            raise self._error(str(exc), taken=True) from exc
        full = "".join(said)
        turn_log.info("completion_streamed", reply_chars=len(full), finish_reason=finish)
        # The stream's end flushes the final message, with or without a finish reason.
        self._emit(ReplyMessage(turn_id=turn_id, text=full, finish_reason=finish))
        self._emit(Idle(turn_id=turn_id))

    def _error(self, text: str, *, taken: bool) -> ProviderCallError:
        scrubbed = self.backend._scrub(text)
        error = AgentHostError(
            code=ErrorCode.PROVIDER_ERROR, message=f"{self.backend.name}: {scrubbed}"
        )
        return ProviderCallError(error, taken=taken)

    async def cancel(self, message: ProviderCancel) -> None:
        """Cancel the stream of `message.turn_id`, if it still runs."""
        task = self._task
        if task is not None and self._task_turn == message.turn_id and not task.done():
            task.cancel()

    async def dispose(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def turn_diagnostic_snapshot(self, turn_id: str) -> dict[str, Any]:
        task = self._task
        return {
            "streaming": task is not None and self._task_turn == turn_id and not task.done(),
            "model": self.backend.model,
        }


def _request_messages(message: ProviderSend) -> list[dict[str, str]]:
    """System instructions when non-empty, the host's history, then the turn's text."""
    messages: list[dict[str, str]] = []
    if message.instructions:
        messages.append({"role": "system", "content": message.instructions})
    messages.extend({"role": m.role, "content": m.text} for m in message.history)
    messages.append({"role": "user", "content": message.text})
    return messages


def _import_openai(name: str) -> "types.ModuleType":
    """The `openai` package.

    Raises:
        AgentHostError: INVALID_ARGUMENT naming the provider and the extra to install.
    """
    try:
        import openai
    except ImportError:
        raise AgentHostError(
            code=ErrorCode.INVALID_ARGUMENT,
            message=(
                f"provider {name!r} needs the openai package: pip install 'agenthost[openai]'"
            ),
        ) from None
    return openai


def _root_cause(exc: BaseException) -> str:
    """Why a request never reached the endpoint, as the system said it: the
    innermost OS error ("connection refused"), else the innermost message
    (the client's own "Connection error." says nothing)."""
    causes = [exc]
    while (cause := causes[-1].__cause__ or causes[-1].__context__) is not None:
        if cause in causes:
            break
        causes.append(cause)
    for cause in reversed(causes):
        if isinstance(cause, OSError) and cause.errno is not None:
            return os.strerror(cause.errno).lower()
    for cause in reversed(causes):
        if isinstance(cause, TimeoutError) or "timeout" in type(cause).__name__.lower():
            return "timed out"
    return str(causes[-1]) or type(causes[-1]).__name__


def _status_text(exc: "APIStatusError") -> str:
    """An error answer as a person reads it: the status and the endpoint's message."""
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return f"HTTP {exc.status_code}: {body['message']}"
    return str(exc)
