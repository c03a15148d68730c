"""The seven hooks as a user's contribution sees them, through the public surface."""

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agenthost.actors import Host
from agenthost.actors.contributions import (
    ChatKey,
    ClientAction,
    Contribution,
    ContributionError,
    Dispatch,
    IncomingRequest,
    Mementos,
    Outgoing,
    OutgoingTurn,
    TurnEnd,
    TurnEndReason,
)
from agenthost.actors.protocol import EndTurn
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.messages.events import (
    AssistantDelta,
    ChatTitleChanged,
    DraftChanged,
    IsArchivedChanged,
    PendingMessageAdded,
    PendingMessageRemoved,
    Truncated,
    TurnCancelled,
    TurnCompleted,
    TurnStarted,
)
from agenthost.providers.scripted import Crash, Gate, Reject, Say, ScriptedProvider

Start = Callable[..., Host]


class Recorder(Contribution):
    """Remembers what each observer hook saw (class-level: one instance per host)."""

    id = "test_recorder"
    order = 900
    ends: ClassVar[list[TurnEnd]] = []
    applied: ClassVar[list[ClientAction]] = []
    dispatched: ClassVar[list[Dispatch]] = []

    def on_turn_end(self, end: TurnEnd) -> None:
        Recorder.ends.append(end)

    def on_did_apply_client_action(self, applied: ClientAction) -> None:
        Recorder.applied.append(applied)

    def on_did_dispatch_action(self, dispatch: Dispatch) -> None:
        Recorder.dispatched.append(dispatch)


@pytest.fixture
def recorder() -> type[Recorder]:
    Recorder.ends, Recorder.applied, Recorder.dispatched = [], [], []
    return Recorder


def test_turn_end_reasons_for_each_way_a_request_ends(
    start_host: Start, recorder: type[Recorder]
) -> None:
    provider = (
        ScriptedProvider()
        .on("fail", Reject("the model refused"))
        .on("crash", Say("x"), Crash())
        .on("wait", Gate("g"), Say("never"))
    )
    host = start_host(provider, contributions=[recorder])
    session = host.create_session()
    chat = session.chat()
    chat.send("ok").result(timeout=10)
    chat.send("fail").result(timeout=10)
    chat.send("crash").result(timeout=10)
    waiting = chat.send("wait")
    provider.wait_reached("g", timeout=10)
    chat.cancel()
    waiting.result(timeout=10)
    chat.send("/help").result(timeout=10)
    chat.set_read_only(True)
    chat.send("refused").result(timeout=10)
    chat.state()  # every hook of those sends has run
    assert [e.reason for e in recorder.ends] == [
        TurnEndReason.SUCCESS,
        TurnEndReason.ERROR,
        TurnEndReason.ABANDONED,
        TurnEndReason.CANCELLED,
        TurnEndReason.LOCAL_COMMAND,
        TurnEndReason.REJECTED,
    ]
    assert [e.turn is None for e in recorder.ends] == [False] * 4 + [True] * 2
    assert all(e.chat == ChatKey(session_id=session.id, chat_id=chat.id) for e in recorder.ends)


def test_a_terminal_action_for_no_active_turn_fires_no_turn_end(
    start_host: Start, recorder: type[Recorder]
) -> None:
    host = start_host(ScriptedProvider(), contributions=[recorder])
    chat = host.create_session().chat()
    chat.send("hi").result(timeout=10)
    before = len(recorder.ends)
    chat._ref.tell(EndTurn(action=TurnCompleted(turn_id="not-running")))
    chat.state()
    assert len(recorder.ends) == before == 1


def test_client_actions_and_every_dispatch_are_observed_with_rejections(
    start_host: Start, recorder: type[Recorder]
) -> None:
    provider = ScriptedProvider().on("first", Gate("g"), Say("a"))
    host = start_host(provider, contributions=[recorder])
    session = host.create_session()
    chat = session.chat()
    first = chat.send("first", client_id="alice")
    provider.wait_reached("g", timeout=10)
    queued = chat.send("queued", client_id="bob")
    chat.set_draft("draft")
    session.archive()  # bob's queued message is refused when its turn comes
    provider.open("g")
    first.result(timeout=10)
    refused = chat.send("no", client_id="carol").result(timeout=10)
    assert queued.result(timeout=10).state is refused.state is OutcomeState.REJECTED
    chat.state()
    applied = [(type(a.action), a.client_id) for a in recorder.applied]
    assert (TurnStarted, "alice") in applied
    assert (PendingMessageAdded, "bob") in applied
    assert (DraftChanged, None) in applied
    assert (IsArchivedChanged, None) in applied
    assert not any(
        isinstance(a.action, TurnStarted) and a.client_id != "alice" for a in recorder.applied
    )
    assert refused.error is not None
    rejected = {
        (type(d.action), d.client_id, d.from_client, d.rejection)
        for d in recorder.dispatched
        if d.rejection is not None
    }
    assert rejected == {
        (TurnStarted, "bob", False, refused.error.message),  # from the queue, as bob's
        (TurnStarted, "carol", True, refused.error.message),
    }
    host_origin = [d for d in recorder.dispatched if isinstance(d.action, TurnCompleted)]
    assert host_origin and not any(d.from_client for d in host_origin)


def test_an_observer_of_deltas_sees_each_with_the_state_it_made(
    start_host: Start, recorder: type[Recorder]
) -> None:
    """Deltas of one burst are reduced together only when nobody observes them."""
    provider = ScriptedProvider().on("go", Say("a"), Say("b"), Say("c"))
    host = start_host(provider, contributions=[recorder])
    chat = host.create_session().chat()
    assert chat.send("go").result(timeout=10).text == "abc"
    seen = []
    for dispatch in recorder.dispatched:
        if isinstance(dispatch.action, AssistantDelta):
            active = dispatch.state.active_turn
            assert active is not None
            seen.append((dispatch.action.text, active.response_parts[-1].content))
    assert seen == [("a", "a"), ("b", "ab"), ("c", "abc")]


