"""The built-in contributions, end to end through the public surface."""

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from agenthost.actors import Host
from agenthost.actors.contributions import (
    ChatKey,
    Contribution,
    IncomingRequest,
    TurnEnd,
    TurnEndReason,
)
from agenthost.actors.contributions.builtin import BUILTINS
from agenthost.actors.contributions.local_command import HELP
from agenthost.actors.contributions.queue_drain import QueueDrain
from agenthost.actors.contributions.turn_admission import ARCHIVED, READ_ONLY
from agenthost.actors.protocol import Flush
from agenthost.messages import AgentHostError, ChatState, ErrorCode, OutcomeState
from agenthost.messages.events import RequestOpened
from agenthost.messages.state import (
    ActiveTurn,
    PendingKind,
    PendingMessage,
    SessionState,
    Turn,
    TurnState,
    Usage,
    UserMessage,
)
from agenthost.providers.scripted import AskUser, Gate, Say, ScriptedProvider

Start = Callable[..., Host]


@pytest.fixture
def start(start_host: Start) -> Start:
    return start_host


def settled(chat: Any) -> None:
    """A round trip through the chat: what it told its session before is in the
    session's mailbox ahead of our next ask."""
    chat.state()


def test_the_built_in_sequence_is_pinned(host: Host) -> None:
    dispatcher = host.services.contributions
    assert [c.id for c in BUILTINS] == dispatcher.ids()
    assert [(c.id, c.order) for c in dispatcher.contributions] == [
        ("local_command", 50),
        ("turn_admission", 100),
        ("queue_drain", 200),
        ("input_needed", 200),
        ("session_title", 400),
        ("mark_unread", 500),
        ("chat_draft", 600),
        ("session_flags", 700),
        ("persisted_usage", 800),
    ]
    assert dispatcher.ids("on_incoming_request") == ["local_command", "turn_admission"]
    assert dispatcher.ids("on_turn_end") == ["queue_drain", "mark_unread", "persisted_usage"]
    assert dispatcher.ids("on_outgoing_turn") == []
    assert dispatcher.ids("on_hydrate_turns") == ["persisted_usage"]
    assert dispatcher.ids("on_hydrate_chat") == ["chat_draft"]


# -- local_command --------------------------------------------------------------------


def test_rename_is_handled_without_a_turn_even_in_an_archived_session(host: Host) -> None:
    session = host.create_session()
    chat = session.chat()
    session.archive()
    outcome = chat.send("/rename  Release   notes").result(timeout=10)
    assert (outcome.state, outcome.turn_id) == (OutcomeState.HANDLED, None)
    assert chat.state().title == "Release notes"
    assert chat.state().turns == ()
    settled(chat)
    assert session.summary().title == "Release notes"  # the default chat's title cascades


def test_rename_works_in_a_read_only_chat_and_help_lists_the_commands(host: Host) -> None:
    chat = host.create_session().chat()
    chat.set_read_only(True)
    assert chat.send("/rename Plans").result(timeout=10).state is OutcomeState.HANDLED
    assert chat.state().title == "Plans"
    helped = chat.send("/help").result(timeout=10)
    assert (helped.state, helped.text) == (OutcomeState.HANDLED, HELP)
    bad = chat.send("/rename").result(timeout=10)
    assert bad.state is OutcomeState.REJECTED and bad.error is not None
    assert bad.error.code is ErrorCode.INVALID_ARGUMENT


# -- turn_admission -------------------------------------------------------------------


def test_an_archived_session_refuses_turns_until_it_is_unarchived(
    host: Host, provider: ScriptedProvider
) -> None:
    session = host.create_session()
    chat = session.chat()
    assert session.archive().archived
    refused = chat.send("hello").result(timeout=10)
    assert refused.state is OutcomeState.REJECTED and refused.error is not None
    assert (refused.error.code, refused.error.message) == (ErrorCode.READ_ONLY, ARCHIVED)
    with pytest.raises(AgentHostError, match="archived"):
        chat.steer("and this")
    assert provider.prompts == [] and chat.state().turns == ()
    session.unarchive()
    assert chat.send("hello").result(timeout=10).state is OutcomeState.COMPLETE


def test_a_read_only_chat_refuses_turns(host: Host) -> None:
    chat = host.create_session().chat()
    chat.set_read_only(True)
    refused = chat.send("hello").result(timeout=10)
    assert refused.error is not None and refused.error.message == READ_ONLY
    chat.set_read_only(False)
    assert chat.send("hello").result(timeout=10).state is OutcomeState.COMPLETE


