"""Read your writes: once a call that changes a chat returns, `chat.state()` and
the snapshot of any subscriber that comes after it show what it did.

Each call is tried twice: with nothing waiting to be published (its effect is
published at once), and behind a turn end whose commit the store holds (its
reply waits in the publisher's outbox, behind that end). Durability keeps its
rule meanwhile: the held end is not published, and neither is anything after
it, so the caller's reply, and what it changed, come only once it is.
"""

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from agenthost.actors import Chat, Host, use_runtime
from agenthost.actors.protocol import StartSteeringTurn
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState, TurnState
from agenthost.messages.commands import (
    CancelTurn,
    EditPendingMessage,
    RemovePendingMessage,
    ReorderQueue,
    SendMessage,
    SetDraft,
    SteerMessage,
    TruncateChat,
)
from agenthost.messages.events import ChatSnapshot
from agenthost.messages.state import ChatState
from agenthost.providers.scripted import Gate, Say, ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.testing import DeterministicRunner, FakeClock
from tests.fakes.runner import unbatched
from tests.fakes.stores import GatedCommitStore

HELD = "behind an uncommitted turn end"
AT_ONCE = "published at once"


def answered(reply: pykka.Future[Any]) -> bool:
    """Whether an ask's reply is set, following a deferred reply (a future)."""
    while reply.done():
        value = reply.get(timeout=0)
        if not isinstance(value, pykka.Future):
            return True
        reply = value
    return False


def value_of(reply: pykka.Future[Any]) -> Any:
    value = reply.get(timeout=0)
    while isinstance(value, pykka.Future):
        value = value.get(timeout=0)
    return value


def snapshot(chat: Chat) -> ChatState:
    """What a subscriber arriving now is shown first."""
    sub = chat.subscribe()
    try:
        first = sub.next(10)
        assert isinstance(first, ChatSnapshot)
        return first.state
    finally:
        sub.close()


class Scene:
    """A chat on the deterministic runner (the store commits on its own thread).

    `idle()` and `busy()` set the chat up; in the held mode a turn's end is then
    reduced but its commit held, so whatever the test asks next waits behind it.
    `seen(reply)` delivers until the reply is answered (releasing the held commit
    once nothing else can move) and returns, at that moment, the chat's state
    and a new subscriber's snapshot.
    """

    def __init__(self, mode: str, db_path: Path, runner: DeterministicRunner) -> None:
        self.mode = mode
        self.runner = runner
        self.provider = ScriptedProvider(shape="copilot").on(
            "hold", Say("a"), Gate("g"), Say("b"), Gate("g2"), Say("c")
        )
        self.store = GatedCommitStore(SqliteStore(db_path))
        if mode == AT_ONCE:
            self.store.release()
        self.host = Host.start(
            store=self.store, providers={"scripted": self.provider}, clock=FakeClock()
        )
        self.chat = self.host.create_session().chat()

    def ask(self, message: object) -> pykka.Future[Any]:
        return self.chat._ref.ask(message, block=False)

    def until(self, condition: Callable[[], bool]) -> None:
        self.runner.run(until=condition)

    def idle(self) -> str:
        """A finished turn (its end held, in the held mode); its id."""
        turn = self.chat.send("quick")
        if self.mode == HELD:
            self.until(self.store.blocked.is_set)
            self.runner.run()
        else:
            turn.result(timeout=10)
        assert turn.id is not None
        return turn.id

    def busy(self) -> str:
        """A turn parked at a gate (in the held mode, the steering turn that took
        over from one whose end is held); its id."""
        self.chat.send("hold")
        self.until(lambda: self.provider.parked_at("g"))
        if self.mode == AT_ONCE:
            return self.chat.state().active_turn.id  # type: ignore[union-attr]
        self.chat.steer("nudge")
        self.until(lambda: self.provider.steered == 1)
        # Copilot: the model reads "nudge" at the gate; the first turn ends and the
        # steering turn goes on with the rest of the run, up to the second gate.
        self.provider.open("g")
        self.until(self.store.blocked.is_set)
        self.until(lambda: self.provider.parked_at("g2"))
        self.runner.run()
        started = [
            m
            for d in self.runner.history
            for m in unbatched(d.message)
            if isinstance(m, StartSteeringTurn)
        ]
        assert started, "the steering turn never started"
        return started[-1].turn_id

    def seen(self, reply: pykka.Future[Any]) -> list[ChatState]:
        self.runner.run()
        if not answered(reply):  # (a cancel waits for its own turn's end too)
            self.store.release()
            self.until(lambda: answered(reply))
        return [self.chat.state(), snapshot(self.chat)]


@pytest.fixture(params=[AT_ONCE, HELD])
def scene(request: pytest.FixtureRequest, db_path: Path) -> Iterator[Scene]:
    with use_runtime(DeterministicRunner(own_threads=True)) as runner:
        made = Scene(request.param, db_path, runner)
        yield made
        made.store.release()
        made.host.stop()


def test_a_send_while_idle_shows_its_turn_running(scene: Scene) -> None:
    scene.idle()
    reply = scene.ask(SendMessage(text="hold"))
    for state in scene.seen(reply):
        assert state.active_turn is not None and state.active_turn.message.text == "hold"
        assert state.active_turn.id == value_of(reply).turn_id


def test_a_send_while_busy_shows_its_queued_message(scene: Scene) -> None:
    scene.busy()
    reply = scene.ask(SendMessage(text="later"))
    for state in scene.seen(reply):
        pending_id = value_of(reply).pending_id
        assert [(m.id, m.text) for m in state.queued_messages] == [(pending_id, "later")]


