"""The public, synchronous surface: Host, Session, Chat, TurnHandle.

Runs on the caller's thread, never on an actor's: every call that waits asks
an actor with `timeout=` (default 10 s), raises the built-in TimeoutError on
expiry and `AgentHostError` for expected failures.
"""

import contextlib
import os
import time
import uuid
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pykka
import structlog

from agenthost.actors import collector
from agenthost.actors.chat import Attach, Detach, SteerReply
from agenthost.actors.clock import Clock, SystemClock
from agenthost.actors.context import ActorGroup, Services
from agenthost.actors.contributions import (
    Contribution,
    MementoCache,
    build_dispatcher,
    check_ids,
    injectable,
)
from agenthost.actors.contributions.builtin import BUILTINS
from agenthost.actors.handles import Subscription, Ticket
from agenthost.actors.host import HostActor, Lifecycle, SessionInfo
from agenthost.actors.protocol import (
    AdoptSession,
    FindSession,
    Flush,
    GetChat,
    GetCounters,
    ImportRecord,
    ListChats,
    ListSessionRows,
    LoadSession,
)
from agenthost.actors.runtime import ASK_TIMEOUT_S
from agenthost.actors.session import ChatInfo
from agenthost.actors.store import StoreActor
from agenthost.actors.supervisor import RestartPolicy, SupervisorActor
from agenthost.actors.worktree import CreateWorktree, RemoveWorktree, WorktreeActor
from agenthost.messages.commands import (
    AnswerRequest,
    CancelTurn,
    CreateChat,
    CreateSession,
    DisposeChat,
    DisposeSession,
    EditPendingMessage,
    GetChatState,
    GetDiagnostics,
    GetSessionState,
    GetSessionStatus,
    GetSessionSummary,
    OutcomeState,
    RemoveClient,
    RemovePendingMessage,
    ReorderQueue,
    SendMessage,
    SetClientTools,
    SetDraft,
    SetReadOnly,
    SetSessionFlags,
    SteerMessage,
    TruncateChat,
    TurnDiagnostics,
    TurnOutcome,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.state import (
    Attachment,
    ChatState,
    ChatStatus,
    ClientTool,
    PendingMessage,
    SessionSummary,
    Worktree,
)
from agenthost.messages.wire import from_wire, to_wire
from agenthost.providers.base import Provider, ProviderLoop, RetryPolicy
from agenthost.store.base import Store
from agenthost.store.records import SessionRecord, fork_record
from agenthost.store.sqlite import SqliteStore

log = structlog.get_logger(__name__)

DEFAULT_TIMEOUT = ASK_TIMEOUT_S


def _wait(future: pykka.Future[Any], timeout: float, waiting_for: str) -> Any:
    """Wait on an actor's reply from the caller's thread; a deferred reply (a future)
    is awaited too, within the same `timeout`."""
    deadline = time.monotonic() + timeout
    try:
        reply = future.get(timeout=timeout)
        while isinstance(reply, pykka.Future):
            reply = reply.get(timeout=max(deadline - time.monotonic(), 0.0))
    except pykka.Timeout as exc:
        raise TimeoutError(f"{waiting_for} within {timeout} s") from exc
    except pykka.ActorDeadError as exc:
        raise AgentHostError(code=ErrorCode.HOST_STOPPED, message="the host has stopped") from exc
    return reply


def _ask(ref: pykka.ActorRef[Any], message: Any, timeout: float) -> Any:
    """Ask an actor from the caller's thread."""
    return _wait(ref.ask(message, block=False), timeout, f"no reply to {type(message).__name__}")


def default_store_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return Path(base) / "agenthost" / "agenthost.db"


class Host:
    """An agent host: sessions, chats and turns over providers and a store."""

    def __init__(
        self,
        services: Services,
        store: Store,
        loops: dict[str, ProviderLoop],
        own_clock: SystemClock | None = None,
        holds_collector: bool = False,
    ) -> None:
        self._services = services
        self._store = store
        self._loops = loops
        self._own_clock = own_clock  # a clock this host made, stopped with it
        self._holds_collector = holds_collector  # collector.hold() at start: release at stop
        self._stopped = False

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
        restart_intensity: tuple[int, float] | None = None,
        restart_backoff: tuple[float, float] | None = None,
        subscriber_queue_size: int = 10_000,
        contributions: Sequence[type[Contribution]] = (),
        rare_full_collections: bool = True,
    ) -> "Host":
        """Start a host.

        Args:
            store: the durable store (default: SQLite under the user's data folder).
            providers: provider name -> provider (default: {"scripted": ScriptedProvider()}).
            clock: the host clock (default: the system clock; tests pass a FakeClock).
            contributions: your Contribution classes, run beside the built-ins; each is
                constructed once, its constructor's parameters injected by name.
            rare_full_collections: while the host runs, the garbage collector's full
                collections run 100x less often (actors/collector.py: they stop every
                thread for a walk of the whole heap); False leaves the thresholds alone.

        Raises:
            AgentHostError: STORE_ERROR when the store cannot be opened or is in use.
            ContributionError: two contributions share an id, or one asks for a
                service that does not exist (nothing is started then).
        """
        if providers is None:
            from agenthost.providers.scripted import ScriptedProvider

            providers = {"scripted": ScriptedProvider()}
        classes = (*BUILTINS, *contributions)
        check_ids(classes)
        store = store or SqliteStore(default_store_path())
        store.open()
        loops = {name: provider.make_loop(name) for name, provider in providers.items()}
        own_clock = None
        if clock is None:
            clock = own_clock = SystemClock()
        services = Services(
            clock=clock,
            store=StoreActor.start(store),
            group=ActorGroup(),
            providers=dict(providers),
            loops=loops,
            subscriber_queue_size=subscriber_queue_size,
            resume_retry=resume_retry or RetryPolicy(),
        )
        services.mementos = MementoCache(services.store)
        try:
            services.contributions = build_dispatcher(classes, injectable(services))
        except BaseException:
            services.store.stop()
            raise
        services.worktrees = WorktreeActor.start()
        policy = restart_policy or RestartPolicy()
        if restart_intensity is not None:
            policy = attrs.evolve(
                policy, intensity=restart_intensity[0], period=restart_intensity[1]
            )
        if restart_backoff is not None:
            policy = attrs.evolve(
                policy, backoff_min=restart_backoff[0], backoff_max=restart_backoff[1]
            )
        services.supervisor = SupervisorActor.start(services, policy)
        services.host = HostActor.start(
            services,
            Lifecycle(
                idle_release_s=idle_release_s, draft_gc_s=draft_gc_s, max_resident=max_resident
            ),
        )
        if rare_full_collections:
            collector.hold()
        log.info("host_started", store=store.location, providers=sorted(providers))
        return cls(services, store, loops, own_clock, rare_full_collections)

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
        git repository) it gets an isolated git worktree of its own, on a branch
        `agenthost/<session id>`. `model` overrides the provider's model for its
        turns and `instructions` go with each of them as system instructions
        (both are session config values: `model`, `instructions`)."""
        session_id = session_id or uuid.uuid4().hex
        worktree = None
        if worktree_of is not None:
            worktree = _ask(
                self._worktrees,
                CreateWorktree(repo=str(worktree_of), session_id=session_id),
                timeout,
            )
        info: SessionInfo = _ask(
            self._host_ref,
            CreateSession(provider=provider, session_id=session_id, worktree=worktree),
            timeout,
        )
        session = Session(self, info)
        config = {"model": model or "", "instructions": instructions or ""}
        if any(config.values()):
            session.set_config({k: v for k, v in config.items() if v}, timeout=timeout)
        return session

    def export_session(
        self, session_id: str, *, timeout: float = DEFAULT_TIMEOUT
    ) -> dict[str, Any]:
        """The session with its chats, turns and pending messages, as JSON-safe data."""
        record = self._load(session_id, timeout)
        return {"agenthost": EXPORT_FORMAT, "session": to_wire(record)}

    def import_session(
        self, data: Mapping[str, Any], *, timeout: float = DEFAULT_TIMEOUT
    ) -> "Session":
        """Add an exported session to this host's store. It is never an unused draft.

        Raises:
            AgentHostError: INVALID_ARGUMENT for data that is not an export, or a
                session this store already has.
        """
        if not isinstance(data, Mapping) or data.get("agenthost") != EXPORT_FORMAT:
            raise AgentHostError(
                code=ErrorCode.INVALID_ARGUMENT,
                message=f"not an agenthost session export (format {EXPORT_FORMAT})",
            )
        record = from_wire(data.get("session"), SessionRecord)
        if _ask(self._services.store, LoadSession(session_id=record.session_id), timeout):
            raise AgentHostError(
                code=ErrorCode.INVALID_ARGUMENT,
                message=f"this store already has session {record.session_id}",
            )
        return Session(self, _ask(self._host_ref, ImportRecord(record=record), timeout))

    def _load(self, session_id: str, timeout: float) -> SessionRecord:
        record = _ask(self._services.store, LoadSession(session_id=session_id), timeout)
        if record is None:
            raise AgentHostError(code=ErrorCode.NOT_FOUND, message=f"no session {session_id}")
        return record

    @property
    def _worktrees(self) -> pykka.ActorRef[Any]:
        assert self._services.worktrees is not None
        return self._services.worktrees

    def open_session(self, session_id: str, *, timeout: float = DEFAULT_TIMEOUT) -> "Session":
        """The session, restored from the store and resumed if it is not resident.

        Raises:
            AgentHostError: NOT_FOUND for an unknown id; the provider's error when
                its session cannot be resumed (the stored session stays untouched).
        """
        deadline = time.monotonic() + timeout
        record = self._load(session_id, timeout)
        info = _ask(
            self._host_ref, AdoptSession(record=record), max(deadline - time.monotonic(), 0.0)
        )
        return Session(self, info)

    def counters(self, *, timeout: float = DEFAULT_TIMEOUT) -> dict[str, int]:
        """Resident sessions, releases, GC disposals, disposals, provider restarts
        and resume fallbacks since the host started."""
        assert self._services.supervisor is not None
        return {
            **_ask(self._host_ref, GetCounters(), timeout),
            **_ask(self._services.supervisor, GetCounters(), timeout),
        }

    def list_sessions(self, *, timeout: float = DEFAULT_TIMEOUT) -> list[SessionSummary]:
        return list(_ask(self._services.store, ListSessionRows(), timeout))

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
        found: SessionSummary | None = _ask(self._services.store, query, timeout)
        return found

    @property
    def _host_ref(self) -> pykka.ActorRef[Any]:
        if self._stopped or self._services.host is None:
            raise AgentHostError(code=ErrorCode.HOST_STOPPED, message="the host has stopped")
        return self._services.host

    # -- stopping -------------------------------------------------------------------------------
    def stop(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Stop every actor of this host (newest first), flush the store, stop provider loops."""
        if self._stopped:
            return
        self._stopped = True
        deadline = time.monotonic() + timeout
        for ref in reversed(self._services.group.snapshot()):
            with contextlib.suppress(pykka.ActorDeadError):
                ref.stop(block=False)
        for ref in reversed(self._services.group.snapshot()):
            with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
                ref.stop(block=True, timeout=max(deadline - time.monotonic(), 0.1))
        with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout, TimeoutError):
            _ask(self._services.store, Flush(), max(deadline - time.monotonic(), 0.1))
        with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
            self._services.store.stop(block=True, timeout=max(deadline - time.monotonic(), 0.1))
        if self._services.worktrees is not None:
            with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
                self._services.worktrees.stop(
                    block=True, timeout=max(deadline - time.monotonic(), 0.1)
                )
        for loop in self._loops.values():
            loop.stop()
        if self._own_clock is not None:
            self._own_clock.stop()
        if self._holds_collector:
            collector.release()
        log.info("host_stopped")

    def __enter__(self) -> "Host":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def services(self) -> Services:
        return self._services

    def _released(self, error: AgentHostError) -> bool:
        """Whether a handle's ask failed because its session was released from
        memory (restore it and ask again), not because the host stopped."""
        return error.code is ErrorCode.HOST_STOPPED and not self._stopped


