"""The public, synchronous surface of one chat: Chat, and what its calls hand
back (TurnHandle, Removal). Host and Session are in actors/surface.py, which
re-exports these; the same rules hold (the caller's thread, `timeout=` on
every wait, `AgentHostError` for expected failures).
"""

import os
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any

import pykka

from agenthost.actors import calls
from agenthost.actors.calls import ChatHandle, chat_call, run_sync
from agenthost.actors.handles import Subscription, Ticket
from agenthost.actors.runtime import ASK_TIMEOUT_S as DEFAULT_TIMEOUT
from agenthost.actors.surface_asking import ChatAsking
from agenthost.messages.commands import (
    CancelTurn,
    EditPendingMessage,
    GetChatState,
    GetDiagnostics,
    RemovePendingMessage,
    ReorderQueue,
    SetDraft,
    SetReadOnly,
    TruncateChat,
    TurnDiagnostics,
    TurnOutcome,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.state import (
    ChatState,
    PendingMessage,
)

if TYPE_CHECKING:
    from agenthost.actors.surface import Session


class Chat(ChatAsking):
    """A handle on one chat."""

    def __init__(self, session: "Session", handle: ChatHandle) -> None:
        self.session = session
        self._handle = handle
        self.id = handle.chat_id

    @property
    def _ref(self) -> pykka.ActorRef[Any]:
        """The chat actor now (tests tell it messages directly)."""
        return self._handle.ref

    def _call(self, message: Any, timeout: float) -> Any:
        return run_sync(chat_call(self._handle, message), timeout)

    def subscribe(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        maxsize: int | None = None,
        keep_state: bool = False,
        max_bytes: int | None = None,
    ) -> Subscription:
        """Events of this chat: first a ChatSnapshot, then live events. It holds at
        most `maxsize` unread events (default: the host's subscriber_queue_size)
        and `max_bytes` of them (default: HostLimits.subscriber_queue_bytes); past
        either it gets Lagged and is closed. With `keep_state`,
        `Subscription.state` is the chat's own state as of the last event read (a
        mirror of the chat that shares its text)."""
        subscribing = calls.subscribe(self._handle, maxsize, keep_state, max_bytes)
        return run_sync(subscribing, timeout)

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
        `pending_id` are ids the caller chose for the turn or the queue entry,
        new to this chat (other chats may use the same ids); a send queued with
        a `turn_id` keeps it, and its turn runs under it. `attachments` are
        text files (UTF-8, at most 1 MiB each) sent with the message and kept
        with its turn.

        Raises:
            AgentHostError: INVALID_ARGUMENT naming an attachment that cannot be
                read, or an id that is empty or in use in this chat.
        """
        send = calls.send(self._handle, text, client_id, turn_id, pending_id, attachments)
        return TurnHandle(run_sync(send, timeout))

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
        return run_sync(calls.steer(self._handle, text, client_id, pending_id), timeout)

    def remove_pending(
        self, pending_id: str, *, client_id: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> bool:
        """Remove a queued or steering message; returns once the removal is settled.

        Returns True when it was removed (a queued message, steering not yet
        sent, or steering the provider withdrew), False when the model already
        had it: it then stays pending until the model's echo consumes it.

        Raises:
            AgentHostError: NOT_FOUND when it is no longer pending (it ran, or was
                removed); INVALID_ARGUMENT when the provider cannot withdraw
                steering it holds.
        """
        removal = RemovePendingMessage(pending_id=pending_id, client_id=client_id)
        return bool(self._call(removal, timeout))

    def remove_pending_nowait(self, pending_id: str) -> "Removal":
        """Ask to remove a pending message; `.result(timeout)` waits for the settlement."""
        return Removal(
            self._handle.ref.ask(RemovePendingMessage(pending_id=pending_id), block=False)
        )

    def edit_pending(
        self, pending_id: str, text: str, *, timeout: float = DEFAULT_TIMEOUT
    ) -> PendingMessage:
        """Change a queued message's text. Steering cannot be edited.

        Raises:
            AgentHostError: NOT_FOUND, or INVALID_ARGUMENT for a steering message.
        """
        calls.check_text(text, self._handle.session.core.services.limits)
        return self._call(EditPendingMessage(pending_id=pending_id, text=text), timeout)

    def reorder_queue(
        self, pending_ids: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT
    ) -> tuple[PendingMessage, ...]:
        """Listed ids first, in that order; the rest keep theirs; unknown ids are ignored."""
        return self._call(ReorderQueue(pending_ids=tuple(pending_ids)), timeout)

    def diagnostics(self, *, timeout: float = DEFAULT_TIMEOUT) -> TurnDiagnostics | None:
        """Why the active turn is where it is (None when no turn runs)."""
        return self._call(GetDiagnostics(), timeout)

    def cancel(
        self,
        turn_id: str | None = None,
        *,
        client_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> bool:
        """Cancel the active turn. True once it ended as cancelled, its end
        published (the chat's state shows it); False when none runs, or when the
        turn ended on its own (completed, failed) before the cancel reached it.

        With `turn_id`, that turn: the running one as above, or a send queued
        under that id (`send(..., turn_id=...)` while busy), which is removed
        before it runs (its handle's outcome: removed).

        Raises:
            AgentHostError: NOT_FOUND, saying why, for a `turn_id` that neither
                runs nor waits (it ended, another turn runs, or it is unknown).
        """
        return bool(self._call(CancelTurn(turn_id=turn_id, client_id=client_id), timeout))

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
            self._handle.ref.tell(CancelTurn())
        except pykka.ActorDeadError as exc:
            raise AgentHostError(code=ErrorCode.HOST_STOPPED, message=calls.HOST_STOPPED) from exc

    def state(self, *, timeout: float = DEFAULT_TIMEOUT) -> ChatState:
        """The chat's state as published: every call that changed it and returned
        shows here; a turn's end shows once it is stored."""
        return self._call(GetChatState(), timeout)

    @property
    def aio(self) -> Any:
        """This chat's asyncio surface (agenthost.actors.aio.AsyncChat)."""
        from agenthost.actors.aio import AsyncChat

        return AsyncChat(self.session.aio, self._handle)

    def __repr__(self) -> str:
        return f"Chat({self.id})"


class Removal:
    """A removal in flight; `result()` is what `Chat.remove_pending` returns;
    awaitable (to the same bool) from asyncio."""

    def __init__(self, future: pykka.Future[Any]) -> None:
        self._future = future

    def result(self, timeout: float = DEFAULT_TIMEOUT) -> bool:
        return bool(calls.wait_sync(self._future, timeout, "removal not settled"))

    async def settled(self, timeout: float | None = DEFAULT_TIMEOUT) -> bool:
        """The removal's answer, without blocking the loop."""
        return bool(await calls.wait(self._future, timeout))  # type: ignore[arg-type]

    def __await__(self) -> Generator[Any, None, bool]:
        return self.settled().__await__()


class TurnHandle:
    """A send's handle: `.id` (None while queued), `.pending_id`, `.result(timeout)`;
    awaitable (to its TurnOutcome) from asyncio."""

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
        outcome: TurnOutcome = calls.wait_sync(self._ticket.outcome, timeout, "turn not ended")
        return outcome

    def done(self) -> bool:
        return self._ticket.outcome.done()

    async def outcome(self, timeout: float | None = None) -> TurnOutcome:
        """Await the outcome (None: no time limit)."""
        result: TurnOutcome = await calls.wait(self._ticket.outcome, timeout)
        return result

    def __await__(self) -> Generator[Any, None, TurnOutcome]:
        return self.outcome().__await__()