def test_a_steer_shows_its_steering_message(scene: Scene) -> None:
    scene.busy()
    reply = scene.ask(SteerMessage(text="more"))
    for state in scene.seen(reply):
        steering = value_of(reply).pending
        assert [(m.id, m.text) for m in state.steering_messages] == [(steering.id, "more")]


def test_a_removed_queued_message_is_gone(scene: Scene) -> None:
    turn_id = scene.busy()
    queued = scene.ask(SendMessage(text="later", pending_id="q"))
    reply = scene.ask(RemovePendingMessage(pending_id="q"))
    for state in scene.seen(reply):
        assert value_of(reply) is True
        assert state.active_turn is not None and state.active_turn.id == turn_id
        assert state.queued_messages == ()
    assert value_of(queued).outcome.get(timeout=0).state is OutcomeState.REMOVED


def test_withdrawn_steering_is_gone(scene: Scene) -> None:
    turn_id = scene.busy()
    scene.ask(SteerMessage(text="more", pending_id="s"))
    scene.until(lambda: scene.provider.steered == 1 + (scene.mode == HELD))
    reply = scene.ask(RemovePendingMessage(pending_id="s"))  # copilot withdraws it
    for state in scene.seen(reply):
        assert value_of(reply) is True
        assert state.active_turn is not None and state.active_turn.id == turn_id
        assert state.steering_messages == ()


def test_an_edited_queued_message_shows_its_new_text(scene: Scene) -> None:
    scene.busy()
    scene.ask(SendMessage(text="later", pending_id="q"))
    reply = scene.ask(EditPendingMessage(pending_id="q", text="later, edited"))
    for state in scene.seen(reply):
        assert [m.text for m in state.queued_messages] == ["later, edited"]


def test_a_reordered_queue_shows_its_order(scene: Scene) -> None:
    scene.busy()
    for n in range(3):
        scene.ask(SendMessage(text=f"q{n}", pending_id=f"q{n}"))
    reply = scene.ask(ReorderQueue(pending_ids=("q2", "q0")))
    for state in scene.seen(reply):
        assert [m.id for m in state.queued_messages] == ["q2", "q0", "q1"]


def test_a_cancelled_turn_shows_as_cancelled(scene: Scene) -> None:
    turn_id = scene.busy()
    scene.ask(SendMessage(text="later", pending_id="q"))
    reply = scene.ask(CancelTurn())
    for state in scene.seen(reply):
        assert value_of(reply) is True
        assert state.active_turn is None
        assert (state.turns[-1].id, state.turns[-1].state) == (turn_id, TurnState.CANCELLED)
        assert [m.id for m in state.queued_messages] == ["q"]  # held: no success since


def test_a_truncated_chat_shows_no_turns(scene: Scene) -> None:
    scene.idle()
    reply = scene.ask(TruncateChat(turn_id=None))
    for state in scene.seen(reply):
        assert state.turns == () and state.active_turn is None


def test_a_draft_shows_once_set(scene: Scene) -> None:
    scene.idle()
    reply = scene.ask(SetDraft(text="half a thought"))
    for state in scene.seen(reply):
        assert state.draft == "half a thought"


def test_while_a_turn_end_is_uncommitted_nothing_after_it_is_published(db_path: Path) -> None:
    """The end is not published before its commit; a draft set and a cancel asked
    after it was reduced answer only once it is, each then showing the end."""
    with use_runtime(DeterministicRunner(own_threads=True)) as runner:
        scene = Scene(HELD, db_path, runner)
        sub = scene.chat.subscribe()
        turn = scene.chat.send("quick")
        scene.until(scene.store.blocked.is_set)
        runner.run()
        draft = scene.ask(SetDraft(text="next"))
        cancel = scene.ask(CancelTurn())
        runner.run()
        for state in [scene.chat.state(), snapshot(scene.chat)]:
            assert state.active_turn is not None and state.active_turn.id == turn.id
            assert state.turns == () and state.draft is None
        seen = []
        while (event := sub.next_nowait()) is not None:
            seen.append(type(event).__name__)
        assert "TurnCompleted" not in seen and "DraftChanged" not in seen
        assert not turn.done() and not answered(draft) and not answered(cancel)
        scene.store.release()
        scene.until(lambda: answered(draft) and answered(cancel))
        assert value_of(cancel) is False  # the turn had ended: nothing to cancel
        assert turn.result(timeout=0).state is OutcomeState.COMPLETE
        for state in [scene.chat.state(), snapshot(scene.chat)]:
            assert [(t.id, t.state) for t in state.turns] == [(turn.id, TurnState.COMPLETE)]
            assert state.active_turn is None and state.draft == "next"
        scene.host.stop()


def test_an_id_the_state_listed_is_not_found_once_the_chat_moved_on(
    db_path: Path, provider: ScriptedProvider
) -> None:
    """A listed id is no reservation: the queued message ran meanwhile."""
    provider.on("hold", Gate("g"))
    with Host.start(store=SqliteStore(db_path), providers={"scripted": provider}) as host:
        chat = host.create_session().chat()
        first = chat.send("hold")
        queued = chat.send("later")
        assert queued.pending_id is not None
        assert [m.id for m in chat.state().queued_messages] == [queued.pending_id]
        provider.open("g")
        assert first.result(timeout=10).state is OutcomeState.COMPLETE
        assert queued.result(timeout=10).state is OutcomeState.COMPLETE
        with pytest.raises(AgentHostError) as caught:
            chat.remove_pending(queued.pending_id)
        assert caught.value.code is ErrorCode.NOT_FOUND