class Session:
    """A handle on one session. Cheap; holds no state of its own."""

    def __init__(self, host: Host, info: SessionInfo) -> None:
        self._host = host
        self._info = info
        self.id = info.session_id

    def set_client_tools(
        self, client_id: str, tools: Sequence[ClientTool], *, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        """Register the tools `client_id` executes; calls to them wait for its results."""
        self._call(SetClientTools(client_id=client_id, tools=tuple(tools)), timeout)

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
        host = self._host
        record = fork_record(host._load(self.id, timeout), turn_id, uuid.uuid4().hex, _new_id)
        return Session(host, _ask(host._host_ref, ImportRecord(record=record), timeout))

    def dispose(self, *, force: bool = False, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Delete the session: rows, provider session, worktree.

        Raises:
            AgentHostError: WORKTREE_DIRTY naming the uncommitted changes or
                unpushed commits of its worktree, unless `force`.
        """
        host = self._host
        record = host._load(self.id, timeout)
        if record.worktree is not None:
            _ask(
                host._worktrees,
                RemoveWorktree(worktree=record.worktree, session_id=self.id, force=force),
                timeout,
            )
        _ask(host._host_ref, DisposeSession(session_id=self.id), timeout)

    @property
    def worktree(self) -> Worktree | None:
        """The session's git worktree, if it was created with one."""
        return self._host._load(self.id, DEFAULT_TIMEOUT).worktree

    def chat(self, chat_id: str | None = None, *, timeout: float = DEFAULT_TIMEOUT) -> "Chat":
        """The default chat, or the chat with this id."""
        info: ChatInfo = self._call(GetChat(chat_id=chat_id), timeout)
        return Chat(self, info)

    def chats(self, *, timeout: float = DEFAULT_TIMEOUT) -> list["Chat"]:
        """Every chat of the session, the default one first."""
        return [Chat(self, info) for info in self._call(ListChats(), timeout)]

    def create_chat(self, *, timeout: float = DEFAULT_TIMEOUT) -> "Chat":
        """A new chat in this session, on the session's provider."""
        return Chat(self, self._call(CreateChat(), timeout))

    def dispose_chat(self, chat_id: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Delete a chat (not the default one) with its turns and mementos."""
        self._call(DisposeChat(chat_id=chat_id), timeout)

    def summary(self, *, timeout: float = DEFAULT_TIMEOUT) -> SessionSummary:
        """Title, status, unread, archived, input needed: the session as listed."""
        return self._call(GetSessionSummary(), timeout)

    def rename(self, title: str, *, timeout: float = DEFAULT_TIMEOUT) -> SessionSummary:
        """Name the session; the user's title is never replaced by a derived one."""
        return self._flags(SetSessionFlags(title=title), timeout)

    def archive(self, *, timeout: float = DEFAULT_TIMEOUT) -> SessionSummary:
        """Archive the session: it becomes read-only until unarchived."""
        return self._flags(SetSessionFlags(archived=True), timeout)

    def unarchive(self, *, timeout: float = DEFAULT_TIMEOUT) -> SessionSummary:
        return self._flags(SetSessionFlags(archived=False), timeout)

    def mark_read(self, *, timeout: float = DEFAULT_TIMEOUT) -> SessionSummary:
        return self._flags(SetSessionFlags(read=True), timeout)

    def set_config(
        self, values: Mapping[str, str], *, timeout: float = DEFAULT_TIMEOUT
    ) -> SessionSummary:
        """Set session config values (an empty value removes the key)."""
        return self._flags(SetSessionFlags(config=tuple(sorted(values.items()))), timeout)

    def config(self, *, timeout: float = DEFAULT_TIMEOUT) -> dict[str, str]:
        return dict(self._call(GetSessionState(), timeout).config)

    def _flags(self, change: SetSessionFlags, timeout: float) -> SessionSummary:
        return self._call(change, timeout)

    def _call(self, message: Any, timeout: float) -> Any:
        """Ask the session; one released from memory meanwhile is restored first."""
        try:
            return _ask(self._info.ref, message, timeout)
        except AgentHostError as error:
            if not self._host._released(error):
                raise
        self._info = self._host.open_session(self.id, timeout=timeout)._info
        return _ask(self._info.ref, message, timeout)

    def __repr__(self) -> str:
        return f"Session({self.id})"


class Chat:
    """A handle on one chat."""

    def __init__(self, session: Session, info: ChatInfo) -> None:
        self.session = session
        self.id = info.chat_id
        self._ref = info.ref

    def _call(self, message: Any, timeout: float) -> Any:
        """Ask the chat; if its session was released from memory, restore it first."""
        try:
            return _ask(self._ref, message, timeout)
        except AgentHostError as error:
            if not self.session._host._released(error):
                raise
        self._ref = self.session._call(GetChat(chat_id=self.id), timeout).ref
        return _ask(self._ref, message, timeout)

    def subscribe(
        self, *, timeout: float = DEFAULT_TIMEOUT, maxsize: int | None = None
    ) -> Subscription:
        """Events of this chat: first a ChatSnapshot, then live events."""
        subscription = self._subscription(maxsize)
        try:
            self._call(Attach(subscription=subscription), timeout)
        except BaseException:
            subscription.close()  # a call that failed leaves nothing attached
            raise
        return subscription

    def _subscription(self, maxsize: int | None) -> Subscription:
        """A new subscription to this chat, not attached yet; closing it detaches it."""
        size = maxsize or self.session._host.services.subscriber_queue_size
        subscription = Subscription(size, session_id=self.session.id, chat_id=self.id)

        def detach(sub: Subscription) -> None:
            with contextlib.suppress(pykka.ActorDeadError):
                self._ref.tell(Detach(subscription=sub))

        subscription._detach = detach
        return subscription

    def send(
        self,
        text: str,
        *,
        client_id: str | None = None,
        turn_id: str | None = None,
        pending_id: str | None = None,
        attachments: Sequence[str | os.PathLike[str]] = (),
        timeout: float = DEFAULT_TIMEOUT,
    ) -> "TurnHandle":
        """Send a message: it starts a turn, or is queued while one runs.

        Admission may refuse it (the outcome is "rejected", with the error) or
        handle it without a turn (a local command: "handled"). `turn_id` and
        `pending_id` are ids the caller chose for the turn or the queue entry.
        `attachments` are text files (UTF-8, at most 1 MiB each) sent with the
        message and kept with its turn.

        Raises:
            AgentHostError: INVALID_ARGUMENT naming an attachment that cannot be read.
        """
        _check_text(text)
        command = SendMessage(
            text=text,
            client_id=client_id,
            turn_id=turn_id,
            pending_id=pending_id,
            attachments=tuple(read_attachment(path) for path in attachments),
        )
        ticket: Ticket = self._call(command, timeout)
        return TurnHandle(ticket)

    def set_draft(self, text: str | None, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Keep an unsent draft with the chat (None or "" clears it)."""
        self._call(SetDraft(text=text), timeout)

    def set_read_only(self, read_only: bool, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """A read-only chat refuses new turns; local commands still work."""
        self._call(SetReadOnly(read_only=read_only), timeout)

    def steer(
        self,
        text: str,
        *,
        client_id: str | None = None,
        pending_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> PendingMessage:
        """Steer the running turn: the provider gets the message at once.

        While no turn runs it is simply a send. Returns the pending entry.

        Raises:
            AgentHostError: admission refused it (an archived session, a
                read-only chat: READ_ONLY).
        """
        _check_text(text)
        command = SteerMessage(text=text, client_id=client_id, pending_id=pending_id)
        reply: SteerReply = self._call(command, timeout)
        settled = reply.ticket is not None and reply.ticket.outcome.done()
        if settled and reply.ticket is not None:
            outcome: TurnOutcome = reply.ticket.outcome.get(timeout=0)
            if outcome.state is OutcomeState.REJECTED and outcome.error is not None:
                raise outcome.error
        return reply.pending

    def remove_pending(
        self, pending_id: str, *, client_id: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> bool:
        """Remove a queued or steering message; returns once the removal is settled.

        Returns True when it was removed (a queued message, steering not yet
        sent, or steering the provider withdrew), False when the model already
        had it: it then stays pending until the model's echo consumes it.

        Raises:
            AgentHostError: NOT_FOUND when it is no longer pending;
                INVALID_ARGUMENT when the provider cannot withdraw steering it holds.
        """
        removal = RemovePendingMessage(pending_id=pending_id, client_id=client_id)
        return bool(self._call(removal, timeout))

    def remove_pending_nowait(self, pending_id: str) -> "Removal":
        """Ask to remove a pending message; `.result(timeout)` waits for the settlement."""
        return Removal(self._ref.ask(RemovePendingMessage(pending_id=pending_id), block=False))

    def edit_pending(
        self, pending_id: str, text: str, *, timeout: float = DEFAULT_TIMEOUT
    ) -> PendingMessage:
        """Change a queued message's text. Steering cannot be edited.

        Raises:
            AgentHostError: NOT_FOUND, or INVALID_ARGUMENT for a steering message.
        """
        _check_text(text)
        return self._call(EditPendingMessage(pending_id=pending_id, text=text), timeout)

    def reorder_queue(
        self, pending_ids: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT
    ) -> tuple[PendingMessage, ...]:
        """Listed ids first, in that order; the rest keep theirs; unknown ids are ignored."""
        return self._call(ReorderQueue(pending_ids=tuple(pending_ids)), timeout)

    def answer(
        self,
        request_id: str,
        approved: bool | None = None,
        answer: str | None = None,
        result: str | None = None,
        *,
        client_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """Answer an open request: `approved` for a permission, `answer` for a
        question, `result` for a client tool (from the client that executes it).

        Raises:
            AgentHostError: NOT_FOUND when it is not open (answered already, or
                its turn ended); INVALID_ARGUMENT for the wrong kind of answer.
        """
        self._call(
            AnswerRequest(
                request_id=request_id,
                approved=approved,
                answer=answer,
                result=result,
                client_id=client_id,
            ),
            timeout,
        )

    def diagnostics(self, *, timeout: float = DEFAULT_TIMEOUT) -> TurnDiagnostics | None:
        """Why the active turn is where it is (None when no turn runs)."""
        return self._call(GetDiagnostics(), timeout)

    def cancel(self, *, timeout: float = DEFAULT_TIMEOUT) -> bool:
        """Cancel the active turn; False when none runs."""
        return bool(self._call(CancelTurn(), timeout))

    def truncate(
        self, turn_id: str | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> ChatState:
        """Keep the turns up to and including `turn_id` (None: drop them all).

        Raises:
            AgentHostError: INVALID_ARGUMENT while a turn runs; NOT_FOUND for an unknown turn.
        """
        return self._call(TruncateChat(turn_id=turn_id), timeout)

    def cancel_nowait(self) -> None:
        """Ask to cancel the active turn without waiting for the answer."""
        try:
            self._ref.tell(CancelTurn())
        except pykka.ActorDeadError as exc:
            raise AgentHostError(
                code=ErrorCode.HOST_STOPPED, message="the host has stopped"
            ) from exc

    def state(self, *, timeout: float = DEFAULT_TIMEOUT) -> ChatState:
        return self._call(GetChatState(), timeout)

    def __repr__(self) -> str:
        return f"Chat({self.id})"


class Removal:
    """A removal in flight; `result()` is what `Chat.remove_pending` returns."""

    def __init__(self, future: pykka.Future[Any]) -> None:
        self._future = future

    def result(self, timeout: float = DEFAULT_TIMEOUT) -> bool:
        return bool(_wait(self._future, timeout, "removal not settled"))


EXPORT_FORMAT = 1


def _new_id() -> str:
    return uuid.uuid4().hex


MAX_ATTACHMENT_BYTES = 1 << 20


def read_attachment(path: str | os.PathLike[str]) -> Attachment:
    """A text file as an attachment (on the caller's thread: the surface's I/O).

    Raises:
        AgentHostError: INVALID_ARGUMENT naming the file: missing, too large, not UTF-8.
    """
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > MAX_ATTACHMENT_BYTES:
            raise AgentHostError(
                code=ErrorCode.INVALID_ARGUMENT,
                message=f"attachment {file}: {size} bytes; at most {MAX_ATTACHMENT_BYTES}",
            )
        return Attachment(name=file.name, text=file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise AgentHostError(
            code=ErrorCode.INVALID_ARGUMENT, message=f"attachment {file}: {error}"
        ) from None


def _check_text(text: object) -> None:
    if not isinstance(text, str):
        raise AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message="text must be a string")


class TurnHandle:
    """A send's handle: `.id` (None while queued), `.pending_id`, `.result(timeout)`."""

    def __init__(self, ticket: Ticket) -> None:
        self._ticket = ticket

    @property
    def id(self) -> str | None:
        return self._ticket.turn_id

    @property
    def pending_id(self) -> str | None:
        return self._ticket.pending_id

    def result(self, timeout: float = DEFAULT_TIMEOUT) -> TurnOutcome:
        """The outcome once the turn ended and was committed.

        Raises:
            TimeoutError: not ended within `timeout`.
        """
        outcome: TurnOutcome = _wait(self._ticket.outcome, timeout, "turn not ended")
        return outcome

    def done(self) -> bool:
        return self._ticket.outcome.done()

    def __await__(self) -> Generator[Any, None, TurnOutcome]:
        from agenthost.actors import aio  # the asyncio side builds on this module

        outcome: TurnOutcome = yield from aio.wait(self._ticket.outcome, None).__await__()
        return outcome


__all__ = ["Chat", "Host", "Session", "TurnHandle"]
