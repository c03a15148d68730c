"""What travels between a sharded host's front and its shards, and how.

Belongs here: the frames (frozen values), the targets a call names, the
stand-ins for what cannot cross a process (an actor ref, a ticket, a
subscription), and the framing: an authenticated connection on which each
loop pass's frames leave as one length-prefixed pickle.

Invariants:
1. A peer is trusted only after it proved it holds the secret the front gave
   every shard (an HMAC of a fresh challenge, both ways); a pickle is never
   read from a peer that has not.
2. What a connection's owner writes during one loop pass leaves as one frame
   batch (one pickle, one write): a burst of events costs one message, not
   one per event.
3. Every value that crosses is plain data: actor refs become targets
   (RemoteSession, RemoteChat), a Ticket a RemoteTicket (its outcome follows
   as TicketEnded), a subscription a number (its events follow as Events).
"""

import asyncio
import hashlib
import hmac
import io
import os
import pickle
import struct
from collections.abc import Callable
from typing import Any

import attrs

from agenthost.actors.context import Departure
from agenthost.messages.commands import TurnOutcome
from agenthost.messages.errors import AgentHostError
from agenthost.messages.events import ChatEvent

MAX_FRAME = 256 << 20
"""The largest frame batch a peer accepts (a session's record can be large)."""
_HEADER = struct.Struct("!I")
_CHALLENGE_BYTES = 32


# -- what a call names -----------------------------------------------------------------------
@attrs.frozen
class HostTarget:
    """The shard's HostActor."""


@attrs.frozen
class StoreTarget:
    """The shard's StoreActor (the store every shard shares)."""


@attrs.frozen
class WorktreesTarget:
    """The shard's WorktreeActor."""


@attrs.frozen
class SupervisorTarget:
    """The shard's SupervisorActor."""


@attrs.frozen
class SessionTarget:
    """A session, resident on the shard or restored there on the call."""

    session_id: str


@attrs.frozen
class ChatTarget:
    session_id: str
    chat_id: str


Target = HostTarget | StoreTarget | WorktreesTarget | SupervisorTarget | SessionTarget | ChatTarget


# -- the front's frames ------------------------------------------------------------------------
@attrs.frozen
class Call:
    """Ask `target` `message`; answered by a Reply with the same `no`."""

    no: int
    target: Target
    message: Any
    timeout: float


@attrs.frozen
class Tell:
    """Tell `target` `message`; nothing is answered."""

    target: Target
    message: Any


@attrs.frozen
class AttachRemote:
    """(The message of a Call to a ChatTarget.) Subscribe subscription `sub` of
    the front: its events follow as Events frames."""

    sub: int
    maxsize: int


@attrs.frozen
class DetachRemote:
    """(A Tell.) The front's subscription `sub` closed: stop its events."""

    sub: int


# -- the shard's frames ------------------------------------------------------------------------
@attrs.frozen
class Reply:
    no: int
    value: Any = None
    error: BaseException | None = None


@attrs.frozen
class Events:
    """Events of the front's subscription `sub`, in order; `closed`: no more follow."""

    sub: int
    events: tuple[ChatEvent, ...]
    closed: bool = False


@attrs.frozen
class TicketEnded:
    """The outcome of the send whose reply carried RemoteTicket `ticket`."""

    ticket: int
    outcome: TurnOutcome | None = None
    error: BaseException | None = None


@attrs.frozen
class SessionLeft:
    """A session left the shard's memory (Host.on_session_left): every front
    connected hears it, so an AHP server on any front drops what it kept of it."""

    session_id: str
    why: Departure


@attrs.frozen
class ProvidersChanged:
    """The providers unavailable on the shard now (past its supervisor's
    restart limit): sent when that changes, and on each front's connect."""

    unavailable: frozenset[str]


@attrs.frozen
class Relay:
    """A notice one front hands its fellow fronts (plain data): a Tell to a
    shard's HostTarget, which sends it on to every other front connected."""

    notice: Any