def test_read_only_and_archived_survive_a_restart(start: Start) -> None:
    host = start(ScriptedProvider())
    session = host.create_session()
    session.chat().set_read_only(True)
    second = session.create_chat()
    session_id, second_id = session.id, second.id
    host.stop()
    session = start(ScriptedProvider()).open_session(session_id)
    assert session.chat().send("x").result(timeout=10).state is OutcomeState.REJECTED
    assert session.chat(second_id).send("x").result(timeout=10).state is OutcomeState.COMPLETE


# -- queue_drain ----------------------------------------------------------------------


class Admissions(Contribution):
    """Records what admission is asked (a test's own contribution)."""

    id = "test_admissions"
    order = 150
    seen: list[tuple[str, str, str | None]] = []

    def on_incoming_request(self, request: IncomingRequest) -> Any:
        Admissions.seen.append((request.text, request.source.value, request.client_id))
        return None


def test_the_queue_drains_after_a_success_as_its_senders_requests(start: Start) -> None:
    Admissions.seen = []
    provider = ScriptedProvider().on("first", Gate("g"), Say("done"))
    host = start(provider, contributions=[Admissions])
    chat = host.create_session().chat()
    first = chat.send("first", client_id="alice")
    provider.wait_reached("g", timeout=10)
    queued = chat.send("second", client_id="bob")
    provider.open("g")
    assert first.result(timeout=10).state is OutcomeState.COMPLETE
    assert queued.result(timeout=10).state is OutcomeState.COMPLETE
    assert Admissions.seen == [("first", "client", "alice"), ("second", "queue", "bob")]


