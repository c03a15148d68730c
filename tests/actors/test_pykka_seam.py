"""What actors/pykka_seam.py relies on in pykka's private internals.

Each test pins one fact; a pykka release that changes it fails here, before
the runtimes misbehave. (The seam is the only module that touches them.)
"""

import importlib.metadata
from typing import Any

import pykka
import pykka.messages
import pytest

from agenthost.actors import pykka_seam
from agenthost.actors.futures import RuntimeFuture


class _Inbox:
    """Records what pykka's ActorRef puts in an inbox."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def put(self, envelope: Any, /) -> None:
        self.items.append(envelope)

    def get(self) -> Any:
        return self.items.pop(0)

    def empty(self) -> bool:
        return not self.items


class _Probe(pykka.Actor):
    """A bare pykka actor: no runtime of ours, just pykka's base class."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []
        self.fail_on_start = False

    @staticmethod
    def _create_actor_inbox() -> Any:
        return _Inbox()

    @staticmethod
    def _create_future() -> pykka.Future[Any]:
        return RuntimeFuture()

    def _start_actor_loop(self) -> None:  # never started: the tests drive it by hand
        raise AssertionError

    def on_start(self) -> None:
        self.events.append("start")
        if self.fail_on_start:
            raise RuntimeError("on_start failed")

    def on_stop(self) -> None:
        self.events.append("stop")

    def on_receive(self, message: Any) -> Any:
        if message == "boom":
            raise ValueError("boom")
        self.events.append(f"got {message}")
        return f"reply {message}"

    def on_failure(self, *exc_info: Any) -> None:
        self.events.append("failure")

    def twice(self, value: int) -> int:
        return value * 2


def test_pykka_is_the_minor_series_the_seam_was_tested_with() -> None:
    version = importlib.metadata.version("pykka")
    assert version.startswith("4.5."), version


def test_a_tell_puts_an_envelope_with_the_message_and_no_reply() -> None:
    probe = _Probe()
    probe.actor_ref.tell("hello")
    (envelope,) = probe.actor_inbox.items  # type: ignore[attr-defined]
    assert isinstance(envelope, pykka_seam.Envelope)
    assert envelope.message == "hello"
    assert envelope.reply_to is None


def test_an_ask_puts_an_envelope_whose_reply_to_is_the_actors_future() -> None:
    probe = _Probe()
    future = probe.actor_ref.ask("hello", block=False)
    (envelope,) = probe.actor_inbox.items  # type: ignore[attr-defined]
    assert envelope.reply_to is future
    assert isinstance(future, RuntimeFuture)


def test_a_stop_sends_the_stop_message_the_seam_recognises() -> None:
    probe = _Probe()
    probe.actor_ref.stop(block=False)
    (envelope,) = probe.actor_inbox.items  # type: ignore[attr-defined]
    assert pykka_seam.is_stop(envelope.message)
    assert pykka_seam.is_stop(pykka_seam.stop_message())


def test_start_runs_on_start_and_a_failure_there_stops_the_actor() -> None:
    probe = _Probe()
    pykka_seam.start(probe)
    assert probe.events == ["start"] and not probe.actor_stopped.is_set()
    failing = _Probe()
    failing.fail_on_start = True
    pykka_seam.start(failing)
    assert failing.actor_stopped.is_set()


def test_process_replies_to_an_ask_after_flushing() -> None:
    probe = _Probe()
    future = RuntimeFuture()
    order: list[str] = []
    future.add_done_callback(lambda _f: order.append("reply"))
    probe.flush = lambda: order.append("flush")  # type: ignore[attr-defined]
    pykka_seam.process(probe, pykka_seam.Envelope("x", reply_to=future))
    assert future.get(timeout=0) == "reply x"
    assert order == ["flush", "reply"]


def test_process_handles_the_stop_message_with_on_stop() -> None:
    probe = _Probe()
    future = RuntimeFuture()
    pykka_seam.process(probe, pykka_seam.Envelope(pykka_seam.stop_message(), future))
    assert probe.actor_stopped.is_set()
    assert probe.events == ["stop"]
    assert future.get(timeout=0) is None


def test_process_runs_proxy_calls() -> None:
    probe = _Probe()
    probe.actor_ref.proxy().twice(21)
    (envelope,) = probe.actor_inbox.items  # type: ignore[attr-defined]
    pykka_seam.process(probe, envelope)
    assert envelope.reply_to.get(timeout=0) == 42


