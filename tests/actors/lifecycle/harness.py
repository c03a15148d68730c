"""The lifecycle machine's harness: its host on the deterministic runner and
the fake clock, the scripted provider let react after each delivery that hands
it work (a barrier: a few passes of its loop), its subscriber, the calls it
makes through the public surface (each checked to read its own write), and
the end of a run. The rules are machine.py's; the checks ledger.py's.
"""

import asyncio
import functools
import itertools
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import structlog

from agenthost.actors import Chat, Host, RestartPolicy, Session, runtime
from agenthost.messages import AgentHostError, ErrorCode
from agenthost.messages.state import (
    ChatState,
    OpenRequest,
    PendingKind,
    RequestKind,
)
from agenthost.providers import RetryPolicy
from agenthost.providers.scripted import (
    AskUser,
    ClientToolCall,
    Crash,
    DropCompletion,
    Gate,
    Reject,
    Say,
    ScriptedProvider,
    SpawnSubagent,
    Step,
    ToolCall,
)
from agenthost.store import SqliteStore
from agenthost.testing import Delivery, DeterministicRunner, FakeClock
from tests.actors.lifecycle.ledger import Ledger, normalized
from tests.actors.lifecycle.trace import Trace

IDLE_S = 30.0
COOLDOWN_S = 30.0
CLIENT = "client-1"
NETWORK = "Authentication failed: network fetch failed"
BARRIER_PASSES = 12  # loop passes for a scripted reaction to reach the host
CALL_TIMEOUT = 5.0
MAX_RESTARTS = 2  # each, per run: restarts and idle releases

SCRIPTS = (
    "echo",
    "echo",
    "gated",
    "gated",
    "gated",
    "crash",
    "crash_at_gate",
    "drop",
    "reject",
    "permission",
    "question",
    "client_tool",
    "tool",
    "subagent",
    "background_subagent",
)
ASKING = ("permission", "question", "client_tool")
FAULTS = ("none", "transient", "no_history", "other", "past_retry_limit")
# Where the provider's loop may get work: after these deliveries it is let react.
HANDS_WORK = ("ProviderConnectionActor", "SupervisorActor")

F = TypeVar("F", bound=Callable[..., Any])


async def no_sleep(seconds: float) -> None:
    return None


def steps(script: str, text: str) -> tuple[Step, ...] | None:
    """The steps a turn of `text` runs (None: the echo)."""
    gate = f"g:{text}"
    return {
        "echo": None,
        "gated": (Say("a "), Gate(gate), Say("b")),
        "crash": (Say("a "), Crash()),
        "crash_at_gate": (Say("a "), Gate(gate, reads_steering=False), Crash()),
        "drop": (Say("a"), DropCompletion()),
        "reject": (Say("a"), Reject("refused")),
        "permission": (Say("a "), ToolCall("shell", '{"cmd": "ls"}'), Say("b")),
        "question": (AskUser("which one?"), Say("b")),
        "client_tool": (ClientToolCall("fetch", '{"url": "u"}'), Say("b")),
        "tool": (ToolCall("read", needs_permission=False), Say("b")),
        "subagent": (SpawnSubagent(f"sub {text}"), Say("b")),
        "background_subagent": (SpawnSubagent(f"sub {text}", background=True), Say("b")),
    }[script]


