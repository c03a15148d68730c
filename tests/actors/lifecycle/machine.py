"""The lifecycle property machine: one chat driven through the public surface
(Host, Session, Chat) with the scripted provider in one shape, on the
deterministic runner and the fake clock (the harness, harness.py).

Hypothesis chooses each step: a call (sends idle and busy with a script each,
steering, removals, some racing the next delivery, edits, reorders, cancels,
answers approving or denying), the delivery of one pending message, a gate
opened (a turn held open, a stall until opened or cancelled), steering while
the model waits at a gate, crashes past the restart limit, time passing, a
restart with a resume fault (none, transient, no history, another error,
transient past the retry limit) and an idle release. A send's script is an
echo, a gate, a crash (at once, or at a gate with steering unread), a dropped
completion, a refusal, a permission, a question, a client's tool, a tool, or a
subagent (in the background too). Each step is checked by ledger.py's rules;
a failure is written down as a trace (trace.py).
"""

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from agenthost.messages import AgentHostError, ErrorCode, TurnState
from agenthost.messages.state import ClientTool, PendingKind
from tests.actors.lifecycle.harness import (
    CALL_TIMEOUT,
    CLIENT,
    COOLDOWN_S,
    FAULTS,
    IDLE_S,
    MAX_RESTARTS,
    NETWORK,
    SCRIPTS,
    Harness,
    traced,
)
from tests.actors.lifecycle.ledger import check_restored