# -- stand-ins in replies ----------------------------------------------------------------------
@attrs.frozen
class RemoteSession:
    """A reply's SessionInfo: the session, on the shard that answered."""

    session_id: str


@attrs.frozen
class RemoteChat:
    """A reply's ChatInfo."""

    session_id: str
    chat_id: str


@attrs.frozen
class RemoteTicket:
    """A reply's Ticket: its outcome, if the send has one already, else a
    TicketEnded follows."""

    no: int
    pending_id: str | None
    turn_id: str | None
    outcome: TurnOutcome | None = None
    error: BaseException | None = None


@attrs.frozen
class Batch:
    """What one side wrote in one loop pass."""

    frames: tuple[Any, ...]


# -- pickling ----------------------------------------------------------------------------------
def _rebuild_error(cls: type[AgentHostError], fields: dict[str, Any]) -> AgentHostError:
    return cls(**fields)


class _Pickler(pickle.Pickler):
    """Pickles AgentHostError by its fields (a keyword-only attrs exception does
    not pickle by its args)."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, AgentHostError):
            fields = {a.name: getattr(obj, a.name) for a in attrs.fields(type(obj)) if a.init}
            return _rebuild_error, (type(obj), fields)
        return NotImplemented


def dumps(value: Any) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


def loads(data: bytes) -> Any:
    return pickle.loads(data)


# -- connections -------------------------------------------------------------------------------
class HandshakeError(Exception):
    """The peer did not prove it holds the secret."""


def _proof(secret: bytes, challenge: bytes, role: bytes) -> bytes:
    return hmac.new(secret, role + challenge, hashlib.sha256).digest()


async def authenticate(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, secret: bytes, *, server: bool
) -> None:
    """Both sides prove they hold `secret` (invariant 1).

    Raises:
        HandshakeError: the peer's proof is wrong, or it closed.
    """
    mine = os.urandom(_CHALLENGE_BYTES)
    writer.write(mine)
    await writer.drain()
    try:
        theirs = await reader.readexactly(_CHALLENGE_BYTES)
        writer.write(_proof(secret, theirs, b"server" if server else b"front"))
        await writer.drain()
        proof = await reader.readexactly(hashlib.sha256().digest_size)
    except (asyncio.IncompleteReadError, ConnectionError) as exc:
        raise HandshakeError("the peer closed during the handshake") from exc
    if not hmac.compare_digest(proof, _proof(secret, mine, b"front" if server else b"server")):
        raise HandshakeError("the peer does not hold the secret")


class FrameWriter:
    """Frames written during one loop pass leave as one Batch (invariant 2).
    Only the loop's thread writes."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._pending: list[Any] = []
        self._loop = asyncio.get_running_loop()
        self.closed = False

    def send(self, frame: Any) -> None:
        if self.closed:
            return
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(frame)

    def _flush(self) -> None:
        frames, self._pending = self._pending, []
        if self.closed or not frames:
            return
        payload = dumps(Batch(frames=tuple(frames)))
        self._writer.write(_HEADER.pack(len(payload)) + payload)

    async def drain(self) -> None:
        """Wait while the socket's buffer is full (a slow peer)."""
        await self._writer.drain()

    def close(self) -> None:
        self.closed = True
        self._pending.clear()
        self._writer.close()


async def read_batches(reader: asyncio.StreamReader, handle: Callable[[Any], None]) -> None:
    """Hand each frame the peer sends to `handle`, until it closes.

    Raises:
        ConnectionError: a frame larger than MAX_FRAME.
    """
    while True:
        try:
            header = await reader.readexactly(_HEADER.size)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        (size,) = _HEADER.unpack(header)
        if size > MAX_FRAME:
            raise ConnectionError(f"a frame of {size} bytes; at most {MAX_FRAME}")
        try:
            payload = await reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        batch = loads(payload)
        for frame in batch.frames:
            handle(frame)
