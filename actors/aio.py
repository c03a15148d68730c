"""The asyncio side of the surface: await actor replies without blocking the loop.

pykka futures are awaitable, but awaiting one blocks the event loop. Here a
reply future's done callback hands the result to the loop (through one
LoopCalls per loop: a burst of replies wakes it once), so any number of chats
can wait on one loop thread.

`AsyncHost`, `AsyncSession` and `AsyncChat` mirror the sync surface: every
method of Host, Session and Chat is awaitable (a call that waits runs on an
executor thread, never on the loop), results that are hosts, sessions or
chats come back wrapped, subscriptions are async iterables and turn handles
are awaitable:

    host = await AsyncHost.start(store=SqliteStore(path))
    chat = await (await host.create_session()).chat()
    async for event in await chat.subscribe(): ...
    outcome = await (await chat.send("hello"))
"""

import asyncio
import concurrent.futures
import contextlib
import functools
import time
from collections.abc import Callable
from typing import Any, cast

import pykka

from agenthost.actors.chat import Attach
from agenthost.actors.futures import RuntimeFuture
from agenthost.actors.handles import Subscription, Ticket
from agenthost.actors.protocol import AdoptSession, FindSession, GetChat, LoadSession
from agenthost.actors.surface import DEFAULT_TIMEOUT, Chat, Host, Session, _check_text
from agenthost.messages.commands import CreateSession, GetSessionSummary, SendMessage, TurnOutcome
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.state import SessionSummary
from agenthost.providers.base import LoopCalls


def _ask(ref: "pykka.ActorRef[Any]", message: Any) -> RuntimeFuture:
    """Every agenthost actor's ask future is a RuntimeFuture (Actor._create_future)."""
    return cast(RuntimeFuture, ref.ask(message, block=False))


async def wait(future: RuntimeFuture, timeout: float | None = DEFAULT_TIMEOUT) -> Any:
    """Await a runtime future from asyncio (None: no time limit); a deferred reply
    (a future) is awaited too.

    Raises:
        TimeoutError: not set within `timeout`.
        AgentHostError: HOST_STOPPED if the actor died.
    """
    loop = asyncio.get_running_loop()
    calls = LoopCalls.of(loop)
    done: asyncio.Future[Any] = loop.create_future()

    def transfer(f: RuntimeFuture) -> None:
        def apply() -> None:
            if done.done():
                return
            try:
                done.set_result(f.get(timeout=0))
            except pykka.ActorDeadError:
                done.set_exception(
                    AgentHostError(code=ErrorCode.HOST_STOPPED, message="the host has stopped")
                )
            except BaseException as exc:
                done.set_exception(exc)

        with contextlib.suppress(RuntimeError):  # the awaiting loop is closed
            calls.call(apply)

    future.add_done_callback(transfer)
    async with asyncio.timeout(timeout):  # one timer, no task or future of its own
        result = await done
    if isinstance(result, RuntimeFuture):
        return await wait(result, timeout)
    return result


async def create_session(
    host: Host, provider: str = "scripted", *, timeout: float = DEFAULT_TIMEOUT
) -> Session:
    info = await wait(_ask(host._host_ref, CreateSession(provider=provider)), timeout)
    return Session(host, info)


async def open_session(host: Host, session_id: str, *, timeout: float = DEFAULT_TIMEOUT) -> Session:
    """`Host.open_session`: the session, restored from the store if it is not resident.

    Raises:
        AgentHostError: NOT_FOUND for an unknown id.
    """
    deadline = time.monotonic() + timeout
    record = await wait(_ask(host.services.store, LoadSession(session_id=session_id)), timeout)
    if record is None:
        raise AgentHostError(code=ErrorCode.NOT_FOUND, message=f"no session {session_id}")
    adopt = _ask(host._host_ref, AdoptSession(record=record))
    return Session(host, await wait(adopt, max(deadline - time.monotonic(), 0.0)))


