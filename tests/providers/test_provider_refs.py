"""Provider references: what an adapter reports it needs to resume a chat's
conversation is stored with the chat and handed back on resume, after a
restarted connection, a restarted host and an export imported elsewhere, with
no help from the user. On every store (`store_factory`: SQLite and PostgreSQL)."""

import asyncio
import json
from pathlib import Path

import pytest

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
from agenthost.server import cli
from agenthost.testing import FakeClock
from tests.fakes.stores import StoreFactory

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


def _start(store_factory: StoreFactory, provider: _RefProvider) -> Host:
    return Host.start(store=store_factory(), providers={"scripted": provider}, clock=FakeClock())


def _one_turn_then_reopened(
    store_factory: StoreFactory, first: _RefProvider, text: str
) -> _RefProvider:
    """A turn on `first`, a restart, a turn on a provider with no memory of the
    first: that provider, to see how its adapter was opened."""
    host = _start(store_factory, first)
    session = host.create_session()
    assert session.chat().send(text).result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    host.stop()
    again = _RefProvider()
    host = _start(store_factory, again)
    try:
        chat = host.open_session(session.id).chat()
        assert chat.send("again").result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    finally:
        host.stop()
    return again


def test_a_restarted_host_resumes_each_chat_with_the_reference_its_adapter_reported(
    store_factory: StoreFactory,
) -> None:
    first = _RefProvider()
    again = _one_turn_then_reopened(store_factory, first, "hello")
    assert first.opened == [("start", None)]
    assert again.opened == [("resume", "ref-0")]


def test_the_latest_reference_reported_is_the_one_resumed(store_factory: StoreFactory) -> None:
    again = _one_turn_then_reopened(store_factory, _RefProvider(), "move")
    assert again.opened == [("resume", "moved")]


def test_a_chat_whose_adapter_reported_nothing_resumes_with_no_reference(
    store_factory: StoreFactory,
) -> None:
    class _Silent(_RefProvider):
        def open_session(self, session_id: str, chat_id: str, emit: Emit) -> ProviderAdapter:
            def unreported(event: ProviderEvent) -> None:
                if not isinstance(event, ProviderRefReported):
                    emit(event)

            return _Remembering(self, unreported)

    again = _one_turn_then_reopened(store_factory, _Silent(), "hello")
    assert again.opened == [("resume", None)]


def test_a_restarted_connection_resumes_with_the_stored_reference(
    store_factory: StoreFactory,
) -> None:
    provider = _RefProvider()
    host = _start(store_factory, provider)
    try:
        chat = host.create_session().chat()
        assert chat.send("hello").result(timeout=WAIT_S).state is OutcomeState.COMPLETE
        assert chat.send("crash").result(timeout=WAIT_S).state is OutcomeState.ERROR
        assert chat.send("after").result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    finally:
        host.stop()
    assert provider.opened == [("start", None), ("resume", "ref-0")]


def _exported(store_factory: StoreFactory, text: str = "hello") -> tuple[str, dict[str, object]]:
    """A session whose chat ran one turn (its adapter reported "ref-0", or "moved"),
    exported: its id and the export, as JSON would carry it."""
    host = _start(store_factory, _RefProvider())
    try:
        session = host.create_session()
        assert session.chat().send(text).result(timeout=WAIT_S).state is OutcomeState.COMPLETE
        return session.id, json.loads(json.dumps(host.export_session(session.id)))
    finally:
        host.stop()


def _reopened_in(store_factory: StoreFactory, session_id: str) -> _RefProvider:
    """The session opened in the store `store_factory` makes, one turn sent."""
    again = _RefProvider()
    host = _start(store_factory, again)
    try:
        chat = host.open_session(session_id).chat()
        assert chat.send("again").result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    finally:
        host.stop()
    return again


@pytest.fixture
def other_store(tmp_path: Path) -> StoreFactory:
    """A second store (SQLite) to import into."""
    return StoreFactory(kind="sqlite", spec=str(tmp_path / "other.db"))


def test_an_exported_session_imported_elsewhere_resumes_with_its_reference(
    store_factory: StoreFactory, other_store: StoreFactory
) -> None:
    session_id, exported = _exported(store_factory, "move")
    importing = _RefProvider()
    host = _start(other_store, importing)
    try:
        assert host.import_session(exported).id == session_id
    finally:
        host.stop()
    assert importing.opened == [("resume", "moved")]  # its chat resumed as it was imported
    assert _reopened_in(other_store, session_id).opened == [("resume", "moved")]


def test_an_export_made_before_references_were_kept_starts_a_new_provider_session(
    store_factory: StoreFactory, other_store: StoreFactory
) -> None:
    _, exported = _exported(store_factory)
    for chat in exported["session"]["chats"]:  # type: ignore[index]
        del chat["providerRef"]
    importing = _RefProvider()
    host = _start(other_store, importing)
    try:
        host.import_session(exported)
    finally:
        host.stop()
    assert importing.opened == [("start", None)]


def test_a_fork_is_a_new_conversation_and_takes_no_reference(store_factory: StoreFactory) -> None:
    provider = _RefProvider()
    host = _start(store_factory, provider)
    try:
        session = host.create_session()
        turn = session.chat().send("hello").result(timeout=WAIT_S)
        assert turn.turn_id is not None
        forked = session.fork(turn.turn_id)
        assert forked.chat().send("on the fork").result(timeout=WAIT_S).text == "ok"
    finally:
        host.stop()
    assert provider.opened == [("start", None), ("start", None)]


def test_agenthost_export_and_import_carry_the_reference(
    store_factory: StoreFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session_id, _ = _exported(store_factory, "move")
    assert cli.run(["export", session_id, "--store", store_factory.spec]) == 0
    (tmp_path / "s.json").write_text(capsys.readouterr().out)
    into = str(tmp_path / "imported.db")
    assert cli.run(["import", str(tmp_path / "s.json"), "--store", into]) == 0
    assert capsys.readouterr().out.strip() == session_id
    assert _reopened_in(StoreFactory(kind="sqlite", spec=into), session_id).opened == [
        ("resume", "moved")
    ]
