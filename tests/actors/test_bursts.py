"""A provider's burst of events travels as one message per hop: connection ->
tracker -> chat -> subscriber, in order and complete."""

import asyncio
from pathlib import Path

from agenthost.actors import Host, use_runtime
from agenthost.actors.handles import Subscription
from agenthost.actors.protocol import (
    ApplyActions,
    ChatBatch,
    DeltaRun,
    EndTurn,
    FromProvider,
    SteeringCancelled,
)
from agenthost.messages import OutcomeState
from agenthost.messages.commands import CancelTurn
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import AssistantDelta, Lagged, TurnCompleted
from agenthost.messages.provider import (
    CallSettled,
    ConnectionFailed,
    Idle,
    ProviderCancel,
    ProviderSend,
    ProviderSteer,
    ReplyDelta,
    SteerAnswered,
    UserMessageEcho,
)
from agenthost.providers.base import Emit, Provider, ProviderAdapter, ProviderCrashed
from agenthost.providers.scripted import SHAPES, Gate, Say, ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.store.records import SaveAssistantText, SaveTurnEnded
from agenthost.testing import DeterministicRunner, FakeClock
from tests.fakes.runner import delivered, from_provider, unbatched
from tests.fakes.stores import RecordingStore


def test_a_reply_streamed_in_one_pass_reaches_tracker_and_chat_as_one_message_each(
    db_path: Path,
) -> None:
    provider = ScriptedProvider().on("go", *(Say(str(i)) for i in range(10)))
    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
        )
        chat = host.create_session().chat()
        events = chat.subscribe()
        events.next(10)  # the snapshot
        turn = chat.send("go")
        assert turn.result(timeout=10).state is OutcomeState.COMPLETE
        bursts = [d.message for d in runner.history if isinstance(d.message, FromProvider)]
        replies = [b for b in bursts if any(isinstance(e, ReplyDelta) for e in b.events)]
        assert len(replies) == 1
        kinds = [type(e) for e in replies[0].events]
        # the send's result rides the same burst, behind what the send emitted
        assert kinds[0] is UserMessageEcho and kinds[-2:] == [Idle, CallSettled]
        assert [b for b in bursts if b is not replies[0]] == []
        assert kinds.count(ReplyDelta) == 10
        to_chat = [
            m
            for d in runner.history
            if d.actor == "ChatActor"
            for m in unbatched(d.message)
            if isinstance(m, ApplyActions)
        ]
        [runs] = [[a for a in m.actions if isinstance(a, DeltaRun)] for m in to_chat]
        assert [len(run.texts) for run in runs] == [10]  # one record, not ten deltas
        assert any(isinstance(d.message, ChatBatch) for d in runner.history)
        seen = []
        while not isinstance(event := events.next(10), TurnCompleted):
            seen.append(event)
        assert [e.text for e in seen if isinstance(e, AssistantDelta)] == [
            str(i) for i in range(10)
        ]
        host.stop()


def test_a_burst_that_overflows_a_subscription_queues_what_fits_then_lagged() -> None:
    subscription = Subscription(maxsize=3)
    assert subscription.push(AssistantDelta(turn_id="t", part_id="p", text="0"))
    burst = [AssistantDelta(turn_id="t", part_id="p", text=str(i)) for i in range(1, 6)]
    assert subscription.push_many(burst) is False
    events = list(subscription)
    assert [e.text for e in events[:-1]] == ["0", "1", "2"]
    assert isinstance(events[-1], Lagged) and events[-1].dropped == 3
    assert subscription.push_many(burst) is False  # closed: nothing more


def test_a_turn_end_arriving_with_its_last_text_stores_the_text_once_with_the_end(
    db_path: Path,
) -> None:
    store = RecordingStore(db_path)
    provider = ScriptedProvider().on("go", Say("hel"), Say("lo"))
    with Host.start(store=store, providers={"scripted": provider}, clock=FakeClock()) as host:
        chat = host.create_session().chat()
        assert chat.send("go").result(timeout=10).text == "hello"
        ends = [op for op in store.log if isinstance(op, SaveTurnEnded)]
        assert [op.assistant_text for op in ends] == ["hello"]
        assert not [op for op in store.log if isinstance(op, SaveAssistantText)]
    reopened = SqliteStore(db_path)
    reopened.open()
    [session] = reopened.list_sessions()
    record = reopened.load_session(session.id)
    assert record is not None
    assert [t.assistant_text for t in record.chats[0].turns] == ["hello"]
    reopened.close()


