"""Provider references: what an adapter reports it needs to resume a chat's
conversation is stored with the chat and handed back on resume, after a
restarted connection and after a restarted host, with no help from the user."""

import asyncio
from pathlib import Path

from agenthost.actors import Host
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.messages.provider import (
    ConnectionFailed,
    Idle,
    ProviderCancel,
    ProviderEvent,
    ProviderRefReported,
    ProviderResume,
    ProviderSend,
    ReplyMessage,
    UserMessageEcho,
)
from agenthost.providers.base import Emit, Provider, ProviderAdapter
from agenthost.providers.scripted import SHAPES
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock

WAIT_S = 10.0


class _Remembering(ProviderAdapter):
    """Reports a reference when it opens, and a new one when a send says "move"
    (as a CLI that moves its conversation to a new id would)."""

    capabilities = SHAPES["copilot"]

    def __init__(self, provider: "_RefProvider", emit: Emit) -> None:
        self._provider = provider
        self._emit = emit

    async def start(self) -> None:
        self._emit(ProviderRefReported(provider_ref=f"ref-{len(self._provider.opened)}"))
        self._provider.opened.append(("start", None))

    async def resume(self, message: ProviderResume) -> None:
        self._provider.opened.append(("resume", message.provider_ref))

    async def send(self, message: ProviderSend) -> str | None:
        if message.text == "move":
            self._emit(ProviderRefReported(provider_ref="moved"))
        if message.text == "crash":
            error = AgentHostError(code=ErrorCode.PROVIDER_CRASHED, message="the CLI died")
            self._emit(ConnectionFailed(error=error))
            return None
        self._emit(UserMessageEcho(turn_id=message.turn_id, text=message.text))
        self._emit(ReplyMessage(turn_id=message.turn_id, text="ok", finish_reason="stop"))
        await asyncio.sleep(0)
        self._emit(Idle(turn_id=message.turn_id))
        return None

    async def cancel(self, message: ProviderCancel) -> None:
        return None


class _RefProvider(Provider):
    capabilities = SHAPES["copilot"]

    def __init__(self) -> None:
        self.opened: list[tuple[str, str | None]] = []  # per adapter: how, with what ref

    def open_session(self, session_id: str, chat_id: str, emit: Emit) -> ProviderAdapter:
        return _Remembering(self, emit)


def _start(db_path: Path, provider: _RefProvider) -> Host:
    return Host.start(
        store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
    )


def _one_turn_then_reopened(db_path: Path, first: _RefProvider, text: str) -> _RefProvider:
    """A turn on `first`, a restart, a turn on a provider with no memory of the
    first: that provider, to see how its adapter was opened."""
    host = _start(db_path, first)
    session = host.create_session()
    assert session.chat().send(text).result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    host.stop()
    again = _RefProvider()
    host = _start(db_path, again)
    try:
        chat = host.open_session(session.id).chat()
        assert chat.send("again").result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    finally:
        host.stop()
    return again


def test_a_restarted_host_resumes_each_chat_with_the_reference_its_adapter_reported(
    db_path: Path,
) -> None:
    first = _RefProvider()
    again = _one_turn_then_reopened(db_path, first, "hello")
    assert first.opened == [("start", None)]
    assert again.opened == [("resume", "ref-0")]


def test_the_latest_reference_reported_is_the_one_resumed(db_path: Path) -> None:
    again = _one_turn_then_reopened(db_path, _RefProvider(), "move")
    assert again.opened == [("resume", "moved")]


def test_a_chat_whose_adapter_reported_nothing_resumes_with_no_reference(db_path: Path) -> None:
    class _Silent(_RefProvider):
        def open_session(self, session_id: str, chat_id: str, emit: Emit) -> ProviderAdapter:
            def unreported(event: ProviderEvent) -> None:
                if not isinstance(event, ProviderRefReported):
                    emit(event)

            return _Remembering(self, unreported)

    again = _one_turn_then_reopened(db_path, _Silent(), "hello")
    assert again.opened == [("resume", None)]


def test_a_restarted_connection_resumes_with_the_stored_reference(db_path: Path) -> None:
    provider = _RefProvider()
    host = _start(db_path, provider)
    try:
        chat = host.create_session().chat()
        assert chat.send("hello").result(timeout=WAIT_S).state is OutcomeState.COMPLETE
        assert chat.send("crash").result(timeout=WAIT_S).state is OutcomeState.ERROR
        assert chat.send("after").result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    finally:
        host.stop()
    assert provider.opened == [("start", None), ("resume", "ref-0")]
