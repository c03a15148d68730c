"""SessionActor: one live session: its chats and its provider binding.

It starts a ChatActor per chat (children stop in reverse order with it) and
tells the host once every chat's provider session is open (SessionReady),
or that one failed to open, with the provider's error.

Idle release and draft GC (DESIGN.md rule 4). A session nobody watches is
idle once its chats are: after `idle_release_s` of it (`draft_gc_s` while it
is an unused draft) it asks its chats, which re-check (nothing running,
watched or waited on, idle that long: a refusal says since when), and leaves
memory (or, a draft, is deleted) only if all agree. Its timer is lazy: armed
once when it first goes idle, and when it fires early armed again for what is
left; a timer due later than the idle period allows (armed for `draft_gc_s`
while an unused draft) fires sooner once the session is used. Chats do not
report their turns: the session hears a chat's status only once it asked
(ReportStatus: its first summary or status, or from the start while the host
bounds resident sessions, when the host hears of idle and busy to release
the least recently used), and a chat's first turn (a draft is used from then
on). So a turn costs the session no message and no timer.

Its entry lists its customizations (actors/contributions/customizations.py):
the contributions that run for it and its chats are the host's less those it
turned off, resolved when that list changes, never per action.
"""

from collections.abc import Callable
from typing import Any

import attrs
import structlog

from agenthost.actors.chat import ChatActor
from agenthost.actors.client_tools import client_set, tool_owners
from agenthost.actors.clock import TimerHandle
from agenthost.actors.context import Services
from agenthost.actors.contributions import ChatKey, Dispatch, Dispatcher
from agenthost.actors.contributions.customizations import customizations, disabled, toggled
from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.hosted import HostedActor
from agenthost.actors.protocol import (
    ApplySessionAction,
    ChatReady,
    ChatStatusChanged,
    ClientRemoved,
    ClientToolsChanged,
    GetChat,
    IdleTimerFired,
    ListChats,
    PrepareRelease,
    Ref,
    ReleaseAborted,
    ReleaseIfIdle,
    ReleaseVote,
    ReportStatus,
    SessionActivity,
    SessionReady,
    SessionReleased,
    SessionStateChanged,
    SpawnSubagentChat,
    SubagentChatStarted,
    SubscribersChanged,
    Write,
)
from agenthost.actors.runtime import handles
from agenthost.actors.session_entry import flag_actions
from agenthost.actors.worktree import RemoveWorktree
from agenthost.messages.commands import (
    CreateChat,
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
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    ActiveClientRemoved,
    SessionEvent,
)
from agenthost.messages.ids import new_id
from agenthost.messages.reducers import reduce_session
from agenthost.messages.state import (
    ChatOrigin,
    ChatOriginKind,
    ChatState,
    ChatStatus,
    ChatSummary,
    SessionState,
    SessionSummary,
    Worktree,
    chat_resource,
)
from agenthost.store.records import DeleteChat, DeleteSession, SaveChat

log = structlog.get_logger(__name__)

_IN_PROGRESS = int(ChatStatus.IN_PROGRESS)


@attrs.frozen
class ChatInfo:
    chat_id: str
    ref: Ref