def test_what_the_tracker_queued_for_the_chat_leaves_before_what_it_sends_elsewhere(
    db_path: Path,
) -> None:
    """A cancel ends the turn (EndTurn, queued for the chat), then hands the
    steering it held back to the queue drain, which tells the chat in turn: the
    chat must hear of the end first, as when every message went out at once."""
    provider = ScriptedProvider().on("go", Say("a"), Gate("g"), Say("b"))
    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
        )
        chat = host.create_session().chat()
        turn = chat.send("go")
        runner.run(until=lambda: provider.parked_at("g"))
        chat.steer("later")
        runner.run(until=delivered(runner, from_provider(SteerAnswered)))
        chat._ref.tell(CancelTurn())
        runner.run()
        order = [
            type(m).__name__
            for d in runner.history
            for m in unbatched(d.message)
            if isinstance(m, EndTurn | SteeringCancelled)
        ]
        assert order[:2] == ["EndTurn", "SteeringCancelled"]
        assert turn.result(timeout=10).state is OutcomeState.CANCELLED
        provider.open("g")
        host.stop()


class _DiesAsItSends(ProviderAdapter):
    """The backend dies while the send returns: both in one pass of the loop."""

    capabilities = SHAPES["claude"]  # the call settles with the turn

    def __init__(self, emit: Emit) -> None:
        self._emit = emit

    async def send(self, message: ProviderSend) -> str | None:
        # The backend's reader sees the process die as the send returns: the
        # failure is emitted after the send finished, before its result goes out.
        failed = ConnectionFailed(
            error=AgentHostError(code=ErrorCode.PROVIDER_ERROR, message="gone")
        )
        asyncio.get_running_loop().call_soon(self._emit, failed)
        return "m1"

    async def cancel(self, message: ProviderCancel) -> None:
        return None


class _DyingProvider(Provider):
    capabilities = SHAPES["claude"]

    def open_session(self, session_id: str, chat_id: str, emit: Emit) -> ProviderAdapter:
        return _DiesAsItSends(emit)


def test_a_send_result_behind_a_connection_failure_in_its_burst_is_dropped(db_path: Path) -> None:
    """The send returned, but its connection died in the same pass: its result
    must not close the turn as complete (rule 2); the turn's producer died, so
    it ends as execution_abandoned (rule 5)."""
    host = Host.start(store=SqliteStore(db_path), providers={"scripted": _DyingProvider()})
    try:
        outcome = host.create_session().chat().send("hello").result(timeout=10)
        assert outcome.state is OutcomeState.ERROR
        assert outcome.error is not None
        assert outcome.error.code is ErrorCode.EXECUTION_ABANDONED
    finally:
        host.stop()


class _CrashesOnSteer(ProviderAdapter):
    """A steer finds the backend dead (its call raises ProviderCrashed) just as
    the running send returns: the crash's result reaches the connection after
    the send's result was ready."""

    capabilities = SHAPES["claude"]  # the call settles with the turn

    def __init__(self) -> None:
        self.sending = False
        self._released: asyncio.Event | None = None

    async def send(self, message: ProviderSend) -> str | None:
        self._released = asyncio.Event()
        self.sending = True
        await self._released.wait()
        return "m1"

    async def steer(self, message: ProviderSteer) -> str | None:
        assert self._released is not None
        self._released.set()
        raise ProviderCrashed("the CLI died")

    async def cancel(self, message: ProviderCancel) -> None:
        return None


class _SteerCrashProvider(Provider):
    capabilities = SHAPES["claude"]

    def __init__(self) -> None:
        self.adapters: list[_CrashesOnSteer] = []

    def open_session(self, session_id: str, chat_id: str, emit: Emit) -> ProviderAdapter:
        self.adapters.append(_CrashesOnSteer())
        return self.adapters[-1]


def test_a_send_result_after_another_call_crashed_is_dropped(db_path: Path) -> None:
    """The steer's crash comes back before the send's result, but the connection
    actor has not handled it yet (the test holds every delivery): the send's
    result must not close the turn as complete; its producer died (rule 5)."""
    provider = _SteerCrashProvider()
    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
        )
        chat = host.create_session().chat()
        turn = chat.send("hello")
        runner.run(until=lambda: bool(provider.adapters) and provider.adapters[0].sending)
        chat.steer("now")
        outcome = turn.result(timeout=10)
        assert outcome.state is OutcomeState.ERROR
        assert outcome.error is not None
        assert outcome.error.code is ErrorCode.EXECUTION_ABANDONED
        host.stop()
