"""The public, synchronous surface: Host, Session, Chat, TurnHandle (Chat and
what its calls hand back in actors/surface_chat.py).

Runs on the caller's thread, never on an actor's: every call that waits takes
`timeout=` (default 10 s), raises the built-in TimeoutError on expiry and
`AgentHostError` for expected failures. What each call does is written once
in actors/calls.py, for this surface and the asyncio one (actors/aio.py).
"""

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from agenthost.actors import calls
from agenthost.actors.calls import HostCore, SessionHandle, run_sync
from agenthost.actors.clock import Clock
from agenthost.actors.context import Departure, Lifecycle, Services
from agenthost.actors.contributions import (
    Command,
    Contribution,
)
from agenthost.actors.limits import HostLimits
from agenthost.actors.protocol import (
    ClaimClient,
    CountSessions,
    FindClient,
    FindSession,
    ListSessionPage,
    ListSessionRows,
)
from agenthost.actors.runtime import ASK_TIMEOUT_S
from agenthost.actors.startup import Running, policy_of, start_host, stop_host
from agenthost.actors.supervisor import RestartPolicy
from agenthost.actors.surface_chat import Chat, Removal, TurnHandle
from agenthost.messages.commands import (
    DisposeChat,
    GetSessionState,
    GetSessionStatus,
    GetSessionSummary,
    GetSessionView,
    GetSessionViewReply,
    RemoveClient,
    SetClientTools,
    SetSessionFlags,
    ToggleCustomization,
)
from agenthost.messages.session_events import CustomizationToggled
from agenthost.messages.state import (
    ActiveClient,
    ChatStatus,
    ClientTool,
    SessionState,
    SessionSummary,
    Worktree,
)
from agenthost.providers.base import Provider, RetryPolicy
from agenthost.store.base import ClientBinding, SessionPage, Store

log = structlog.get_logger(__name__)

DEFAULT_TIMEOUT = ASK_TIMEOUT_S
EXPORT_FORMAT = calls.EXPORT_FORMAT
read_attachment = calls.read_attachment