class Lifecycle(Harness, RuleBasedStateMachine):
    """See the module docstring."""

    @initialize()
    @traced
    def start(self) -> None:
        self.host = self._start()
        self.session = self.host.create_session(provider="scripted", timeout=CALL_TIMEOUT)
        self.session.set_client_tools(CLIENT, [ClientTool(name="fetch")])
        self.chat = self.session.chat()
        self._subscribe()
        self.trace.call("start", self.session.id)
        self.settle()

    # -- the client -------------------------------------------------------------------------
    @rule(script=st.sampled_from(SCRIPTS))
    @traced
    def send(self, script: str) -> None:
        assert self.chat is not None
        text = f"m{next(self.names)}"
        self._script(text, script)
        handle = self.call(f"send {text} ({script})", lambda: self.chat.send(text))  # type: ignore[union-attr]
        sent = self.ledger.sent_text(text, handle)
        state = self.published()
        assert (
            handle.id in {t.id for t in state.turns} | {state.active_turn_id}
            or handle.pending_id in {m.id for m in state.pending}
            or sent.turn_id is not None
            or sent.gone
        ), f"send {text} returned but the state does not show it"

    @rule()
    @traced
    def steer(self) -> None:
        assert self.chat is not None
        text = f"s{next(self.names)}"
        self.scripts[text] = "echo"
        pending = self.call(f"steer {text}", lambda: self.chat.steer(text))  # type: ignore[union-attr]
        sent = self.ledger.steered(text, pending)
        state = self.published()
        assert pending.id in {m.id for m in state.pending} or sent.turn_id or sent.gone, (
            f"steer {text} returned but the state does not show it"
        )

    @precondition(lambda self: self._pending((PendingKind.QUEUED, PendingKind.STEERING)))
    @rule(data=st.data())
    @traced
    def remove(self, data: st.DataObject) -> None:
        assert self.chat is not None
        pending_id = data.draw(
            st.sampled_from(self._pending((PendingKind.QUEUED, PendingKind.STEERING)))
        )
        answer = self.call(
            f"remove_pending {pending_id}",
            lambda: self.chat.remove_pending(pending_id),  # type: ignore[union-attr]
            ErrorCode.NOT_FOUND,
            ErrorCode.INVALID_ARGUMENT,
        )
        if answer is True:
            self.ledger.removed(pending_id)
        state = self.published()
        if answer is True or (
            isinstance(answer, AgentHostError) and answer.code is ErrorCode.NOT_FOUND
        ):
            assert pending_id not in {m.id for m in state.pending}, (
                "a removed message is still listed"
            )

    @precondition(lambda self: self._pending((PendingKind.QUEUED, PendingKind.STEERING)))
    @rule(data=st.data())
    @traced
    def remove_nowait(self, data: st.DataObject) -> None:
        """A removal racing whatever is delivered next (settled later)."""
        assert self.chat is not None
        pending_id = data.draw(
            st.sampled_from(self._pending((PendingKind.QUEUED, PendingKind.STEERING)))
        )
        self.removals.append((pending_id, self.chat.remove_pending_nowait(pending_id)))
        self.trace.call(f"remove_pending_nowait {pending_id}")

    @precondition(lambda self: self._pending((PendingKind.QUEUED,)))
    @rule(data=st.data())
    @traced
    def edit(self, data: st.DataObject) -> None:
        assert self.chat is not None
        pending_id = data.draw(st.sampled_from(self._pending((PendingKind.QUEUED,))))
        sent = self.ledger.by_pending.get(pending_id)
        if sent is None:
            return
        text = f"{sent.text}~{next(self.names)}"
        self._script(text, self.scripts.get(sent.text, "echo"))
        answer = self.call(
            f"edit_pending {pending_id} {text}",
            lambda: self.chat.edit_pending(pending_id, text),  # type: ignore[union-attr]
            ErrorCode.NOT_FOUND,
            ErrorCode.INVALID_ARGUMENT,
        )
        if not isinstance(answer, AgentHostError):
            self.ledger.edited(pending_id, text)
        state = self.published()
        if not isinstance(answer, AgentHostError):
            listed = {m.id: m.text for m in state.pending}
            assert listed.get(pending_id, text) == text, "an edit returned but shows the old text"

    @precondition(lambda self: len(self._pending((PendingKind.QUEUED,))) > 1)
    @rule(data=st.data())
    @traced
    def reorder(self, data: st.DataObject) -> None:
        assert self.chat is not None
        ids = data.draw(st.permutations(self._pending((PendingKind.QUEUED,))))[:2]
        self.call(f"reorder_queue {ids}", lambda: self.chat.reorder_queue(ids))  # type: ignore[union-attr]
        state = self.published()
        queued = [m.id for m in state.queued_messages]
        still = [i for i in ids if i in queued]  # (requeued steering may head it since)
        assert [i for i in queued if i in ids] == still, "a reorder returned, its order did not"

    @precondition(Harness.running)
    @rule()
    @traced
    def cancel(self) -> None:
        assert self.chat is not None
        before = {
            t.id
            for t in (self.ledger.state.turns if self.ledger.state else ())
            if t.state is TurnState.CANCELLED
        }
        answer = self.call("cancel", lambda: self.chat.cancel())  # type: ignore[union-attr]
        state = self.published()
        if answer is True:
            cancelled = {t.id for t in state.turns if t.state is TurnState.CANCELLED}
            assert cancelled - before, "cancel returned True but no turn shows as cancelled"

    @precondition(Harness.running)
    @rule()
    @traced
    def cancel_nowait(self) -> None:
        assert self.chat is not None
        self.call("cancel_nowait", lambda: self.chat.cancel_nowait())  # type: ignore[union-attr]

    @precondition(Harness.asking)
    @rule(data=st.data(), approve=st.booleans())
    @traced
    def answer(self, data: st.DataObject, approve: bool) -> None:
        """The turn's request opens (what is pending is delivered, oldest first,
        until it does) and is answered: approved or denied, answered, a result."""
        while self.runner.pending() and not (self.ledger.state and self.ledger.state.open_requests):
            self.runner.deliver(0)
            self.observe()
        assert self.ledger.state is not None
        if not self.ledger.state.open_requests:
            self.trace.note("no request opened")
            return
        self._answer(data.draw(st.sampled_from(self.ledger.state.open_requests)), approve)
        self.published()

    # -- the model and time ---------------------------------------------------------------------
    @precondition(lambda self: self.gates)
    @rule(data=st.data())
    @traced
    def open_gate(self, data: st.DataObject) -> None:
        """The model reaches a gate and the gate opens."""
        gate = data.draw(st.sampled_from(sorted(self.gates)))
        if self._reach(gate):
            self._open(gate)

    @precondition(lambda self: self.gates)
    @rule(data=st.data(), then_open=st.booleans())
    @traced
    def steer_at_gate(self, data: st.DataObject, then_open: bool) -> None:
        """Steering the model holds while it waits at a gate (DESIGN.md rule 1's
        races start here): it reads it once the gate opens, or a crash finds it."""
        gate = data.draw(st.sampled_from(sorted(self.gates)))
        if not self._reach(gate):
            return
        handed = self.provider.steered
        self.steer()
        while self.provider.steered == handed and self.runner.pending():
            self.runner.deliver(0)
        self.observe()
        if then_open:
            self._open(gate)

    @precondition(Harness.quiet)
    @rule()
    @traced
    def crash_past_the_restart_limit(self) -> None:
        """The provider fails more often than its restart intensity allows: it is
        unavailable (a turn fails at once, saying so) until its cool-down passes."""
        for _ in range(4):
            outcome = self._send_and_settle("crash")
            if outcome.error is not None and outcome.error.code is ErrorCode.PROVIDER_UNAVAILABLE:
                break
        else:
            raise AssertionError("a provider failing every turn was never marked unavailable")
        outcome = self._send_and_settle("echo")
        assert outcome.error is not None and outcome.error.code is ErrorCode.PROVIDER_UNAVAILABLE, (
            "a provider past its restart limit ran a turn before its cool-down"
        )

    @precondition(lambda self: self.crashed)
    @rule()
    @traced
    def time_passes(self) -> None:
        """Time the watched session does not mind (a cool-down after restarts ends)."""
        self.clock.advance(COOLDOWN_S + 1)
        self.trace.call("time passes")
        self.barrier()
        self.observe()

    # -- delivery ---------------------------------------------------------------------------
    @precondition(lambda self: self.host is not None and self.runner.pending())
    @rule(data=st.data())
    @traced
    def deliver_one(self, data: st.DataObject) -> None:
        delivery = self.runner.deliver(data.draw(st.sampled_from(self.runner.deliverable())))
        self.trace.note(f"delivered {type(delivery.message).__name__} to {delivery.actor}")
        self.observe()

    @rule()
    @traced
    def settle_and_check(self) -> None:
        self.settle()
        self._settle_removals()
        self.published()

    # -- leaving memory and coming back -------------------------------------------------------
    @precondition(lambda self: self.restarts < MAX_RESTARTS and self.ledger.sent)
    @rule(fault=st.sampled_from(FAULTS))
    @traced
    def restart(self, fault: str) -> None:
        assert self.host is not None and self.session is not None and self.chat is not None
        self.settle()
        self._settle_removals()
        before = self.published()
        [stored] = self.host.list_sessions()
        session_id, chat_id = self.session.id, self.chat.id
        self.sub.close()
        self.sub = None
        self.ledger.host_stopped()
        self.host.stop()
        self.host = None
        self.restarts += 1
        failures = {"transient": 2, "no_history": 1, "other": 1, "past_retry_limit": 3}
        if fault == "no_history":
            self.provider.fail_resume(code=-32603, message="Session not found: s", times=1)
        elif fault == "other":
            self.provider.fail_resume(code=-32000, message="permission denied", times=1)
        elif fault in failures:
            self.provider.fail_resume(code=-32603, message=NETWORK, times=failures[fault])
        self.host = self._start()
        if fault in ("other", "past_retry_limit"):
            refused = self.call(
                f"open_session {session_id} ({fault})",
                lambda: self.host.open_session(session_id, timeout=CALL_TIMEOUT),  # type: ignore[union-attr]
                ErrorCode.PROVIDER_ERROR,
            )
            assert isinstance(refused, AgentHostError), f"a resume failing with {fault} opened"
            self.settle()
            assert self.host.list_sessions() == [stored], "a failed resume changed the session"
        self.session = self.call(
            f"open_session {session_id} ({fault})",
            lambda: self.host.open_session(session_id, timeout=CALL_TIMEOUT),  # type: ignore[union-attr]
        )
        assert {s.id for s in self.host.list_sessions()} == {session_id}, "a session appeared"
        self.session.set_client_tools(CLIENT, [ClientTool(name="fetch")])
        self.chat = self.session.chat(chat_id)
        self._subscribe()
        self.settle()
        after = self.published()
        check_restored(before, after, running_allowed=True)

    @precondition(lambda self: self.releases < MAX_RESTARTS and self.ledger.sent)
    @rule()
    @traced
    def idle_release(self) -> None:
        assert self.host is not None and self.chat is not None
        self.releases += 1
        self.settle()
        self._settle_removals()
        before = self.published()
        released = self.host.counters()["released"]
        self.sub.close()
        self.sub = None
        self.settle()
        self.clock.advance(IDLE_S + 1)
        self.settle()
        went = self.host.counters()["released"] > released
        self.trace.call("idle release", went)
        if went:
            assert before.active_turn is None and not before.steering_messages, (
                "a session left memory with a turn running or steering pending"
            )
            self.ledger.host_stopped()
        self._subscribe()  # the handle restores it
        self.settle()
        after = self.published()
        if went:
            check_restored(before, after, running_allowed=False)
