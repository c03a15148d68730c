"""The one module that touches pykka's private internals.

pykka offers new actor types three hooks (`_create_actor_inbox`,
`_create_future`, `_start_actor_loop`) and leaves the loop itself to its
own `ThreadingActor`. agenthost runs actors on its own runtimes (a pool, a
deterministic runner), which must handle a message exactly as pykka's loop
does: stop messages, proxy calls, replies, the failure hooks. Those pieces
are private in pykka, so every use of them is here, and
tests/actors/test_pykka_seam.py fails when a pykka release changes what
this module relies on. setup.cfg pins pykka to the minor series it was
tested with.

What is relied on (pykka 4.x):
- the fields `pykka.Actor.__init__` sets (`actor_urn`, `actor_inbox`,
  `actor_stopped`, `_actor_ref`), which `SeamActor.__init__` sets itself
  (its stopped flag is not a threading.Event), and the three methods pykka's
  own `ThreadingActor` overrides to run actors its way (`_create_actor_inbox`,
  `_create_future`, `_start_actor_loop`), which `SeamActor` turns into
  public ones (`create_inbox`, `create_future`, `start_loop`);
- `pykka._envelope.Envelope(message, reply_to)`, with `.message` and `.reply_to`:
  what ActorRef.tell and ask put in an inbox;
- `pykka.messages._ActorStop`: the message `ActorRef.stop` sends;
- `Actor._actor_loop_setup()` (on_start, failures handled),
  `Actor._handle_receive(message)` (stop, proxy calls, then on_receive: so
  a message of none of pykka's own types, `PYKKA_MESSAGES`, goes to
  on_receive straight, a call less per message),
  `Actor._handle_failure(*exc_info)` (log, unregister, mark stopped) and
  `Actor._stop()` (mark stopped, on_stop).
Everything else agenthost uses of pykka is public API.
"""

import contextlib
import sys
import threading
from typing import Any

import pykka
import structlog
from pykka import ActorDeadError
from pykka._envelope import Envelope
from pykka.messages import ProxyCall, ProxyGetAttr, ProxySetAttr, _ActorStop

__all__ = [
    "PYKKA_MESSAGES",
    "Envelope",
    "SeamActor",
    "answer_dead",
    "is_stop",
    "process",
    "start",
    "stop_message",
    "stop_now",
]

log = structlog.get_logger(__name__)

interruptible = threading.local()
"""`interruptible.on` is True on a thread whose BaseException should propagate
(the deterministic runner's driver: Ctrl-C must get through)."""


class SeamActor(pykka.Actor):
    """pykka's Actor, built and started through public methods of ours.

    pykka's __init__ makes a threading.Event per actor for its stopped flag (a
    Condition, a lock and a deque: about 1 KB and a dozen objects the garbage
    collector walks); `stopped` is what stands in for it here."""

    def __init__(self, urn: str, inbox: Any, stopped: Any) -> None:
        # pykka.Actor.__init__'s four fields (tests/actors/test_pykka_seam.py pins them).
        self.actor_urn = urn
        self.actor_inbox = inbox
        self.actor_stopped = stopped
        self._actor_ref = pykka.ActorRef(self)

    def create_inbox(self) -> Any:
        raise NotImplementedError

    @staticmethod
    def create_future() -> pykka.Future[Any]:
        raise NotImplementedError

    def start_loop(self) -> None:
        raise NotImplementedError

    # pykka's hooks for new actor types, as its ThreadingActor overrides them
    def _create_actor_inbox(self) -> Any:  # type: ignore[override]
        return self.create_inbox()

    @classmethod
    def _create_future(cls) -> pykka.Future[Any]:
        return cls.create_future()

    def _start_actor_loop(self) -> None:
        self.start_loop()


PYKKA_MESSAGES = frozenset({_ActorStop, ProxyCall, ProxyGetAttr, ProxySetAttr})
"""What `Actor._handle_receive` handles itself; every other message it hands to on_receive."""


def stop_message() -> Any:
    """The message `ActorRef.stop` sends: an ask of it stops the actor and answers."""
    return _ActorStop()


def is_stop(message: object) -> bool:
    return isinstance(message, _ActorStop)


def start(actor: pykka.Actor) -> None:
    """Run `on_start` as pykka's loop does (a failure is handled and stops the actor)."""
    actor._actor_loop_setup()


def stop_now(actor: pykka.Actor) -> None:
    """Stop without handling the rest of the inbox (on_stop runs)."""
    actor._stop()


def process(actor: pykka.Actor, envelope: Envelope[Any]) -> None:
    """Handle one message as pykka's `_actor_loop_running` does: the reply, or
    the failure hooks for a tell. A message to a stopped actor is answered
    with ActorDeadError. The actor's `flush()`, if it has one, runs before a
    reply is set, so a reply never overtakes what its handler sent."""
    if actor.actor_stopped.is_set():
        answer_dead(actor, envelope)
        return
    reply_to = envelope.reply_to
    message = envelope.message
    try:
        if type(message) in PYKKA_MESSAGES:
            response = actor._handle_receive(message)
        else:
            response = actor.on_receive(message)
        if reply_to is not None:
            _flush(actor)
            reply_to.set(response)
    except Exception:
        if reply_to is not None:
            _flush(actor)
            reply_to.set_exception()
        else:
            actor._handle_failure(*sys.exc_info())
            try:
                actor.on_failure(*sys.exc_info())
            except Exception:
                actor._handle_failure(*sys.exc_info())
    except BaseException:
        if getattr(interruptible, "on", False):
            raise
        # pykka stops the actor (and every other); here only the actor stops,
        # and an asker gets the exception instead of waiting forever.
        log.error("actor_interrupted", actor=type(actor).__name__, exc_info=True)
        if envelope.reply_to is not None:
            with contextlib.suppress(Exception):
                envelope.reply_to.set_exception()
        actor._stop()


def _flush(actor: pykka.Actor) -> None:
    flush = getattr(actor, "flush", None)
    if flush is not None:
        flush()


def answer_dead(actor: pykka.Actor | str, envelope: Envelope[Any]) -> None:
    """Answer a message a stopped actor (or the one named) will never handle (a stop: done)."""
    if envelope.reply_to is None:
        return
    if isinstance(envelope.message, _ActorStop):
        envelope.reply_to.set(None)
        return
    who = actor if isinstance(actor, str) else actor.actor_ref
    error = ActorDeadError(f"{who} stopped before handling the message")
    envelope.reply_to.set_exception(exc_info=(ActorDeadError, error, None))