class Host:
    """An agent host: sessions, chats and turns over providers and a store."""

    def __init__(self, running: Running) -> None:
        self._running = running
        self._core = running.core

    @classmethod
    def start(
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
    ) -> "Host":
        """Start a host.

        Args:
            store: the durable store (default: SQLite under the user's data folder).
            providers: provider name -> provider (default: {"scripted": ScriptedProvider()}).
            clock: the host clock (default: the system clock; tests pass a FakeClock).
            contributions: your Contribution classes, run beside the built-ins; each is
                constructed once, its constructor's parameters injected by name.
            rare_full_collections: while the host runs, the garbage collector runs
                less often: young collections after 50,000 allocations, full ones
                100x less often, and a sweep once the last resident session left
                memory: a full collection, and the freed heap back to the system
                (actors/collector.py); False leaves it alone.
            max_resident, max_resident_bytes: bounds on the sessions kept in memory,
                in sessions and in their chats' history (messages/sizes.py weighs
                it): past either, the least recently used idle sessions (nobody
                watches them, no turn runs) leave memory at once instead of after
                idle_release_s (their rows stay; the next use restores them).
            limits: bounds in bytes on a message's text and attachments and on a
                subscriber's unread events (HostLimits; the defaults: 1 MiB, 1 MiB
                each, 16 attachments, 16 MiB). A message over them is refused with
                AgentHostError TOO_LARGE.

        Raises:
            AgentHostError: STORE_ERROR when the store cannot be opened or is in use.
            ContributionError: two contributions share an id, or one asks for a
                service that does not exist (nothing is started then).
        """
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
        return cls(run_sync(starting, timeout))

    # -- sessions -------------------------------------------------------------------------
    def create_session(
        self,
        provider: str = "scripted",
        *,
        worktree_of: str | os.PathLike[str] | None = None,
        session_id: str | None = None,
        model: str | None = None,
        instructions: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> "Session":
        """A new session (with the id given, or a new one). With `worktree_of` (a
        git repository; `~` is expanded) it gets an isolated git worktree of its
        own, on a branch `agenthost/<session id>`. `model` overrides the
        provider's model for its turns and `instructions` go with each of them as
        system instructions (both are session config values: `model`,
        `instructions`)."""
        repo = None if worktree_of is None else os.path.expanduser(os.fspath(worktree_of))
        config = calls.config_values(model, instructions)
        handle = run_sync(
            calls.create_session(self._core, provider, repo, session_id, config), timeout
        )
        return Session(self, handle)

    def export_session(
        self, session_id: str, *, timeout: float = DEFAULT_TIMEOUT
    ) -> dict[str, Any]:
        """The session with its chats, turns and pending messages, as JSON-safe data."""
        return run_sync(calls.export_session(self._core, session_id), timeout)

    def import_session(
        self, data: Mapping[str, Any], *, timeout: float = DEFAULT_TIMEOUT
    ) -> "Session":
        """Add an exported session to this host's store. It is never an unused draft.

        Raises:
            AgentHostError: INVALID_ARGUMENT for data that is not an export, or a
                session this store already has.
        """
        return Session(self, run_sync(calls.import_session(self._core, data), timeout))

    def open_session(self, session_id: str, *, timeout: float = DEFAULT_TIMEOUT) -> "Session":
        """The session, restored from the store and resumed if it is not resident.

        Raises:
            AgentHostError: NOT_FOUND for an unknown id; the provider's error when
                its session cannot be resumed (the stored session stays untouched).
        """
        return Session(self, run_sync(calls.adopt(self._core, session_id), timeout))

    def counters(self, *, timeout: float = DEFAULT_TIMEOUT) -> dict[str, int]:
        """Resident sessions, releases, GC disposals, disposals, provider restarts
        and resume fallbacks since the host started."""
        return run_sync(calls.counters(self._core), timeout)

    def list_sessions(self, *, timeout: float = DEFAULT_TIMEOUT) -> list[SessionSummary]:
        return list(run_sync(calls.ask(self._core.store_ref, ListSessionRows()), timeout))

    def list_sessions_page(
        self,
        owner: str,
        *,
        limit: int = 100,
        cursor: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> SessionPage:
        """One page of the sessions `owner` owns (its `ahp.owner` config value),
        oldest first; pass the page's `next_cursor` for the next (None on the
        last). One indexed read: its cost depends on neither other owners'
        sessions nor the pages before it.

        Raises:
            AgentHostError: INVALID_ARGUMENT for a limit below 1 or a cursor
                this store did not make.
        """
        query = ListSessionPage(owner=owner, limit=limit, after=cursor)
        page: SessionPage = run_sync(calls.ask(self._core.store_ref, query), timeout)
        return page

    def count_sessions(self, owner: str, *, timeout: float = DEFAULT_TIMEOUT) -> int:
        """How many stored sessions `owner` owns (its `ahp.owner` config value):
        one row the store keeps as sessions are created and disposed."""
        count: int = run_sync(calls.ask(self._core.store_ref, CountSessions(owner=owner)), timeout)
        return count

    def find_session(
        self,
        session_id: str | None = None,
        *,
        chat_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> SessionSummary | None:
        """A stored session as listed, by its id or by one of its chats (None:
        there is none); nothing is loaded into memory."""
        query = FindSession(session_id=session_id, chat_id=chat_id)
        found: SessionSummary | None = run_sync(calls.ask(self._core.store_ref, query), timeout)
        return found

    def claim_client(
        self, client_id: str, identity: str, *, timeout: float = DEFAULT_TIMEOUT
    ) -> ClientBinding:
        """Bind a client id to an identity unless another identity holds it; the
        binding that holds afterwards (compare its identity with yours). It is
        kept in the store, committed before this answers, so no restart gives
        the id to another identity; it lapses a week after its client was last
        seen (each claim by its identity renews it)."""
        claim = ClaimClient(
            client_id=client_id, identity=identity, now_ms=self._core.services.clock.wall_ms()
        )
        binding: ClientBinding = run_sync(calls.ask(self._core.store_ref, claim), timeout)
        return binding

    def find_client(
        self, client_id: str, *, timeout: float = DEFAULT_TIMEOUT
    ) -> ClientBinding | None:
        """The binding of a client id (None: nobody holds it)."""
        found: ClientBinding | None = run_sync(
            calls.ask(self._core.store_ref, FindClient(client_id=client_id)), timeout
        )
        return found

    def on_session_left(self, callback: Callable[[str, Departure], None]) -> Callable[[], None]:
        """Call `callback(session_id, why)` whenever a session leaves memory
        (released when idle or past max_resident, collected as an unused draft,
        disposed, or failed to restore), so what an embedder keeps per session
        can go with it. It runs on the host's thread and must not block (hand
        the notice on). Returns the function that stops it."""
        return self._core.services.departures.watch(callback)

    def commands(self, without: frozenset[str] = frozenset()) -> tuple[Command, ...]:
        """The slash commands the host's contributions declare (`Contribution.commands`),
        in the order they run: what clients are offered to complete. `without`:
        the ids of contributions a session turned off (their commands are not
        offered in it)."""
        dispatcher = getattr(self._core.services, "contributions", None)  # none on a front
        commands: tuple[Command, ...] = (
            () if dispatcher is None else dispatcher.without(without).commands()
        )
        return commands

    def on_session_changed(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call `callback(session_id)` whenever a resident session may have
        changed: its entry (title, read, archived, config, input needed), its
        chats (one created or disposed), a chat's status. It runs on the
        session's thread and must not block. Returns the function that stops it."""
        changes = getattr(self._core.services, "changes", None)  # a sharded front has none
        return (lambda: None) if changes is None else changes.watch(callback)

    def unavailable_providers(self) -> frozenset[str]:
        """The providers a connection of which waits out its cool-down after
        failing past the restart limit (its sends fail at once meanwhile)."""
        return self._core.services.health.unavailable()

    def on_providers_changed(
        self, callback: Callable[[frozenset[str]], None]
    ) -> Callable[[], None]:
        """Call `callback(unavailable)` whenever a provider becomes unavailable
        or available again (`unavailable_providers`). It runs on the
        supervisor's thread and must not block. Returns the function that
        stops it."""
        return self._core.services.health.watch(callback)

    # -- stopping -------------------------------------------------------------------------------
    def stop(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Stop every actor of this host (newest first), flush the store, stop provider loops."""
        stop_host(self._running, timeout)

    def __enter__(self) -> "Host":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def services(self) -> Services:
        return self._core.services

    @property
    def core(self) -> HostCore:
        """What the sync and asyncio surfaces of this host share."""
        return self._core

    @property
    def aio(self) -> "Any":
        """This host's asyncio surface (agenthost.actors.aio.AsyncHost)."""
        from agenthost.actors.aio import AsyncHost

        return AsyncHost(self._running)


class Session:
    """A handle on one session. Cheap; holds no state of its own."""

    def __init__(self, host: Host, handle: SessionHandle) -> None:
        self._host = host
        self._handle = handle
        self.id = handle.session_id

    def _call(self, message: Any, timeout: float) -> Any:
        return run_sync(calls.session_call(self._handle, message), timeout)

    def set_client_tools(
        self,
        client_id: str,
        tools: Sequence[ClientTool],
        *,
        shown: ActiveClient | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """Register the tools `client_id` executes; calls to them wait for its results.
        The session state's `active_clients` shows it (`shown`: its display name,
        _meta, customizations)."""
        message = SetClientTools(client_id=client_id, tools=tuple(tools), shown=shown)
        self._call(message, timeout)

    def remove_client(self, client_id: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Forget a client: every call it left parked fails, and new calls to its
        tools are answered with an error at once."""
        self._call(RemoveClient(client_id=client_id), timeout)

    def status(self, *, timeout: float = DEFAULT_TIMEOUT) -> ChatStatus:
        """The session's status: input-needed while any chat waits on the user."""
        return self._call(GetSessionStatus(), timeout)

    def fork(self, turn_id: str, *, timeout: float = DEFAULT_TIMEOUT) -> "Session":
        """A new session with this one's turns up to and including `turn_id`,
        titled "Forked: <title>". It is never an unused draft."""
        return Session(self._host, run_sync(calls.fork(self._handle, turn_id), timeout))

    def dispose(self, *, force: bool = False, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Delete the session: rows, provider session, worktree.

        Raises:
            AgentHostError: WORKTREE_DIRTY naming the uncommitted changes or
                unpushed commits of its worktree, unless `force`.
        """
        run_sync(calls.dispose(self._handle, force), timeout)

    @property
    def worktree(self) -> Worktree | None:
        """The session's git worktree, if it was created with one."""
        return run_sync(calls.worktree(self._handle), DEFAULT_TIMEOUT)

    def chat(self, chat_id: str | None = None, *, timeout: float = DEFAULT_TIMEOUT) -> "Chat":
        """The default chat, or the chat with this id."""
        return Chat(self, run_sync(calls.chat(self._handle, chat_id), timeout))

    def chats(self, *, timeout: float = DEFAULT_TIMEOUT) -> list["Chat"]:
        """Every chat of the session, the default one first."""
        return [Chat(self, handle) for handle in run_sync(calls.chats(self._handle), timeout)]

    def create_chat(self, *, timeout: float = DEFAULT_TIMEOUT) -> "Chat":
        """A new chat in this session, on the session's provider."""
        return Chat(self, run_sync(calls.create_chat(self._handle), timeout))

    def dispose_chat(self, chat_id: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Delete a chat (not the default one) with its turns and mementos."""
        self._call(DisposeChat(chat_id=chat_id), timeout)

    def summary(self, *, timeout: float = DEFAULT_TIMEOUT) -> SessionSummary:
        """Title, status, unread, archived, input needed: the session as listed."""
        return self._call(GetSessionSummary(), timeout)

    def view(self, *, timeout: float = DEFAULT_TIMEOUT) -> GetSessionViewReply:
        """The entry, summary and chat catalog (each chat's status) at one instant."""
        view: GetSessionViewReply = self._call(GetSessionView(), timeout)
        return view

    def rename(self, title: str, *, timeout: float = DEFAULT_TIMEOUT) -> SessionSummary:
        """Name the session; the user's title is never replaced by a derived one."""
        return self._call(SetSessionFlags(title=title), timeout)

    def archive(self, *, timeout: float = DEFAULT_TIMEOUT) -> SessionSummary:
        """Archive the session: it becomes read-only until unarchived."""
        return self._call(SetSessionFlags(archived=True), timeout)

    def unarchive(self, *, timeout: float = DEFAULT_TIMEOUT) -> SessionSummary:
        return self._call(SetSessionFlags(archived=False), timeout)

    def mark_read(self, *, timeout: float = DEFAULT_TIMEOUT) -> SessionSummary:
        return self._call(SetSessionFlags(read=True), timeout)

    def set_config(
        self, values: Mapping[str, str], *, timeout: float = DEFAULT_TIMEOUT
    ) -> SessionSummary:
        """Set session config values (an empty value removes the key)."""
        return self._call(SetSessionFlags(config=tuple(sorted(values.items()))), timeout)

    def config(self, *, timeout: float = DEFAULT_TIMEOUT) -> dict[str, str]:
        return dict(self._call(GetSessionState(), timeout).config)

    def toggle_customization(
        self, customization_id: str, enabled: bool, *, timeout: float = DEFAULT_TIMEOUT
    ) -> CustomizationToggled:
        """Turn one of the session's customizations (a contribution, listed in
        `state().customizations`) on or off for this session alone; kept with
        the session. Returns the action applied.

        Raises:
            AgentHostError: NOT_FOUND for an id the session does not list,
                INVALID_ARGUMENT for one that cannot be turned off.
        """
        action = CustomizationToggled(id=customization_id, enabled=enabled)
        applied: CustomizationToggled = self._call(ToggleCustomization(action=action), timeout)
        return applied

    def state(self, *, timeout: float = DEFAULT_TIMEOUT) -> SessionState:
        """The session's state as AHP has it: title, status, its chats, and
        `input_requests` (AHP's inputNeeded: each question or tool call a chat
        waits on the user for, answerable with that chat's `answer`)."""
        state: SessionState = self._call(GetSessionState(), timeout)
        return state

    @property
    def aio(self) -> Any:
        """This session's asyncio surface (agenthost.actors.aio.AsyncSession)."""
        from agenthost.actors.aio import AsyncSession

        return AsyncSession(self._host.aio, self._handle)

    def __repr__(self) -> str:
        return f"Session({self.id})"


__all__ = ["Chat", "Host", "Removal", "Session", "TurnHandle"]