def test_a_local_command_drains_the_queue_and_a_rejected_queued_message_leaves_it(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("first", Gate("g"), Say("done"))
    session = host.create_session()
    chat = session.chat()
    first = chat.send("first")
    provider.wait_reached("g", timeout=10)
    queued = chat.send("queued")
    session.archive()  # the queued message's turn will be refused when its turn comes
    provider.open("g")
    assert first.result(timeout=10).state is OutcomeState.COMPLETE
    outcome = queued.result(timeout=10)
    assert outcome.state is OutcomeState.REJECTED
    assert chat.state().queued_messages == ()


class FakeChats:
    def __init__(self) -> None:
        self.drained: list[ChatKey] = []

    def drain(self, chat: ChatKey) -> bool:
        self.drained.append(chat)
        return True


def test_queue_drain_skips_after_a_resumable_error_an_active_turn_or_pending_steering() -> None:
    chats = FakeChats()
    drain = QueueDrain(mementos=None, chats=chats)  # type: ignore[arg-type]
    key = ChatKey(session_id="s", chat_id="c")
    queued = PendingMessage(id="q", kind=PendingKind.QUEUED, message=UserMessage(text="q"))
    steering = PendingMessage(id="s", kind=PendingKind.STEERING, message=UserMessage(text="s"))
    waiting = ChatState(resource="r", queued_messages=(queued,))
    resumable = Turn(
        id="t",
        message=UserMessage(text="x"),
        state=TurnState.ERROR,
        error=AgentHostError(code=ErrorCode.PROVIDER_ERROR, message="later", resumable=True),
    )

    def ended(reason: TurnEndReason, state: ChatState) -> None:
        drain.on_turn_end(TurnEnd(chat=key, reason=reason, state=state, session=SessionState()))

    ended(TurnEndReason.SUCCESS, ChatState(resource="r"))  # nothing queued
    ended(TurnEndReason.ERROR, waiting)
    ended(TurnEndReason.CANCELLED, waiting)
    ended(TurnEndReason.ABANDONED, waiting)
    ended(TurnEndReason.SUCCESS, attrs.evolve(waiting, turns=(resumable,)))
    ended(TurnEndReason.SUCCESS, attrs.evolve(waiting, steering_messages=(steering,)))
    active = ActiveTurn(id="a", message=UserMessage(text="a"))
    ended(TurnEndReason.SUCCESS, attrs.evolve(waiting, active_turn=active))
    assert chats.drained == []
    ended(TurnEndReason.SUCCESS, waiting)
    ended(TurnEndReason.LOCAL_COMMAND, waiting)
    assert chats.drained == [key, key]


# -- input_needed ---------------------------------------------------------------------


def test_a_session_is_input_needed_while_a_chat_waits_on_the_user(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("go", AskUser("Which file?"), Say("ok"))
    session = host.create_session()
    chat = session.chat()
    sub = chat.subscribe()
    turn = chat.send("go")
    while not isinstance(event := sub.next(10), RequestOpened):
        pass
    settled(chat)
    assert session.summary().input_needed
    chat.answer(event.request.request_id, answer="main.py")
    assert turn.result(timeout=10).state is OutcomeState.COMPLETE
    settled(chat)
    assert not session.summary().input_needed


# -- session_title --------------------------------------------------------------------


def test_the_title_comes_from_the_first_message_and_the_users_title_wins(start: Start) -> None:
    host = start(ScriptedProvider())
    session = host.create_session()
    chat = session.chat()
    chat.send("Fix the login bug\nit fails on Safari").result(timeout=10)
    chat.send("another question").result(timeout=10)
    assert session.summary().title == "Fix the login bug"
    assert session.rename("Login").title == "Login"
    chat.send("/rename Auth work").result(timeout=10)
    other = session.create_chat()
    other.send("/rename Side chat").result(timeout=10)  # not the default chat: no cascade
    settled(chat)
    settled(other)
    assert session.summary().title == "Auth work"
    with pytest.raises(AgentHostError) as bad:
        session.rename("   ")
    assert bad.value.code is ErrorCode.INVALID_ARGUMENT
    session_id, other_id = session.id, other.id
    host.stop()
    restored = start(ScriptedProvider()).open_session(session_id)
    assert restored.summary().title == "Auth work"
    assert restored.chat(other_id).state().title == "Side chat"


# -- mark_unread ----------------------------------------------------------------------


def test_a_turn_marks_its_session_unread_but_a_local_command_or_refusal_does_not(
    host: Host,
) -> None:
    session = host.create_session()
    chat = session.chat()
    assert not session.summary().unread
    chat.send("hi").result(timeout=10)
    settled(chat)
    assert session.summary().unread
    assert not session.mark_read().unread
    chat.send("/help").result(timeout=10)
    chat.set_read_only(True)
    chat.send("refused").result(timeout=10)
    settled(chat)
    assert not session.summary().unread
    assert [s.unread for s in host.list_sessions()] == [False]


# -- chat_draft -----------------------------------------------------------------------


def test_a_draft_is_kept_and_restored(start: Start) -> None:
    host = start(ScriptedProvider())
    session = host.create_session()
    session.chat().set_draft("half a thought")
    cleared = session.create_chat()
    cleared.set_draft("gone soon")
    cleared.set_draft(None)
    session_id, cleared_id = session.id, cleared.id
    host.stop()
    restored = start(ScriptedProvider()).open_session(session_id)
    assert restored.chat().state().draft == "half a thought"
    assert restored.chat(cleared_id).state().draft is None


# -- session_flags --------------------------------------------------------------------


def test_flags_and_config_are_persisted_and_rejected_changes_are_not(start: Start) -> None:
    host = start(ScriptedProvider())
    session = host.create_session()
    session.archive()
    session.set_config({"model": "large", "effort": "high"})
    session.set_config({"effort": ""})
    with pytest.raises(AgentHostError):
        session.set_config({"": "x"})
    session_id = session.id
    host.stop()
    host = start(ScriptedProvider())
    [listed] = host.list_sessions()
    assert listed.archived
    restored = host.open_session(session_id)
    assert restored.summary().archived
    assert restored.config() == {"model": "large"}


# -- persisted_usage ------------------------------------------------------------------


def test_token_usage_per_turn_survives_a_restart(start: Start) -> None:
    host = start(ScriptedProvider())
    session = host.create_session()
    session.chat().send("count these three").result(timeout=10)
    live = session.chat().state().turns[0].usage
    assert live == Usage(prompt_tokens=3, completion_tokens=4)  # "echo: count these three"
    session_id = session.id
    host.stop()
    restored = start(ScriptedProvider()).open_session(session_id)
    assert restored.chat().state().turns[0].usage == live


def test_mementos_of_a_disposed_chat_or_session_are_evicted(db_path: Path, start: Start) -> None:
    def rows() -> set[tuple[str, str, str]]:
        with sqlite3.connect(db_path) as db:
            return set(db.execute("SELECT session_id, chat_id, contribution FROM mementos"))

    host = start(ScriptedProvider())
    session = host.create_session()
    kept = session.chat()
    kept.set_draft("keep")
    doomed = session.create_chat()
    doomed.set_draft("drop")
    doomed.send("a turn").result(timeout=10)
    other = host.create_session()
    other_chat = other.chat()
    other_chat.set_draft("other")
    settled(doomed)
    host.services.store.ask(Flush(), timeout=10)
    assert (session.id, doomed.id, "persisted_usage") in rows()
    session.dispose_chat(doomed.id)
    host.stop()
    assert rows() == {(session.id, kept.id, "chat_draft"), (other.id, other_chat.id, "chat_draft")}
    host = start(ScriptedProvider())
    host.open_session(other.id).dispose()
    host.stop()
    assert rows() == {(session.id, kept.id, "chat_draft")}