async def find_session(
    host: Host,
    session_id: str | None = None,
    *,
    chat_id: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> SessionSummary | None:
    """`Host.find_session`: a stored session by its id or one of its chats, or None."""
    query = FindSession(session_id=session_id, chat_id=chat_id)
    found: SessionSummary | None = await wait(_ask(host.services.store, query), timeout)
    return found


async def send(
    chat: Chat,
    text: str,
    *,
    client_id: str | None = None,
    turn_id: str | None = None,
    pending_id: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Ticket:
    """`Chat.send` (without attachments); returns its ticket (await `outcome(ticket)`
    for the end)."""
    _check_text(text)
    command = SendMessage(text=text, client_id=client_id, turn_id=turn_id, pending_id=pending_id)
    ticket: Ticket = await _chat_call(chat, command, timeout)
    return ticket


async def outcome(ticket: Ticket, *, timeout: float = DEFAULT_TIMEOUT) -> TurnOutcome:
    return await wait(ticket.outcome, timeout)


async def chat(
    session: Session, chat_id: str | None = None, *, timeout: float = DEFAULT_TIMEOUT
) -> Chat:
    return Chat(session, await _session_call(session, GetChat(chat_id=chat_id), timeout))


async def subscribe(
    chat: Chat, *, maxsize: int | None = None, timeout: float = DEFAULT_TIMEOUT
) -> Subscription:
    """`Chat.subscribe`; a call that fails or is cancelled leaves nothing attached."""
    subscription = chat._subscription(maxsize)
    try:
        await _chat_call(chat, Attach(subscription=subscription), timeout)
    except BaseException:
        subscription.close()
        raise
    return subscription


async def summary(session: Session, *, timeout: float = DEFAULT_TIMEOUT) -> SessionSummary:
    """`Session.summary`."""
    result: SessionSummary = await _session_call(session, GetSessionSummary(), timeout)
    return result


async def _session_call(session: Session, message: Any, timeout: float) -> Any:
    """Ask the session; one released from memory meanwhile is restored first
    (as `Session._call` does)."""
    try:
        return await wait(_ask(session._info.ref, message), timeout)
    except AgentHostError as error:
        if not session._host._released(error):
            raise
    session._info = (await open_session(session._host, session.id, timeout=timeout))._info
    return await wait(_ask(session._info.ref, message), timeout)


async def _chat_call(chat: Chat, message: Any, timeout: float) -> Any:
    """Ask the chat; if its session was released from memory, restore it first
    (as `Chat._call` does)."""
    try:
        return await wait(_ask(chat._ref, message), timeout)
    except AgentHostError as error:
        if not chat.session._host._released(error):
            raise
    chat._ref = (await _session_call(chat.session, GetChat(chat_id=chat.id), timeout)).ref
    return await wait(_ask(chat._ref, message), timeout)


class _Mirror:
    """Awaitable mirror of a sync surface object: attributes pass through,
    methods become coroutines run on an executor."""

    def __init__(self, sync: Any, executor: concurrent.futures.Executor | None = None) -> None:
        self.sync = sync
        self._executor = executor

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.sync, name)
        if not callable(attribute):
            return _mirrored(attribute, self._executor)
        return functools.partial(_run, attribute, self._executor)

    def __repr__(self) -> str:
        return f"async {self.sync!r}"


class AsyncHost(_Mirror):
    @classmethod
    async def start(
        cls, *args: Any, executor: concurrent.futures.Executor | None = None, **kwargs: Any
    ) -> "AsyncHost":
        """`Host.start(...)`, off the loop."""
        host = await _run(Host.start, executor, *args, **kwargs)
        assert isinstance(host, AsyncHost)
        return host


class AsyncSession(_Mirror):
    pass


class AsyncChat(_Mirror):
    pass


_MIRRORS: dict[type, type[_Mirror]] = {Host: AsyncHost, Session: AsyncSession, Chat: AsyncChat}


def _mirrored(value: Any, executor: concurrent.futures.Executor | None) -> Any:
    mirror = _MIRRORS.get(type(value))
    if mirror is not None:
        return mirror(value, executor)
    if isinstance(value, list):
        return [_mirrored(item, executor) for item in value]
    return value


async def _run(
    fn: Callable[..., Any], executor: concurrent.futures.Executor | None, *args: Any, **kwargs: Any
) -> Any:
    loop = asyncio.get_running_loop()
    result = await loop.run_in_executor(executor, functools.partial(fn, *args, **kwargs))
    return _mirrored(result, executor)