class Outgoer(Contribution):
    id = "test_outgoing"

    def on_outgoing_turn(self, turn: OutgoingTurn) -> Outgoing:
        return Outgoing(text=turn.text.upper(), instructions=f"answer in {len(turn.text)} words")


class BrokenOutgoer(Contribution):
    id = "test_broken_outgoing"
    order = 1

    def on_outgoing_turn(self, turn: OutgoingTurn) -> Outgoing:
        raise RuntimeError("broken")


def test_outgoing_turns_reach_the_provider_as_contributions_leave_them(
    start_host: Start,
) -> None:
    provider = ScriptedProvider()
    host = start_host(provider, contributions=[BrokenOutgoer, Outgoer])
    chat = host.create_session().chat()
    outcome = chat.send("hello there").result(timeout=10)
    assert outcome.state is OutcomeState.COMPLETE
    assert provider.prompts == ["HELLO THERE"]
    assert provider.instructions == ["answer in 11 words"]
    assert chat.state().turns[0].user_text == "hello there"  # the user's words are kept


class Faulty(Contribution):
    id = "test_faulty"
    order = 10

    def on_incoming_request(self, request: IncomingRequest) -> Any:
        raise ValueError("bug")


def test_an_admission_contribution_that_raises_rejects_the_send_naming_itself(
    start_host: Start,
) -> None:
    provider = ScriptedProvider()
    chat = start_host(provider, contributions=[Faulty]).create_session().chat()
    outcome = chat.send("hello").result(timeout=10)
    assert outcome.state is OutcomeState.REJECTED and outcome.error is not None
    assert outcome.error.code is ErrorCode.INTERNAL and "test_faulty" in outcome.error.message
    assert provider.prompts == []


class Titler(Contribution):
    """Keeps a per-session and a per-chat memento; titles restored chats from them."""

    id = "test_titler"

    def __init__(self, mementos: Mementos) -> None:
        self.mementos = mementos

    def on_did_dispatch_action(self, dispatch: Dispatch) -> None:
        if isinstance(dispatch.action, TurnStarted):
            count = self.mementos.get(dispatch.chat, "turns", default=0) + 1
            self.mementos.set(dispatch.chat, "turns", value=count)
            session = ChatKey(session_id=dispatch.chat.session_id)
            self.mementos.set(session, "last", "chat", value=dispatch.chat.chat_id)

    def on_hydrate_chat(self, title: str, draft: str | None, *, chat: ChatKey) -> Any:
        return f"{self.mementos.get(chat, 'turns', default=0)} turns", draft


class FailingHydration(Contribution):
    id = "test_failing_hydration"
    order = 2000

    def on_hydrate_chat(self, title: str, draft: str | None, *, chat: ChatKey) -> Any:
        raise RuntimeError("no")


def test_hydration_runs_before_the_chat_is_listed_and_a_failure_passes_the_value_on(
    start_host: Start, db_path: Path
) -> None:
    host = start_host(ScriptedProvider(), contributions=[Titler, FailingHydration])
    session = host.create_session()
    chat = session.chat()
    chat.send("one").result(timeout=10)
    chat.send("two").result(timeout=10)
    session_id = session.id
    host.stop()
    with sqlite3.connect(db_path) as db:
        scopes = set(db.execute("SELECT chat_id FROM mementos WHERE contribution = 'test_titler'"))
    assert scopes == {(chat.id,), ("",)}  # a chat's memento and the session's
    host = start_host(ScriptedProvider(), contributions=[Titler, FailingHydration])
    restored = host.open_session(session_id)
    assert restored.chat().state().title == "2 turns"
    restored.dispose()
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT COUNT(*) FROM mementos").fetchone() == (0,)


class Impostor(Contribution):
    id = "chat_draft"


def test_reusing_a_built_in_id_fails_at_start_and_leaves_the_store_usable(
    start_host: Start,
) -> None:
    with pytest.raises(ContributionError, match="'chat_draft' is registered twice"):
        start_host(ScriptedProvider(), contributions=[Impostor])
    host = start_host(ScriptedProvider())
    assert host.create_session().chat().send("hi").result(timeout=10).state is OutcomeState.COMPLETE


def test_a_user_contribution_can_handle_a_request(start_host: Start) -> None:
    class Shortcut(Contribution):
        id = "test_shortcut"

        def on_incoming_request(self, request: IncomingRequest) -> Any:
            from agenthost.actors.contributions import Handled

            if request.text == "/title":
                return Handled(reply="ok", actions=(ChatTitleChanged(title="set", by_user=True),))
            return None

    chat = start_host(ScriptedProvider(), contributions=[Shortcut]).create_session().chat()
    assert chat.send("/title").result(timeout=10).text == "ok"
    assert chat.state().title == "set"


def test_refused_client_commands_are_dispatched_with_their_reason(
    start_host: Start, recorder: type[Recorder]
) -> None:
    chat = start_host(ScriptedProvider(), contributions=[recorder]).create_session().chat()
    assert chat.cancel() is False
    with pytest.raises(AgentHostError):
        chat.remove_pending("nope")
    with pytest.raises(AgentHostError):
        chat.truncate("no-such-turn")
    rejected = [(type(d.action), d.rejection) for d in recorder.dispatched if d.rejection]
    assert rejected == [
        (TurnCancelled, "No turn is running."),
        (PendingMessageRemoved, "message nope is not pending (it ran, or was removed)"),
        (Truncated, f"chat {chat.id} has no turn no-such-turn"),
    ]
    assert recorder.applied == []
