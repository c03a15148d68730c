"""StoreActor: the single writer to the database, on its own thread.

Writes are applied inside an open transaction; the actor commits whenever its
mailbox drains (or after `MAX_BATCH` writes), then sends each write's ack.
So an ack always means "committed", and a burst of writes costs one fsync.
A write the store undid (refused by the database, or fenced because this
shard lost the session's lease: LEASE_LOST) is acked with its error, and the
host hears of fenced sessions (LeasesLost) so it drops them.
"""

from typing import Any

import attrs
import structlog

from agenthost.actors.protocol import (
    ClaimClient,
    CountSessions,
    FindClient,
    FindSession,
    Flush,
    LeasesLost,
    ListSessionPage,
    ListSessionRows,
    LoadProviderRef,
    LoadSession,
    ProviderRefLoaded,
    WatchLeases,
    Write,
    WriteMany,
)
from agenthost.actors.runtime import Actor, handles
from agenthost.actors.threads import ThreadingRuntime
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.state import SessionSummary
from agenthost.store.base import NOTHING_UNDONE, ClientBinding, SessionPage, Store
from agenthost.store.records import SessionRecord, StoreOp

log = structlog.get_logger(__name__)

MAX_BATCH = 2000


def _failed(ack: Any, reason: str | AgentHostError) -> Any:
    """The ack of a write that did not become durable: it carries the error."""
    error = (
        reason
        if isinstance(reason, AgentHostError)
        else AgentHostError(code=ErrorCode.STORE_ERROR, message=f"not stored: {reason}")
    )
    return attrs.evolve(ack, error=error) if attrs.has(type(ack)) else ack


@attrs.define
class _Ack:
    """A write message's ack, and the positions of its writes in the batch."""

    to: Any
    ack: Any
    first: int
    end: int


@attrs.frozen
class OpenStore:
    """Open (lock, check, migrate) the store on the store's own thread; answered
    once open, or with the store's error."""


class StoreActor(Actor):
    """Owns one store. Runs on its own thread whatever the runtime (it does I/O)."""

    own_runtime = ThreadingRuntime()

    def __init__(self, store: Store) -> None:
        super().__init__()
        self._store = store
        self._acks: list[_Ack] = []
        self._uncommitted = 0  # writes in the batch: the next one's position
        self._opened = False
        self._lease_watcher: Any = None

    @handles(OpenStore)
    def _open(self, message: OpenStore) -> None:
        self._store.open()
        self._opened = True

    @handles(Write)
    def _write(self, message: Write) -> None:
        self._apply((message.op,), message.ack_to, message.ack)

    @handles(WriteMany)
    def _write_many(self, message: WriteMany) -> None:
        self._apply(message.ops, message.ack_to, message.ack)

    def _apply(self, ops: tuple[StoreOp, ...], ack_to: Any, ack: Any) -> None:
        for op in ops:
            try:
                self._store.apply(op)
            except self._store.errors as exc:  # this write alone is undone; the ack says so
                log.error("store_write_failed", op=type(op).__name__, exc_info=True)
                ack = _failed(ack, str(exc))
        first = self._uncommitted
        self._uncommitted += len(ops)
        if ack_to is not None:
            self._acks.append(_Ack(ack_to, ack, first, self._uncommitted))
        self._commit_if_drained()

    @handles(WatchLeases)
    def _watch_leases(self, message: WatchLeases) -> None:
        self._lease_watcher = message.host

    @handles(LoadSession)
    def _load(self, message: LoadSession) -> SessionRecord | None:
        if message.acquire and self._store.acquire_lease(message.session_id) is not None:
            self._commit()  # the lease (and the turns it ended) before anyone uses it
        record = self._store.load_session(message.session_id)
        self._commit_if_drained()
        return record

    @handles(LoadProviderRef)
    def _load_provider_ref(self, message: LoadProviderRef) -> None:
        try:
            loaded = ProviderRefLoaded(
                chat_id=message.chat_id, provider_ref=self._store.provider_ref(message.chat_id)
            )
        except self._store.errors as exc:
            log.error("store_read_failed", op="provider_ref", exc_info=True)
            error = AgentHostError(code=ErrorCode.STORE_ERROR, message=f"not read: {exc}")
            loaded = ProviderRefLoaded(chat_id=message.chat_id, provider_ref=None, error=error)
        self._commit_if_drained()
        self.send(message.reply_to, loaded)

    @handles(ListSessionRows)
    def _list(self, message: ListSessionRows) -> list[SessionSummary]:
        rows = self._store.list_sessions()
        self._commit_if_drained()  # it may be what drains the mailbox behind a write
        return rows

    @handles(FindSession)
    def _find_session(self, message: FindSession) -> SessionSummary | None:
        found = self._store.find_session(message.session_id, message.chat_id)
        self._commit_if_drained()
        return found

    @handles(Flush)
    def _flush(self, message: Flush) -> bool:
        self._commit()
        return True

    @handles(ListSessionPage)
    def _list_page(self, message: ListSessionPage) -> SessionPage:
        page = self._store.list_sessions_page(
            owner=message.owner, limit=message.limit, after=message.after
        )
        self._commit_if_drained()
        return page

    @handles(CountSessions)
    def _count(self, message: CountSessions) -> int:
        count = self._store.count_sessions(message.owner)
        self._commit_if_drained()
        return count

    @handles(ClaimClient)
    def _claim_client(self, message: ClaimClient) -> ClientBinding:
        """Claimed and committed (with the batch before it) before it is answered,
        so no restart gives the client id to another identity."""
        binding = self._store.claim_client(message.client_id, message.identity, message.now_ms)
        self._commit()
        return binding

    @handles(FindClient)
    def _find_client(self, message: FindClient) -> ClientBinding | None:
        found = self._store.find_client(message.client_id)
        self._commit_if_drained()
        return found

    def _commit_if_drained(self) -> None:
        if self._uncommitted >= MAX_BATCH or self.actor_inbox.empty():
            self._commit()

    def _commit(self) -> None:
        """Commit the batch and ack it. A commit that fails is rolled back and every
        write in it is acked with the error: nothing is acked that is not durable.
        A write the commit undid alone (its report) is acked with its own error."""
        acks, self._acks = self._acks, []
        try:
            report = self._store.commit() or NOTHING_UNDONE
        except self._store.errors as exc:
            log.error("store_commit_failed", exc_info=True)
            self._store.rollback()
            acks = [attrs.evolve(a, ack=_failed(a.ack, str(exc))) for a in acks]
            report = NOTHING_UNDONE
        self._uncommitted = 0
        failed = report.failed
        for a in acks:
            if failed:
                error = next((failed[i] for i in range(a.first, a.end) if i in failed), None)
                if error is not None:
                    a.ack = _failed(a.ack, error)
            self.send(a.to, a.ack)
        if report.fenced and self._lease_watcher is not None:
            self.send(self._lease_watcher, LeasesLost(session_ids=tuple(sorted(report.fenced))))

    def on_stop(self) -> None:
        if self._opened:
            self._commit()
            self._store.close()

    def on_failure(self, *exc_info: Any) -> None:
        if self._opened:
            self._store.close()
