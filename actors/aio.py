"""The asyncio surface: AsyncHost, AsyncSession, AsyncChat.

The same calls as the sync surface (actors/surface.py), with the same
parameters and return types, as coroutines that never block a thread:
replies arrive on the loop through its `call_soon_threadsafe` (one wake-up
per burst), never through an executor (actors/calls.py does both sides).
A `TurnHandle` is awaitable to its TurnOutcome; a subscription is an async
iterator:

    host = await AsyncHost.start(store=SqliteStore(path))
    chat = await (await host.create_session()).chat()
    turn = await chat.send("hello")
    outcome = await turn
    async for event in await chat.subscribe(): ...

Stopping a host (`await host.stop()`) joins threads; it runs on a thread of
its own so the loop goes on meanwhile.
"""

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pykka

from agenthost.actors import calls
from agenthost.actors.aio_asking import AsyncChatAsking
from agenthost.actors.calls import ChatHandle, SessionHandle, chat_call, run_async, wait
from agenthost.actors.clock import Clock
from agenthost.actors.context import Departure, Lifecycle, Services
from agenthost.actors.contributions import Command, Contribution
from agenthost.actors.handles import Subscription
from agenthost.actors.limits import HostLimits
from agenthost.actors.protocol import (
    ClaimClient,
    CountSessions,
    FindClient,
    FindSession,
    ListSessionPage,
    ListSessionRows,
)
from agenthost.actors.startup import Running, policy_of, start_host, stop_host
from agenthost.actors.supervisor import RestartPolicy
from agenthost.actors.surface import (
    DEFAULT_TIMEOUT,
    Chat,
    Host,
    Removal,
    Session,
    TurnHandle,
)
from agenthost.messages.commands import (
    CancelTurn,
    DisposeChat,
    EditPendingMessage,
    GetChatState,
    GetDiagnostics,
    GetSessionState,
    GetSessionStatus,
    GetSessionSummary,
    GetSessionView,
    GetSessionViewReply,
    RemoveClient,
    RemovePendingMessage,
    ReorderQueue,
    SetClientTools,
    SetDraft,
    SetReadOnly,
    SetSessionFlags,
    ToggleCustomization,
    TruncateChat,
    TurnDiagnostics,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.session_events import CustomizationToggled
from agenthost.messages.state import (
    ActiveClient,
    ChatState,
    ChatStatus,
    ClientTool,
    PendingMessage,
    SessionState,
    SessionSummary,
    Worktree,
)
from agenthost.providers.base import Provider, RetryPolicy
from agenthost.store.base import ClientBinding, SessionPage, Store

__all__ = ["AsyncChat", "AsyncHost", "AsyncSession", "wait"]


class AsyncHost:
    """`Host`, for asyncio."""

    def __init__(self, running: Running) -> None:
        self._running = running
        self._core = running.core

    @classmethod
    async def start(
        cls,
        store: Store | None = None,
        providers: Mapping[str, Provider] | None = None,
        clock: Clock | None = None,
        *,
        restart_policy: RestartPolicy | None = None,
        resume_retry: RetryPolicy | None = None,
        idle_release_s: float = 30.0,
        draft_gc_s: float = 30.0,
        max_resident: int | None = None,
        max_resident_bytes: int | None = None,
        restart_intensity: tuple[int, float] | None = None,
        restart_backoff: tuple[float, float] | None = None,
        subscriber_queue_size: int = 10_000,
        contributions: Sequence[type[Contribution]] = (),
        rare_full_collections: bool = True,
        limits: HostLimits | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> "AsyncHost":
        """`Host.start`: the store opens on its own thread while the loop goes on."""
        lifecycle = Lifecycle(
            idle_release_s=idle_release_s,
            draft_gc_s=draft_gc_s,
            max_resident=max_resident,
            max_resident_bytes=max_resident_bytes,
        )
        starting = start_host(
            store,
            providers,
            clock,
            policy_of(restart_policy, restart_intensity, restart_backoff),
            resume_retry,
            lifecycle,
            subscriber_queue_size,
            contributions,
            rare_full_collections,
            limits,
        )
        return cls(await run_async(starting, timeout))

    async def create_session(
        self,
        provider: str = "scripted",
        *,
        worktree_of: str | os.PathLike[str] | None = None,
        session_id: str | None = None,
        model: str | None = None,
        instructions: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> "AsyncSession":
        """`Host.create_session`."""
        repo = None if worktree_of is None else os.path.expanduser(os.fspath(worktree_of))
        config = calls.config_values(model, instructions)
        handle = await run_async(
            calls.create_session(self._core, provider, repo, session_id, config), timeout
        )
        return AsyncSession(self, handle)

    async def export_session(
        self, session_id: str, *, timeout: float = DEFAULT_TIMEOUT
    ) -> dict[str, Any]:
        return await run_async(calls.export_session(self._core, session_id), timeout)

    async def import_session(
        self, data: Mapping[str, Any], *, timeout: float = DEFAULT_TIMEOUT
    ) -> "AsyncSession":
        return AsyncSession(self, await run_async(calls.import_session(self._core, data), timeout))

    async def open_session(
        self, session_id: str, *, timeout: float = DEFAULT_TIMEOUT
    ) -> "AsyncSession":
        """`Host.open_session`: restored from the store if it is not resident."""
        return AsyncSession(self, await run_async(calls.adopt(self._core, session_id), timeout))

    async def counters(self, *, timeout: float = DEFAULT_TIMEOUT) -> dict[str, int]:
        return await run_async(calls.counters(self._core), timeout)

    async def list_sessions(self, *, timeout: float = DEFAULT_TIMEOUT) -> list[SessionSummary]:
        rows = await run_async(calls.ask(self._core.store_ref, ListSessionRows()), timeout)
        return list(rows)

    async def list_sessions_page(
        self,
        owner: str,
        *,
        limit: int = 100,
        cursor: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> SessionPage:
        """`Host.list_sessions_page`."""
        query = ListSessionPage(owner=owner, limit=limit, after=cursor)
        page: SessionPage = await run_async(calls.ask(self._core.store_ref, query), timeout)
        return page

    async def count_sessions(self, owner: str, *, timeout: float = DEFAULT_TIMEOUT) -> int:
        """`Host.count_sessions`."""
        ask = calls.ask(self._core.store_ref, CountSessions(owner=owner))
        count: int = await run_async(ask, timeout)
        return count

    async def find_session(
        self,
        session_id: str | None = None,
        *,
        chat_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> SessionSummary | None:
        """`Host.find_session`: nothing is loaded into memory."""
        query = FindSession(session_id=session_id, chat_id=chat_id)
        found: SessionSummary | None = await run_async(
            calls.ask(self._core.store_ref, query), timeout
        )
        return found

    async def claim_client(
        self, client_id: str, identity: str, *, timeout: float = DEFAULT_TIMEOUT
    ) -> ClientBinding:
        """`Host.claim_client`: answered once the binding is committed."""
        claim = ClaimClient(
            client_id=client_id, identity=identity, now_ms=self._core.services.clock.wall_ms()
        )
        binding: ClientBinding = await run_async(calls.ask(self._core.store_ref, claim), timeout)
        return binding

    async def find_client(
        self, client_id: str, *, timeout: float = DEFAULT_TIMEOUT
    ) -> ClientBinding | None:
        """`Host.find_client`."""
        found: ClientBinding | None = await run_async(
            calls.ask(self._core.store_ref, FindClient(client_id=client_id)), timeout
        )
        return found

    def unavailable_providers(self) -> frozenset[str]:
        """`Host.unavailable_providers` (a read of a shared set: it never waits)."""
        return self._core.services.health.unavailable()

    def on_providers_changed(
        self, callback: Callable[[frozenset[str]], None]
    ) -> Callable[[], None]:
        """`Host.on_providers_changed`, with `callback(unavailable)` called on
        the running loop (the one this is called on). Returns the function that
        stops it."""
        loop = asyncio.get_running_loop()

        def hop(unavailable: frozenset[str]) -> None:  # on the supervisor's thread
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(callback, unavailable)

        return self._core.services.health.watch(hop)

    def on_session_left(self, callback: Callable[[str, Departure], None]) -> Callable[[], None]:
        """`Host.on_session_left`, with `callback(session_id, why)` called on the
        running loop (the one this is called on). Returns the function that
        stops it."""
        loop = asyncio.get_running_loop()

        def hop(session_id: str, why: Departure) -> None:  # on the host actor's thread
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(callback, session_id, why)

        return self._core.services.departures.watch(hop)

    def commands(self, without: frozenset[str] = frozenset()) -> tuple[Command, ...]:
        """`Host.commands`."""
        dispatcher = getattr(self._core.services, "contributions", None)  # none on a front
        commands: tuple[Command, ...] = (
            () if dispatcher is None else dispatcher.without(without).commands()
        )
        return commands

    def on_session_changed(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """`Host.on_session_changed`, with `callback(session_id)` called on the
        running loop: once for each session that changed since the loop last
        ran the callbacks (a burst of changes is one wake-up). Returns the
        function that stops it."""
        loop = asyncio.get_running_loop()
        lock = threading.Lock()
        changed: dict[str, None] = {}

        def flush() -> None:
            with lock:
                ids = list(changed)
                changed.clear()
            for session_id in ids:
                callback(session_id)

        def hop(session_id: str) -> None:  # on the session actor's thread
            with lock:
                first = not changed
                changed[session_id] = None
            if first:
                with contextlib.suppress(RuntimeError):  # the loop has closed
                    loop.call_soon_threadsafe(flush)

        changes = getattr(self._core.services, "changes", None)  # a sharded front has none
        return (lambda: None) if changes is None else changes.watch(hop)

    async def stop(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """`Host.stop`, on a thread of its own (it joins threads)."""
        await asyncio.to_thread(stop_host, self._running, timeout)

    async def __aenter__(self) -> "AsyncHost":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def services(self) -> Services:
        return self._core.services

    @property
    def sync(self) -> Host:
        """This host's synchronous surface."""
        return Host(self._running)


class AsyncSession:
    """`Session`, for asyncio."""

    def __init__(self, host: AsyncHost, handle: SessionHandle) -> None:
        self._host = host
        self._handle = handle
        self.id = handle.session_id

    async def _call(self, message: Any, timeout: float) -> Any:
        return await run_async(calls.session_call(self._handle, message), timeout)

    async def set_client_tools(
        self,
        client_id: str,
        tools: Sequence[ClientTool],
        *,
        shown: ActiveClient | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        message = SetClientTools(client_id=client_id, tools=tuple(tools), shown=shown)
        await self._call(message, timeout)

    async def remove_client(self, client_id: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        await self._call(RemoveClient(client_id=client_id), timeout)

    async def status(self, *, timeout: float = DEFAULT_TIMEOUT) -> ChatStatus:
        status: ChatStatus = await self._call(GetSessionStatus(), timeout)
        return status

    async def fork(self, turn_id: str, *, timeout: float = DEFAULT_TIMEOUT) -> "AsyncSession":
        return AsyncSession(self._host, await run_async(calls.fork(self._handle, turn_id), timeout))

    async def dispose(self, *, force: bool = False, timeout: float = DEFAULT_TIMEOUT) -> None:
        await run_async(calls.dispose(self._handle, force), timeout)

    async def worktree(self, *, timeout: float = DEFAULT_TIMEOUT) -> Worktree | None:
        return await run_async(calls.worktree(self._handle), timeout)

    async def chat(
        self, chat_id: str | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> "AsyncChat":
        return AsyncChat(self, await run_async(calls.chat(self._handle, chat_id), timeout))

    async def chats(self, *, timeout: float = DEFAULT_TIMEOUT) -> list["AsyncChat"]:
        handles = await run_async(calls.chats(self._handle), timeout)
        return [AsyncChat(self, handle) for handle in handles]

    async def create_chat(self, *, timeout: float = DEFAULT_TIMEOUT) -> "AsyncChat":
        return AsyncChat(self, await run_async(calls.create_chat(self._handle), timeout))

    async def dispose_chat(self, chat_id: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        await self._call(DisposeChat(chat_id=chat_id), timeout)

    async def summary(self, *, timeout: float = DEFAULT_TIMEOUT) -> SessionSummary:
        summary: SessionSummary = await self._call(GetSessionSummary(), timeout)
        return summary

    async def view(self, *, timeout: float = DEFAULT_TIMEOUT) -> GetSessionViewReply:
        """As Session.view."""
        view: GetSessionViewReply = await self._call(GetSessionView(), timeout)
        return view

    async def rename(self, title: str, *, timeout: float = DEFAULT_TIMEOUT) -> SessionSummary:
        summary: SessionSummary = await self._call(SetSessionFlags(title=title), timeout)
        return summary

    async def archive(self, *, timeout: float = DEFAULT_TIMEOUT) -> SessionSummary:
        summary: SessionSummary = await self._call(SetSessionFlags(archived=True), timeout)
        return summary

    async def unarchive(self, *, timeout: float = DEFAULT_TIMEOUT) -> SessionSummary:
        summary: SessionSummary = await self._call(SetSessionFlags(archived=False), timeout)
        return summary

    async def mark_read(self, *, timeout: float = DEFAULT_TIMEOUT) -> SessionSummary:
        summary: SessionSummary = await self._call(SetSessionFlags(read=True), timeout)
        return summary

    async def set_config(
        self, values: Mapping[str, str], *, timeout: float = DEFAULT_TIMEOUT
    ) -> SessionSummary:
        change = SetSessionFlags(config=tuple(sorted(values.items())))
        summary: SessionSummary = await self._call(change, timeout)
        return summary

    async def toggle_customization(
        self, customization_id: str, enabled: bool, *, timeout: float = DEFAULT_TIMEOUT
    ) -> CustomizationToggled:
        """As Session.toggle_customization."""
        action = CustomizationToggled(id=customization_id, enabled=enabled)
        return await self.apply_customization_toggle(action, timeout=timeout)

    async def apply_customization_toggle(
        self,
        action: CustomizationToggled,
        *,
        client_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> CustomizationToggled:
        """A client's session/customizationToggled as it came (`enabled`, or
        `enablement`); returns the action the host applied (both set)."""
        command = ToggleCustomization(action=action, client_id=client_id)
        applied: CustomizationToggled = await self._call(command, timeout)
        return applied

    async def config(self, *, timeout: float = DEFAULT_TIMEOUT) -> dict[str, str]:
        return dict((await self._call(GetSessionState(), timeout)).config)

    async def state(self, *, timeout: float = DEFAULT_TIMEOUT) -> SessionState:
        """As Session.state."""
        state: SessionState = await self._call(GetSessionState(), timeout)
        return state

    @property
    def sync(self) -> Session:
        """This session's synchronous surface."""
        return Session(self._host.sync, self._handle)

    def __repr__(self) -> str:
        return f"AsyncSession({self.id})"


class AsyncChat(AsyncChatAsking):
    """`Chat`, for asyncio."""

    def __init__(self, session: AsyncSession, handle: ChatHandle) -> None:
        self.session = session
        self._handle = handle
        self.id = handle.chat_id

    async def _call(self, message: Any, timeout: float) -> Any:
        return await run_async(chat_call(self._handle, message), timeout)

    async def subscribe(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        maxsize: int | None = None,
        keep_state: bool = False,
        max_bytes: int | None = None,
    ) -> Subscription:
        """Events of this chat (an async iterator): first a ChatSnapshot, then live
        events (`Chat.subscribe`). A call that fails or is cancelled leaves
        nothing attached."""
        subscribing = calls.subscribe(self._handle, maxsize, keep_state, max_bytes)
        return await run_async(subscribing, timeout)

    async def send(
        self,
        text: str,
        *,
        client_id: str | None = None,
        turn_id: str | None = None,
        pending_id: str | None = None,
        attachments: Sequence[str | os.PathLike[str]] = (),
        timeout: float = DEFAULT_TIMEOUT,
    ) -> TurnHandle:
        """`Chat.send`; await the handle for the turn's outcome."""
        send = calls.send(self._handle, text, client_id, turn_id, pending_id, attachments)
        return TurnHandle(await run_async(send, timeout))

    async def set_draft(self, text: str | None, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        await self._call(SetDraft(text=text), timeout)

    async def set_read_only(self, read_only: bool, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        await self._call(SetReadOnly(read_only=read_only), timeout)

    async def steer(
        self,
        text: str,
        *,
        client_id: str | None = None,
        pending_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> PendingMessage:
        return await run_async(calls.steer(self._handle, text, client_id, pending_id), timeout)

    async def remove_pending(
        self, pending_id: str, *, client_id: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> bool:
        removal = RemovePendingMessage(pending_id=pending_id, client_id=client_id)
        return bool(await self._call(removal, timeout))

    def remove_pending_nowait(self, pending_id: str) -> Removal:
        """Ask to remove a pending message; await the Removal for the settlement."""
        return self.sync.remove_pending_nowait(pending_id)

    async def edit_pending(
        self, pending_id: str, text: str, *, timeout: float = DEFAULT_TIMEOUT
    ) -> PendingMessage:
        calls.check_text(text, self._handle.session.core.services.limits)
        edited: PendingMessage = await self._call(
            EditPendingMessage(pending_id=pending_id, text=text), timeout
        )
        return edited

    async def reorder_queue(
        self, pending_ids: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT
    ) -> tuple[PendingMessage, ...]:
        queue: tuple[PendingMessage, ...] = await self._call(
            ReorderQueue(pending_ids=tuple(pending_ids)), timeout
        )
        return queue

    async def diagnostics(self, *, timeout: float = DEFAULT_TIMEOUT) -> TurnDiagnostics | None:
        diagnostics: TurnDiagnostics | None = await self._call(GetDiagnostics(), timeout)
        return diagnostics

    async def cancel(
        self,
        turn_id: str | None = None,
        *,
        client_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> bool:
        command = CancelTurn(turn_id=turn_id, client_id=client_id)
        return bool(await self._call(command, timeout))

    async def truncate(
        self, turn_id: str | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> ChatState:
        state: ChatState = await self._call(TruncateChat(turn_id=turn_id), timeout)
        return state

    def cancel_nowait(self) -> None:
        """Ask to cancel the active turn without waiting for the answer."""
        try:
            self._handle.ref.tell(CancelTurn())
        except pykka.ActorDeadError as exc:
            raise AgentHostError(code=ErrorCode.HOST_STOPPED, message=calls.HOST_STOPPED) from exc

    async def state(self, *, timeout: float = DEFAULT_TIMEOUT) -> ChatState:
        state: ChatState = await self._call(GetChatState(), timeout)
        return state

    @property
    def sync(self) -> Chat:
        """This chat's synchronous surface."""
        return Chat(self.session.sync, self._handle)

    def __repr__(self) -> str:
        return f"AsyncChat({self.id})"
