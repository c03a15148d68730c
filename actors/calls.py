"""What the public surface does, written once for its sync and asyncio sides.

Each operation is a generator that yields `Ask`s (a message for an actor) and
is sent back each reply (or thrown its error); its return value is the
operation's result. `run_sync` drives one on the caller's thread,
`run_async` on an asyncio loop without blocking it (replies arrive through
the loop's `call_soon_threadsafe`, one wake-up per burst, never through an
executor). Both apply one deadline to the whole operation, wait out a
deferred reply (a reply that is itself a future) within it, raise the
built-in TimeoutError past it, and turn a dead actor into `AgentHostError`
HOST_STOPPED.

The handles (`SessionHandle`, `ChatHandle`) are what a surface object holds:
an id and the ref of the actor that is its session or chat now. A session
released from memory is restored on use: an ask that finds its actor gone
(and the host running) opens the session again and asks once more.
"""

import asyncio
import contextlib
import os
import time
import weakref
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pykka

from agenthost.actors.chat import SteerReply
from agenthost.actors.chat_core import Attach, Detach
from agenthost.actors.context import Services
from agenthost.actors.deadlines import Deadlines
from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.handles import Subscription, Ticket
from agenthost.actors.limits import (
    HostLimits,
    check_attachment,
    check_attachment_count,
    too_large,
)
from agenthost.actors.limits import check_text as check_message_text
from agenthost.actors.protocol import (
    AdoptSession,
    GetChat,
    GetCounters,
    ImportRecord,
    ListChats,
    LoadSession,
    Ref,
)
from agenthost.actors.worktree import CreateWorktree, RemoveWorktree
from agenthost.messages.commands import (
    CreateChat,
    CreateSession,
    DisposeSession,
    OutcomeState,
    SendMessage,
    SetSessionFlags,
    SteerMessage,
    TurnOutcome,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.ids import new_id
from agenthost.messages.state import Attachment, PendingMessage, Worktree
from agenthost.messages.wire import from_wire, to_wire
from agenthost.providers.base import LoopCalls
from agenthost.store.records import SessionRecord, fork_record

T = TypeVar("T")

HOST_STOPPED = "the host has stopped"


@attrs.frozen
class Ask:
    """A step of an operation: ask `ref` this message."""

    ref: Ref
    message: Any


Call = Generator[Ask, Any, T]


@attrs.define(eq=False)
class HostCore:
    """What every surface object of one host shares."""

    services: Services
    stopped: bool = False

    @property
    def host_ref(self) -> Ref:
        if self.stopped or self.services.host is None:
            raise AgentHostError(code=ErrorCode.HOST_STOPPED, message=HOST_STOPPED)
        return self.services.host

    @property
    def store_ref(self) -> Ref:
        return self.services.store

    def released(self, error: AgentHostError) -> bool:
        """Whether an ask failed because its session left memory (restore it and
        ask again), not because the host stopped."""
        return error.code is ErrorCode.HOST_STOPPED and not self.stopped


@attrs.define(eq=False)
class SessionHandle:
    core: HostCore
    session_id: str
    ref: Ref


@attrs.define(eq=False)
class ChatHandle:
    session: SessionHandle
    chat_id: str
    ref: Ref


# -- operations every surface shares ------------------------------------------------------
def load(core: HostCore, session_id: str) -> Call[SessionRecord]:
    record: SessionRecord | None = yield Ask(core.store_ref, LoadSession(session_id=session_id))
    if record is None:
        raise AgentHostError(code=ErrorCode.NOT_FOUND, message=f"no session {session_id}")
    return record


def open_session(core: HostCore, session_id: str) -> Call[Any]:
    """The session's SessionInfo, restored from the store if it is not resident
    (a shard takes its lease first: store/leases.py)."""
    query = LoadSession(session_id=session_id, acquire=True)
    record: SessionRecord | None = yield Ask(core.store_ref, query)
    if record is None:
        raise AgentHostError(code=ErrorCode.NOT_FOUND, message=f"no session {session_id}")
    return (yield Ask(core.host_ref, AdoptSession(record=record)))


def session_call(session: SessionHandle, message: Any) -> Call[Any]:
    """Ask the session; one released from memory meanwhile is restored first."""
    try:
        return (yield Ask(session.ref, message))
    except AgentHostError as error:
        if not session.core.released(error):
            raise
    info = yield from open_session(session.core, session.session_id)
    session.ref = info.ref
    return (yield Ask(session.ref, message))


def chat_call(chat: ChatHandle, message: Any) -> Call[Any]:
    """Ask the chat; if its session was released from memory, restore it first."""
    try:
        return (yield Ask(chat.ref, message))
    except AgentHostError as error:
        if not chat.session.core.released(error):
            raise
    info = yield from session_call(chat.session, GetChat(chat_id=chat.chat_id))
    chat.ref = info.ref
    return (yield Ask(chat.ref, message))


def ask(ref: Ref, message: Any) -> Call[Any]:
    return (yield Ask(ref, message))


# -- the drivers ---------------------------------------------------------------------------
def _timed_out(step: Ask, timeout: float) -> TimeoutError:
    return TimeoutError(f"no reply to {type(step.message).__name__} within {timeout} s")


def _stopped() -> AgentHostError:
    return AgentHostError(code=ErrorCode.HOST_STOPPED, message=HOST_STOPPED)


def wait_sync(future: pykka.Future[Any], timeout: float, waiting_for: str) -> Any:
    """Wait on an actor's reply from the caller's thread; a deferred reply (a
    future) is awaited too, within the same `timeout`.

    Raises:
        TimeoutError: naming `waiting_for`, past `timeout`.
        AgentHostError: HOST_STOPPED if the actor died.
    """
    deadline = time.monotonic() + timeout
    try:
        reply = future.get(timeout=timeout)
        while isinstance(reply, pykka.Future):
            reply = reply.get(timeout=max(deadline - time.monotonic(), 0.0))
    except pykka.Timeout as exc:
        raise TimeoutError(f"{waiting_for} within {timeout} s") from exc
    except pykka.ActorDeadError as exc:
        raise _stopped() from exc
    return reply


def run_sync(call: Call[T], timeout: float) -> T:
    """Run an operation on the caller's thread, all of it within `timeout`."""
    deadline = time.monotonic() + timeout
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = call.send(reply) if error is None else call.throw(error)
        except StopIteration as done:
            return done.value
        reply, error = None, None
        left = max(deadline - time.monotonic(), 0.0)
        try:
            future = step.ref.ask(step.message, block=False)
            reply = wait_sync(future, left, f"no reply to {type(step.message).__name__}")
        except TimeoutError:
            error = _timed_out(step, timeout)
        except Exception as exc:
            error = exc


async def run_async(call: Call[T], timeout: float | None) -> T:
    """Run an operation on the running asyncio loop, all of it within `timeout`
    (None: no limit), never blocking the loop's thread."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = call.send(reply) if error is None else call.throw(error)
        except StopIteration as done:
            return done.value
        reply, error = None, None
        try:
            future: Any = step.ref.ask(step.message, block=False)
            while isinstance(future, RuntimeFuture):
                left = None if deadline is None else max(deadline - loop.time(), 0.0)
                future = await wait(future, left)
            reply = future
        except TimeoutError:
            error = _timed_out(step, timeout or 0.0)
        except Exception as exc:
            error = exc


def _deliver(done: "asyncio.Future[Any]", future: RuntimeFuture) -> None:
    """(On the loop.) Hand a runtime future's outcome to the asyncio future."""
    if done.done():
        return
    try:
        done.set_result(future.get(timeout=0))
    except pykka.ActorDeadError:
        done.set_exception(_stopped())
    except BaseException as exc:
        done.set_exception(exc)


async def wait(future: RuntimeFuture, timeout: float | None) -> Any:
    """Await a runtime future from asyncio (None: no time limit).

    Raises:
        TimeoutError: not set within `timeout`.
        AgentHostError: HOST_STOPPED if the actor died.
    """
    if future.done():
        try:
            return future.get(timeout=0)
        except pykka.ActorDeadError:
            raise _stopped() from None
    loop = asyncio.get_running_loop()
    calls, deadlines = _loop_parts(loop)
    done: asyncio.Future[Any] = loop.create_future()

    def transfer(f: RuntimeFuture) -> None:
        try:  # (not contextlib.suppress: this runs for every reply)
            calls.call(_deliver, done, f)
        except RuntimeError:  # the awaiting loop is closed
            return

    future.add_done_callback(transfer)
    if timeout is None:
        return await done
    expiry = deadlines.add(done, timeout)
    try:
        return await done
    finally:
        expiry.discard(done)


_last_loop: tuple["weakref.ref[asyncio.AbstractEventLoop]", LoopCalls, Deadlines] | None = None


def _loop_parts(loop: asyncio.AbstractEventLoop) -> tuple[LoopCalls, Deadlines]:
    """The loop's LoopCalls and Deadlines (the last loop's without a lookup: a
    client waits on one loop, thousands of times a second)."""
    global _last_loop
    last = _last_loop
    if last is not None and last[0]() is loop:
        return last[1], last[2]
    parts = LoopCalls.of(loop), Deadlines.of(loop)
    _last_loop = (weakref.ref(loop), *parts)
    return parts


def config_values(model: str | None, instructions: str | None) -> Mapping[str, str]:
    """Session config from create_session's keyword arguments (unset ones left out)."""
    values = {"model": model or "", "instructions": instructions or ""}
    return {key: value for key, value in values.items() if value}


# -- the operations of Host, Session and Chat -----------------------------------------------
def create_session(
    core: HostCore,
    provider: str,
    worktree_of: str | None,
    session_id: str | None,
    config: Mapping[str, str],
) -> Call[SessionHandle]:
    session_id = session_id or new_id()
    worktree = None
    if worktree_of is not None:
        assert core.services.worktrees is not None
        worktree = yield Ask(
            core.services.worktrees, CreateWorktree(repo=worktree_of, session_id=session_id)
        )
    info = yield Ask(
        core.host_ref,
        CreateSession(provider=provider, session_id=session_id, worktree=worktree),
    )
    session = SessionHandle(core, info.session_id, info.ref)
    if config:
        yield from session_call(session, SetSessionFlags(config=tuple(sorted(config.items()))))
    return session


def adopt(core: HostCore, session_id: str) -> Call[SessionHandle]:
    info = yield from open_session(core, session_id)
    return SessionHandle(core, info.session_id, info.ref)


def export_session(core: HostCore, session_id: str) -> Call[dict[str, Any]]:
    record = yield from load(core, session_id)
    return {"agenthost": EXPORT_FORMAT, "session": to_wire(record)}


def import_session(core: HostCore, data: Mapping[str, Any]) -> Call[SessionHandle]:
    if not isinstance(data, Mapping) or data.get("agenthost") != EXPORT_FORMAT:
        raise AgentHostError(
            code=ErrorCode.INVALID_ARGUMENT,
            message=f"not an agenthost session export (format {EXPORT_FORMAT})",
        )
    record = from_wire(data.get("session"), SessionRecord)
    if (yield Ask(core.store_ref, LoadSession(session_id=record.session_id))):
        raise AgentHostError(
            code=ErrorCode.INVALID_ARGUMENT,
            message=f"this store already has session {record.session_id}",
        )
    info = yield Ask(core.host_ref, ImportRecord(record=record))
    return SessionHandle(core, info.session_id, info.ref)


def counters(core: HostCore) -> Call[dict[str, int]]:
    assert core.services.supervisor is not None
    host = yield Ask(core.host_ref, GetCounters())
    supervisor = yield Ask(core.services.supervisor, GetCounters())
    return {**host, **supervisor}


def fork(session: SessionHandle, turn_id: str) -> Call[SessionHandle]:
    core = session.core
    record = yield from load(core, session.session_id)
    forked = fork_record(record, turn_id, new_id(), new_id)
    info = yield Ask(core.host_ref, ImportRecord(record=forked))
    return SessionHandle(core, info.session_id, info.ref)


def dispose(session: SessionHandle, force: bool) -> Call[None]:
    core = session.core
    record = yield from load(core, session.session_id)
    if record.worktree is not None:
        assert core.services.worktrees is not None
        yield Ask(
            core.services.worktrees,
            RemoveWorktree(worktree=record.worktree, session_id=session.session_id, force=force),
        )
    yield Ask(core.host_ref, DisposeSession(session_id=session.session_id))


def worktree(session: SessionHandle) -> Call[Worktree | None]:
    record = yield from load(session.core, session.session_id)
    return record.worktree


def chat(session: SessionHandle, chat_id: str | None) -> Call[ChatHandle]:
    info = yield from session_call(session, GetChat(chat_id=chat_id))
    return ChatHandle(session, info.chat_id, info.ref)


def chats(session: SessionHandle) -> Call[list[ChatHandle]]:
    infos = yield from session_call(session, ListChats())
    return [ChatHandle(session, info.chat_id, info.ref) for info in infos]


def create_chat(session: SessionHandle) -> Call[ChatHandle]:
    info = yield from session_call(session, CreateChat())
    return ChatHandle(session, info.chat_id, info.ref)


def subscribe(
    chat: ChatHandle,
    maxsize: int | None,
    keep_state: bool = False,
    max_bytes: int | None = None,
) -> Call[Subscription]:
    """A subscription (first a snapshot, then live events); a call that fails
    leaves nothing attached."""
    services = chat.session.core.services
    subscription = Subscription(
        maxsize or services.subscriber_queue_size,
        session_id=chat.session.session_id,
        chat_id=chat.chat_id,
        max_bytes=max_bytes or services.limits.subscriber_queue_bytes,
        keep_state=keep_state,
    )

    def detach(sub: Subscription) -> None:
        with contextlib.suppress(pykka.ActorDeadError):
            chat.ref.tell(Detach(subscription=sub))

    subscription._detach = detach
    try:
        yield from chat_call(chat, Attach(subscription=subscription))
    except BaseException:
        subscription.close()
        raise
    return subscription


def send(
    chat: ChatHandle,
    text: str,
    client_id: str | None,
    turn_id: str | None,
    pending_id: str | None,
    attachments: Sequence[str | os.PathLike[str]],
) -> Call[Ticket]:
    limits = chat.session.core.services.limits
    check_text(text, limits)
    read: tuple[Attachment, ...] = ()
    if attachments:
        paths = tuple(attachments)
        check_attachment_count(limits, len(paths))
        read = tuple([read_attachment(path, limits.attachment_bytes) for path in paths])
        for attachment in read:
            check_attachment(limits, attachment)
    command = SendMessage(
        text=text,
        client_id=client_id,
        turn_id=turn_id,
        pending_id=pending_id,
        attachments=read,
    )
    ticket: Ticket = yield from chat_call(chat, command)
    return ticket


def steer(
    chat: ChatHandle, text: str, client_id: str | None, pending_id: str | None
) -> Call[PendingMessage]:
    check_text(text, chat.session.core.services.limits)
    command = SteerMessage(text=text, client_id=client_id, pending_id=pending_id)
    reply: SteerReply = yield from chat_call(chat, command)
    if reply.ticket is not None and reply.ticket.outcome.done():
        outcome: TurnOutcome = reply.ticket.outcome.get(timeout=0)
        if outcome.state is OutcomeState.REJECTED and outcome.error is not None:
            raise outcome.error
    return reply.pending


EXPORT_FORMAT = 1
MAX_ATTACHMENT_BYTES = 1 << 20


def read_attachment(
    path: str | os.PathLike[str], max_bytes: int = MAX_ATTACHMENT_BYTES
) -> Attachment:
    """A text file as an attachment (on the caller's thread: the surface's I/O).

    Raises:
        AgentHostError: TOO_LARGE for a file over `max_bytes` (not read);
            INVALID_ARGUMENT naming the file: missing, not UTF-8.
    """
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > max_bytes:
            raise too_large(f"attachment {file}", size, max_bytes, "attachment_bytes")
        return Attachment(name=file.name, text=file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise AgentHostError(
            code=ErrorCode.INVALID_ARGUMENT, message=f"attachment {file}: {error}"
        ) from None


def check_text(text: object, limits: HostLimits | None = None) -> None:
    """A message's text: a string, within `limits` (HostLimits.message_bytes).

    Raises:
        AgentHostError: INVALID_ARGUMENT for a value that is not a string,
            TOO_LARGE for one over the limit.
    """
    if not isinstance(text, str):
        raise AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message="text must be a string")
    if limits is not None:
        check_message_text(limits, text)