def traced(method: F) -> F:
    """A rule whose failure is written down as the run's trace."""

    @functools.wraps(method)
    def wrapper(self: "Harness", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except AssertionError as failure:
            raise AssertionError(self.trace.write(failure)) from failure

    return wrapper  # type: ignore[return-value]


class Harness:
    """What the machine's rules use; see the module docstring. `shape` is set
    per shape by a subclass."""

    shape = "copilot"

    def __init__(self) -> None:
        super().__init__()
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
        self.folder = tempfile.TemporaryDirectory()
        self.db = Path(self.folder.name) / "lifecycle.db"
        self.runner = DeterministicRunner()
        self.runner.after_delivery = self._let_provider_react
        self.scope = runtime.use_runtime(self.runner)
        self.scope.__enter__()
        self.clock = FakeClock()
        self.names = itertools.count(1)
        self.provider = ScriptedProvider(shape=self.shape)  # type: ignore[arg-type]
        self.trace = Trace(f"lifecycle machine, shape {self.shape}")
        self.ledger = Ledger()
        self.scripts: dict[str, str] = {}
        self.gates: set[str] = set()
        self.restarts = 0
        self.releases = 0
        self.crashed = False  # a crash was scripted: time may pass for a cool-down
        self.removals: list[tuple[str, Any]] = []  # removals in flight: (pending id, Removal)
        self.host: Host | None = None
        self.session: Session | None = None
        self.chat: Chat | None = None
        self.sub: Any = None

    def _start(self) -> Host:
        return Host.start(
            store=SqliteStore(self.db),
            providers={"scripted": self.provider},
            clock=self.clock,
            idle_release_s=IDLE_S,
            draft_gc_s=IDLE_S,
            restart_policy=RestartPolicy(
                intensity=2, period=60.0, backoff_min=0.0, backoff_max=0.0, cooldown=COOLDOWN_S
            ),
            resume_retry=RetryPolicy(attempts=3, sleep=no_sleep),
        )

    def _subscribe(self) -> None:
        assert self.chat is not None
        self.sub = self.chat.subscribe(maxsize=1_000_000)
        self.observe()

    def _let_provider_react(self, delivery: Delivery) -> None:
        if delivery.actor in HANDS_WORK:
            self.barrier()

    def barrier(self) -> None:
        """Let the provider's loop run what it was handed, and deliver its bursts."""
        if self.host is None:
            return
        loop = self.host.services.loops["scripted"]

        async def passes() -> None:
            for _ in range(BARRIER_PASSES):
                await asyncio.sleep(0)

        loop.submit(passes()).result(timeout=CALL_TIMEOUT)

    def observe(self) -> None:
        while self.sub is not None and (event := self.sub.next_nowait()) is not None:
            self.trace.event(event)
            self.ledger.observe(event)

    def settle(self) -> None:
        """Deliver everything, the provider reacting, until nothing moves."""
        for _ in range(500):
            self.barrier()
            self.clock.advance(0)  # timers due now (a restart's zero backoff)
            if not self.runner.pending():
                self.observe()
                return
            self.runner.run()
        raise AssertionError("the host never settled")

    def published(self) -> ChatState:
        """`chat.state()`, checked against what the subscriber saw (read your writes)."""
        assert self.chat is not None
        state = self.chat.state(timeout=CALL_TIMEOUT)
        self.observe()
        assert self.ledger.state is not None
        assert normalized(self.ledger.state) == normalized(state), (
            "state() and the subscriber's snapshot plus events disagree"
        )
        self.ledger.check_texts(state)
        self.ledger.check_handles(state)
        return state

    def call(self, what: str, thunk: Callable[[], Any], *allowed: ErrorCode) -> Any:
        """A surface call; an expected refusal (one of `allowed`) is its answer."""
        try:
            answer = thunk()
        except AgentHostError as error:
            self.trace.call(what, error)
            assert error.code in allowed, f"{what}: unexpected {error.code}: {error.message}"
            return error
        self.trace.call(what, answer)
        return answer

    def _script(self, text: str, script: str) -> None:
        self.scripts[text] = script
        found = steps(script, text)
        if found is not None:
            self.provider.on(text, *found)
        if script in ("gated", "crash_at_gate"):
            self.gates.add(f"g:{text}")
        self.crashed = self.crashed or script.startswith("crash")

    def _pending(self, kinds: tuple[PendingKind, ...]) -> list[str]:
        state = self.ledger.state
        if state is None:
            return []
        return [m.id for m in state.pending if m.kind in kinds]

    def running(self) -> bool:
        return self.ledger.state is not None and self.ledger.state.active_turn is not None

    def asking(self) -> bool:
        """A turn runs whose script asks the user or a client something."""
        state = self.ledger.state
        active = None if state is None else state.active_turn
        return active is not None and self.scripts.get(active.message.text) in ASKING

    def _answer(self, request: OpenRequest, approve: bool) -> None:
        chat = self.chat
        assert chat is not None
        if request.kind is RequestKind.PERMISSION:
            kwargs: dict[str, Any] = {"approved": approve}
        elif request.kind is RequestKind.USER_INPUT:
            kwargs = {"answer": "this one"}
        else:
            kwargs = {"result": "<html>", "client_id": CLIENT}
        self.call(
            f"answer {request.request_id} {kwargs}",
            lambda: chat.answer(request.request_id, **kwargs),
            ErrorCode.NOT_FOUND,
            ErrorCode.INVALID_ARGUMENT,
        )

    def _reach(self, gate: str) -> bool:
        """Deliver what is pending, oldest first, until the model waits at `gate`."""
        while not self.provider.parked_at(gate) and self.runner.pending():
            self.runner.deliver(0)
        self.observe()
        if not self.provider.parked_at(gate):
            self.trace.note(f"{gate} not reached")
            return False
        return True

    def _open(self, gate: str) -> None:
        self.provider.open(gate)
        self.gates.discard(gate)
        self.trace.call(f"open {gate}")
        self.barrier()
        self.observe()

    def quiet(self) -> bool:
        state = self.ledger.state
        return state is not None and state.active_turn is None and not state.pending

    def _send_and_settle(self, script: str) -> Any:
        text = f"m{next(self.names)}"
        self._script(text, script)
        handle = self.call(f"send {text} ({script})", lambda: self.chat.send(text))  # type: ignore[union-attr]
        self.ledger.sent_text(text, handle)
        self.settle()
        outcome = handle.result(timeout=CALL_TIMEOUT)
        self.trace.call(f"outcome of {text}", outcome)
        self.published()
        return outcome

    def _settle_removals(self) -> None:
        for pending_id, removal in self.removals:
            try:
                answer = removal.result(timeout=CALL_TIMEOUT)
            except AgentHostError as error:
                assert error.code in (
                    ErrorCode.NOT_FOUND,
                    ErrorCode.INVALID_ARGUMENT,
                    ErrorCode.HOST_STOPPED,
                )
                answer = error
            self.trace.call(f"removal of {pending_id} settled", answer)
            if answer is True:
                self.ledger.removed(pending_id)
        self.removals = []

    # -- the end -------------------------------------------------------------------------------
    def teardown(self) -> None:
        try:
            if self.host is not None:
                self.finish()
        except AssertionError as failure:
            raise AssertionError(self.trace.write(failure)) from failure
        finally:
            try:
                if self.host is not None:
                    self.host.stop()
            finally:
                self.scope.__exit__(None, None, None)
                self.folder.cleanup()

    def finish(self) -> None:
        """Let every turn end (gates opened, requests answered, stalls cancelled, the
        queue released by a success), then check the end state."""
        assert self.chat is not None
        for _ in range(60):
            self.settle()
            self._settle_removals()
            state = self.published()
            if state.active_turn is None and not state.pending:
                break
            parked = [g for g in self.gates if self.provider.parked_at(g)]
            if state.open_requests:
                self._answer(state.open_requests[0], approve=True)
            elif parked:
                for gate in parked:
                    self.provider.open(gate)
                    self.gates.discard(gate)
                self.trace.call(f"finish: open {parked}")
            elif state.active_turn is not None:
                self.call("finish: cancel", lambda: self.chat.cancel())  # type: ignore[union-attr]
            else:  # the queue waits for a success
                self.clock.advance(COOLDOWN_S + 1)
                self._send_and_settle("echo")
        else:
            raise AssertionError("the chat never came to rest")
        state = self.published()
        self.ledger.check_ended_once(state)
        for sent in self.ledger.sent:
            if sent.handle is not None:
                assert sent.handle.done(), f"{sent.text!r}'s handle never resolved"