class SessionActor(HostedActor):
    def __init__(
        self,
        services: Services,
        *,
        session_id: str,
        provider: str,
        chats: tuple[ChatState, ...],
        chat_ids: tuple[str, ...],
        restored: bool,
        used: bool = False,
        worktree: Worktree | None = None,
        state: SessionState | None = None,
        read_only: tuple[str, ...] = (),
        created_at: int = 0,
        resumed: tuple[str, ...] = (),
    ) -> None:
        super().__init__(services)
        self.session_id = session_id
        self.provider = provider
        # The chats whose provider session is resumed: all of them (None) in a
        # restored session; in a new one, those imported with their provider's
        # reference.
        self._resume: frozenset[str] | None = None if restored else frozenset(resumed)
        self.created_at = created_at
        entry = state or SessionState()
        # The contributions, as its customizations, with the decisions it was stored with.
        # (services.contributions, not a 30th attribute: tests/actors/test_memory.py)
        listed = customizations(services.contributions, entry.customizations)
        self._entry = attrs.evolve(entry, active_clients=(), customizations=listed)
        self._read_only = set(read_only)
        self._default_chat = chat_ids[0] if chat_ids else ""
        self._turns: dict[str, int] = {
            c: len(s.turns) for c, s in zip(chat_ids, chats, strict=True)
        }
        self._bytes: dict[str, int] = {}  # each chat's history, while the host bounds it
        self._contributions: Dispatcher = services.contributions.without(disabled(listed))
        self._initial = tuple(zip(chat_ids, chats, strict=True))
        self._chats: dict[str, Ref] = {}
        self._waiting: set[str] = set(chat_ids)
        self._statuses: dict[str, int] = {}
        self._subscribers: dict[str, int] = {}
        self._asked = _StatusAsked(reporting=services.lifecycle.bounded)
        # Created here and never used: the only kind of session GC may ever take.
        # Latches off for good (DESIGN.md rule 4).
        self._unused_draft = not restored and not used
        self._reported: SessionActivity | None = None
        self._idle_since: float | None = None  # on the clock: idle since then
        self._timer: TimerHandle | None = None
        self.worktree = worktree
        self._release_asked: _ReleaseAsked | None = None  # the chats are voting
        self._log = log.bind(session_id=session_id)

    def on_start(self) -> None:
        self.services.directory.register(self.session_id, self.actor_ref)
        self.services.entries.publish(self.session_id, self._entry)
        for chat_id, state in self._initial:
            self._start_chat(chat_id, state)
        self._initial = ()
        self._report()

    # -- idle release and draft GC ------------------------------------------------------
    def _active(self) -> bool:
        """A turn runs, as far as the session knows (only chats that report say;
        a release asks every chat anyway)."""
        # Plain ints: building an IntFlag per check cost more than the rest of it.
        return self._asked.reporting and any(s & _IN_PROGRESS for s in self._statuses.values())

    def _watched(self) -> bool:
        return any(count > 0 for count in self._subscribers.values())

    def _report(self) -> None:
        """The facts idle release depends on may have changed."""
        busy = self._watched() or self._active()
        if busy:
            self._idle_since = None  # the timer, if armed, finds it busy and waits
        elif self._idle_since is None:
            self._idle_since = self.services.clock.now()
            if self._timer is None:
                self._arm(self._idle_period())
        self._sooner_if_due_later()
        if not self.services.lifecycle.bounded:
            return
        activity = SessionActivity(
            session_id=self.session_id,
            watched=self._watched(),
            active=self._active(),
            unused_draft=self._unused_draft,
            history_bytes=sum(self._bytes.values()),
        )
        if _idle_facts(activity) != _idle_facts(self._reported):
            self._reported = activity
            self.send(self.services.host, activity)

    def _sooner_if_due_later(self) -> None:
        """A timer due later than this idle period allows (armed for draft_gc_s
        while an unused draft, when idle_release_s is shorter) fires sooner."""
        timer = self._timer
        if timer is None or self._idle_since is None:
            return
        due = self._idle_since + self._idle_period()
        if timer.due > due:
            timer.cancel()
            self._arm(max(due - self.services.clock.now(), 0.0))

    def _idle_period(self) -> float:
        lifecycle = self.services.lifecycle
        return lifecycle.draft_gc_s if self._unused_draft else lifecycle.idle_release_s

    def _arm(self, delay: float) -> None:
        fired = IdleTimerFired(session_id=self.session_id)

        def fire() -> None:
            self.send(self.actor_ref, fired)

        self._timer = self.services.clock.call_later(delay, fire)

    @handles(IdleTimerFired)
    def _timer_fired(self, message: IdleTimerFired) -> None:
        """Release once idle for the whole period (re-checked now, not as it was
        when the timer was armed); if it went busy since, wait for the next idle."""
        self._timer = None
        if self._idle_since is None:
            return  # busy: armed again when it is next idle
        left = self._idle_since + self._idle_period() - self.services.clock.now()
        if left > 0:
            self._arm(left)
            return
        self._release(collect=True, idle_for=self._idle_period())

    @handles(SubscribersChanged)
    def _subscribers_changed(self, message: SubscribersChanged) -> None:
        self._subscribers[message.chat_id] = message.count
        self._report()

    @handles(ReleaseIfIdle)
    def _release_if_idle(self, message: ReleaseIfIdle) -> None:
        """The host bounds resident sessions and this is among the least recently used."""
        self._release(collect=message.collect)

    def _release(self, collect: bool, idle_for: float = 0.0) -> None:
        """Re-check every condition now, then ask every chat (which may have
        accepted a command the session has not heard of yet, and knows since when
        it is idle); only if all agree does the session go (deleted, `collect`, if
        it is still an unused draft)."""
        if self._watched() or self._active() or self._release_asked is not None:
            return
        asked = self._release_asked = _ReleaseAsked(
            votes=set(self._chats), collect=collect and self._unused_draft
        )
        for ref in self._chats.values():
            self.send(ref, PrepareRelease(collect=asked.collect, idle_for=idle_for))
        if not asked.votes:
            self._leave()

    @handles(ReleaseVote)
    def _vote(self, message: ReleaseVote) -> None:
        asked = self._release_asked
        if asked is None:
            return
        if not message.ok:
            self._release_asked = None
            self._tell_chats(ReleaseAborted())
            self._reported = None  # the host hears the facts as they are now
            if message.used:
                self._unused_draft = False  # it held turns or messages: latched off for good
            # Idle since the chat says (the timer then fires when the period is up),
            # or, busy, from now on (asked again a period later).
            self._idle_since = message.idle_since
            if message.idle_since is not None and self._timer is None:
                now = self.services.clock.now()
                self._arm(max(message.idle_since + self._idle_period() - now, 0.0))
            self._report()
            return
        asked.votes.discard(message.chat_id)
        if not asked.votes:
            self._leave()

    def _leave(self) -> None:
        asked = self._release_asked
        disposed = asked is not None and asked.collect and self._unused_draft
        if disposed:
            self.send(self.services.store, Write(op=DeleteSession(session_id=self.session_id)))
            if self.worktree is not None and self.services.worktrees is not None:
                # Never forced: a worktree with changes stays (DESIGN.md rule 7).
                self.services.worktrees.ask(
                    RemoveWorktree(worktree=self.worktree, session_id=self.session_id), block=False
                )
            self._log.info("draft_gc_disposed")
        else:
            self._log.info("session_released")
        self.send(
            self.services.host, SessionReleased(session_id=self.session_id, disposed=disposed)
        )
        self.stop()

    def _start_chat(self, chat_id: str, state: ChatState) -> Ref:
        ref = ChatActor.start(
            self.services,
            session_id=self.session_id,
            chat_id=chat_id,
            provider=self.provider,
            state=state,
            session=self.actor_ref,
            resume=self._resume is None or chat_id in self._resume,
            client_tools=tool_owners(self._entry),
            session_state=self._entry,
            default=chat_id == self._default_chat,
            read_only=chat_id in self._read_only,
            report_status=self._asked.reporting,
        )
        self._chats[chat_id] = ref
        self.services.changes.changed(self.session_id)
        return ref

    @handles(SpawnSubagentChat)
    def _spawn(self, message: SpawnSubagentChat) -> None:
        origin = ChatOrigin(
            kind=ChatOriginKind.TOOL,
            chat_id=message.parent_chat_id,
            tool_call_id=message.tool_call_id,
        )
        now = self.services.clock.wall_ms()
        state = ChatState(resource=chat_resource(message.chat_id), modified_at=now, origin=origin)
        ref = self._start_chat(message.chat_id, state)
        self.send(
            self.services.store,
            Write(op=SaveChat(session_id=self.session_id, chat_id=message.chat_id, origin=origin)),
        )
        self.send(message.tracker, SubagentChatStarted(subagent_id=message.subagent_id, ref=ref))

    def on_stop(self) -> None:
        self.services.directory.unregister(self.session_id, self.actor_ref)
        stopped = AgentHostError(code=ErrorCode.HOST_STOPPED, message="The session stopped.")
        for future, _ in self._asked.deferred:
            future.set_exception(exc_info=(AgentHostError, stopped, None))
        self.services.entries.drop(self.session_id)
        if self._timer is not None:
            self._timer.cancel()
        for ref in reversed(list(self._chats.values())):
            if ref.is_alive():
                ref.stop(block=False)

    @handles(ChatReady)
    def _chat_ready(self, message: ChatReady) -> None:
        if message.chat_id not in self._waiting:
            return
        if message.error is not None:
            self._waiting.clear()
            self.send(
                self.services.host, SessionReady(session_id=self.session_id, error=message.error)
            )
            return
        self._waiting.discard(message.chat_id)
        if not self._waiting:
            self.send(self.services.host, SessionReady(session_id=self.session_id))

    def _tell_chats(self, message: object) -> None:
        for ref in self._chats.values():
            self.send(ref, message)

    @handles(SetClientTools)
    def _set_client_tools(self, message: SetClientTools) -> None:
        self._act(client_set(message), message.client_id, from_client=True)
        self._tell_chats(ClientToolsChanged(owners=tool_owners(self._entry)))

    @handles(RemoveClient)
    def _remove_client(self, message: RemoveClient) -> None:
        self._act(ActiveClientRemoved(client_id=message.client_id), None, from_client=False)
        self._tell_chats(ClientToolsChanged(owners=tool_owners(self._entry)))
        self._tell_chats(ClientRemoved(client_id=message.client_id))

    @handles(ChatStatusChanged)
    def _chat_status(self, message: ChatStatusChanged) -> None:
        if self._statuses.get(message.chat_id) != message.status:
            self.services.changes.changed(self.session_id)
        self._statuses[message.chat_id] = message.status
        self._turns[message.chat_id] = message.turns
        self._bytes[message.chat_id] = message.history_bytes
        if message.status & _IN_PROGRESS:
            self._unused_draft = False  # any turn activity latches it off
        self._answered(message.chat_id)
        self._report()

    # -- status, asked for -------------------------------------------------------------
    def _when_known(self, answer: Callable[[], Any]) -> Any:
        """`answer()` once every chat's status is known: at once while chats report,
        else (the first time) after asking them, as a deferred reply."""
        if not self._asked.reporting:
            self._asked.reporting = True
            self._asked.awaiting = set(self._chats)
            self._tell_chats(ReportStatus())
        if not self._asked.awaiting:
            return answer()
        future = RuntimeFuture()
        self._asked.deferred.append((future, answer))
        return future

    def _answered(self, chat_id: str) -> None:
        if chat_id not in self._asked.awaiting:
            return
        self._asked.awaiting.discard(chat_id)
        if self._asked.awaiting:
            return
        deferred, self._asked.deferred = self._asked.deferred, []
        for future, answer in deferred:
            try:
                future.set(answer())
            except Exception:
                future.set_exception()

    # -- the session entry ----------------------------------------------------------------
    def _act(
        self, action: SessionEvent, client_id: str | None, from_client: bool, rejection: str = ""
    ) -> None:
        """Reduce a session action (unless rejected) and tell the contributions."""
        before = self._entry
        action = attrs.evolve(action, session_id=self.session_id)
        if not rejection:
            self._entry = reduce_session(before, action, self.services.clock.wall_ms())
            if self._entry.customizations is not before.customizations:
                turned_off = disabled(self._entry.customizations)
                self._contributions = self.services.contributions.without(turned_off)
        self._contributions.action_done(
            Dispatch(
                chat=ChatKey(session_id=self.session_id),
                action=action,
                from_client=from_client,
                client_id=client_id,
                before=before,
                state=self._entry,
                session=self._entry,
                rejection=rejection or None,
            )
        )
        if self._entry != before:
            self.services.entries.publish(self.session_id, self._entry)
            self._tell_chats(SessionStateChanged(state=self._entry))
            self.services.changes.changed(self.session_id)

    @handles(ApplySessionAction)
    def _apply_action(self, message: ApplySessionAction) -> None:
        if message.action.session_id in ("", self.session_id):
            self._act(message.action, client_id=None, from_client=False)

    @handles(SetSessionFlags)
    def _set_flags(self, message: SetSessionFlags) -> SessionSummary:
        """A client's change to the entry: each field is one session action."""
        for action, rejection in flag_actions(message):
            self._act(action, message.client_id, from_client=True, rejection=rejection)
            if rejection:
                raise AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message=rejection)
        return self._when_known(self._summary)

    @handles(ToggleCustomization)
    def _toggle(self, message: ToggleCustomization) -> SessionEvent:
        """A client's toggle: applied as the host normalizes it, or refused."""
        try:
            action = toggled(self._entry.customizations, message.action)
        except AgentHostError as error:
            self._act(message.action, message.client_id, from_client=True, rejection=error.message)
            raise
        self._act(action, message.client_id, from_client=True)
        return action

    @handles(GetSessionState)
    def _get_state(self, message: GetSessionState) -> SessionState:
        return self._entry

    @handles(GetSessionSummary)
    def _get_summary(self, message: GetSessionSummary) -> SessionSummary:
        return self._when_known(self._summary)

    @handles(GetSessionView)
    def _get_view(self, message: GetSessionView) -> GetSessionViewReply:
        return self._when_known(self._view)

    def _view(self) -> GetSessionViewReply:
        chats = tuple(
            ChatSummary(resource=chat_resource(c), status=ChatStatus(self._statuses.get(c, 1)))
            for c in self._chats
        )
        entry, default = self._entry, self._default_chat
        return GetSessionViewReply(
            entry=entry, summary=self._summary(), chats=chats, default_chat=default
        )

    def _summary(self) -> SessionSummary:
        entry = self._entry
        return SessionSummary(
            id=self.session_id,
            title=entry.title,
            provider=self.provider,
            turn_count=sum(self._turns.values()),
            created_at=self.created_at,
            status=self._aggregate_status(),
            unread=not entry.read,
            archived=entry.archived,
            input_needed=bool(entry.input_needed),
            config=entry.config,
        )

    # -- chats ---------------------------------------------------------------------------
    @handles(CreateChat)
    def _create_chat(self, message: CreateChat) -> ChatInfo:
        chat_id = new_id()
        now = self.services.clock.wall_ms()
        self.send(
            self.services.store,
            Write(op=SaveChat(session_id=self.session_id, chat_id=chat_id, origin=ChatOrigin())),
        )
        ref = self._start_chat(chat_id, ChatState(resource=chat_resource(chat_id), modified_at=now))
        self._unused_draft = False
        self._report()
        return ChatInfo(chat_id=chat_id, ref=ref)

    @handles(DisposeChat)
    def _dispose_chat(self, message: DisposeChat) -> None:
        """Delete a chat: its actors, its rows, its mementos."""
        if message.chat_id == self._default_chat:
            raise AgentHostError(
                code=ErrorCode.INVALID_ARGUMENT,
                message="The default chat goes only with its session: dispose the session.",
            )
        ref = self._chats.pop(message.chat_id, None)
        if ref is None:
            raise AgentHostError(
                code=ErrorCode.NOT_FOUND,
                message=f"session {self.session_id} has no chat {message.chat_id}",
            )
        ref.stop(block=False)
        for table in (self._statuses, self._subscribers, self._turns, self._bytes):
            table.pop(message.chat_id, None)
        self._answered(message.chat_id)
        self.send(self.services.store, Write(op=DeleteChat(chat_id=message.chat_id)))
        self.services.mementos.evict_chat(self.session_id, message.chat_id)
        self._log.info("chat_disposed", chat_id=message.chat_id)
        self.services.changes.changed(self.session_id)
        self._report()

    @handles(GetSessionStatus)
    def _status(self, message: GetSessionStatus) -> ChatStatus:
        return self._when_known(self._aggregate_status)

    def _aggregate_status(self) -> ChatStatus:
        """Input-needed if any chat waits on the user, else in progress if any runs."""
        statuses = [ChatStatus(s) for s in self._statuses.values()]
        for wanted in (ChatStatus.INPUT_NEEDED, ChatStatus.IN_PROGRESS, ChatStatus.ERROR):
            if any(s & wanted == wanted for s in statuses):
                return wanted
        return ChatStatus.IDLE

    @handles(ListChats)
    def _list_chats(self, message: ListChats) -> tuple[ChatInfo, ...]:
        return tuple(ChatInfo(chat_id=chat_id, ref=ref) for chat_id, ref in self._chats.items())

    @handles(GetChat)
    def _get_chat(self, message: GetChat) -> ChatInfo:
        chat_id = message.chat_id or next(iter(self._chats))
        ref = self._chats.get(chat_id)
        if ref is None:
            raise AgentHostError(
                code=ErrorCode.NOT_FOUND, message=f"session {self.session_id} has no chat {chat_id}"
            )
        return ChatInfo(chat_id=chat_id, ref=ref)


@attrs.define
class _ReleaseAsked:
    """A release the chats are voting on: those yet to agree; `collect`: a deletion."""

    votes: set[str]
    collect: bool


@attrs.define
class _StatusAsked:
    """Chats report every status change only once asked (ReportStatus): when the
    host bounds residents (it hears idle and busy), or from the first summary
    on. `awaiting`: chats asked, not yet answered; `deferred`: replies waiting
    for them."""

    reporting: bool
    awaiting: set[str] = attrs.field(factory=set)
    deferred: list[tuple[RuntimeFuture, Callable[[], Any]]] = attrs.field(factory=list)


def _idle_facts(activity: SessionActivity | None) -> tuple[bool, bool] | None:
    """What idle release and draft GC depend on: busy (watched or a turn runs),
    and an unused draft."""
    if activity is None:
        return None
    return (activity.watched or activity.active, activity.unused_draft)