def test_a_failing_ask_returns_its_exception_and_the_actor_lives_on() -> None:
    probe = _Probe()
    future = RuntimeFuture()
    pykka_seam.process(probe, pykka_seam.Envelope("boom", reply_to=future))
    with pytest.raises(ValueError, match="boom"):
        future.get(timeout=0)
    assert not probe.actor_stopped.is_set()


def test_a_failing_tell_runs_on_failure_and_stops_the_actor() -> None:
    probe = _Probe()
    pykka_seam.process(probe, pykka_seam.Envelope("boom"))
    assert probe.events == ["failure"]
    assert probe.actor_stopped.is_set()


def test_a_message_to_a_stopped_actor_is_answered_dead_and_a_stop_as_done() -> None:
    probe = _Probe()
    pykka_seam.stop_now(probe)
    assert probe.actor_stopped.is_set() and probe.events == ["stop"]
    asked, stopping = RuntimeFuture(), RuntimeFuture()
    pykka_seam.process(probe, pykka_seam.Envelope("late", reply_to=asked))
    pykka_seam.answer_dead(probe, pykka_seam.Envelope(pykka_seam.stop_message(), stopping))
    with pytest.raises(pykka.ActorDeadError):
        asked.get(timeout=0)
    assert stopping.get(timeout=0) is None


def test_pykka_actor_init_sets_exactly_the_fields_seam_actor_sets() -> None:
    """SeamActor.__init__ stands in for pykka.Actor.__init__: a field pykka adds,
    drops or renames would leave our actors half built."""
    pykka_made = _Probe()
    ours = pykka_seam.SeamActor(urn="urn:x", inbox=_Inbox(), stopped=object())
    assert set(vars(ours)) == {"actor_urn", "actor_inbox", "actor_stopped", "_actor_ref"}
    assert set(vars(ours)) <= set(vars(pykka_made))
    assert set(vars(pykka_made)) - set(vars(ours)) == {"events", "fail_on_start"}


def test_a_ref_of_a_seam_actor_reads_the_fields_it_set() -> None:
    inbox = _Inbox()
    ours = pykka_seam.SeamActor(urn="urn:x", inbox=inbox, stopped=pykka_seam.threading.Event())
    ref = ours.actor_ref
    assert ref.actor_urn == "urn:x" and ref.actor_inbox is inbox
    assert ref.is_alive()
    ref.tell("hello")
    assert inbox.items[0].message == "hello"


def test_pykka_builds_futures_inboxes_and_starts_through_the_hooks_seam_actor_fills() -> None:
    """pykka calls these three to run an actor its way (its ThreadingActor
    overrides them); SeamActor maps them to create_future, create_inbox and
    start_loop."""
    calls: list[str] = []

    class Hooked(pykka_seam.SeamActor):
        def create_inbox(self) -> Any:
            calls.append("inbox")
            return _Inbox()

        @staticmethod
        def create_future() -> pykka.Future[Any]:
            calls.append("future")
            return RuntimeFuture()

        def start_loop(self) -> None:
            calls.append("start")

    hooked = Hooked(urn="urn:h", inbox=_Inbox(), stopped=pykka_seam.threading.Event())
    assert isinstance(hooked.actor_ref.ask("x", block=False), RuntimeFuture)
    hooked._create_actor_inbox()
    hooked._start_actor_loop()
    assert calls == ["future", "inbox", "start"]
    assert pykka.ThreadingActor._create_actor_inbox is not pykka.Actor._create_actor_inbox
    assert pykka.ThreadingActor._start_actor_loop is not pykka.Actor._start_actor_loop


def test_every_message_type_of_pykkas_own_is_routed_through_pykka() -> None:
    """process() hands pykka's own messages to `_handle_receive` and the rest to
    on_receive: a release that adds a message type of its own must be seen."""
    own = {
        value
        for value in vars(pykka.messages).values()
        if isinstance(value, type) and value.__module__ == pykka.messages.__name__
    }
    assert own == pykka_seam.PYKKA_MESSAGES


def test_pykka_hands_any_other_message_to_on_receive() -> None:
    probe = _Probe()
    assert probe._handle_receive("x") == "reply x"
    assert probe.events == ["got x"]
