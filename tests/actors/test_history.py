"""The history a stateless provider gets (actors/history.py): strictly
alternating user and assistant messages, whatever way the turns ended; a
stateful provider gets only the current turn."""

from pathlib import Path

import attrs

from agenthost.actors import Host
from agenthost.actors import history as histories
from agenthost.actors.history import NO_REPLY
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.messages.provider import HistoryMessage
from agenthost.messages.state import (
    MarkdownPart,
    MessageOrigin,
    OriginKind,
    PendingKind,
    PendingMessage,
    Turn,
    TurnState,
    UserMessage,
)
from agenthost.providers.scripted import Gate, Reject, Say, ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.store.sqlite import ABANDONED_ON_RESTART
from agenthost.testing import FakeClock

FAILED = AgentHostError(code=ErrorCode.PROVIDER_ERROR, message="boom")


def turn(user: str, *reply: str, state: TurnState = TurnState.COMPLETE) -> Turn:
    parts = tuple(MarkdownPart(id=f"{user}-md{i}", content=text) for i, text in enumerate(reply))
    return Turn(
        id=user,
        message=UserMessage(text=user),
        response_parts=parts,
        state=state,
        error=FAILED if state is TurnState.ERROR else None,
    )


def pairs(messages: tuple[HistoryMessage, ...]) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in messages]


def assert_strictly_alternating(messages: tuple[HistoryMessage, ...]) -> None:
    roles = [m.role for m in messages]
    assert roles == ["user", "assistant"] * (len(roles) // 2)
    assert all(m.text for m in messages)


def test_no_turns_no_history() -> None:
    assert histories.history(()) == ()


def test_each_turn_is_its_user_message_then_its_reply() -> None:
    history = histories.history((turn("q1", "a1 ", "and more"), turn("q2", "a2")))
    assert pairs(history) == [
        ("user", "q1"),
        ("assistant", "a1 and more"),
        ("user", "q2"),
        ("assistant", "a2"),
    ]


def test_a_history_ending_in_an_errored_turn_keeps_its_partial_reply() -> None:
    history = histories.history((turn("q1", "a1"), turn("q2", "half", state=TurnState.ERROR)))
    assert_strictly_alternating(history)
    assert pairs(history)[-2:] == [("user", "q2"), ("assistant", "half")]


def test_an_errored_turn_without_a_word_gets_a_placeholder_never_two_users_in_a_row() -> None:
    history = histories.history((turn("q1", state=TurnState.ERROR), turn("q2", "a2")))
    assert_strictly_alternating(history)
    assert pairs(history)[:2] == [("user", "q1"), ("assistant", NO_REPLY[TurnState.ERROR])]


def test_a_history_ending_in_a_cancelled_turn_keeps_its_user_message_and_a_reply() -> None:
    with_text = histories.history((turn("q1", "a1"), turn("q2", "star", state=TurnState.CANCELLED)))
    assert pairs(with_text)[-2:] == [("user", "q2"), ("assistant", "star")]
    without = histories.history((turn("q1", "a1"), turn("q2", state=TurnState.CANCELLED)))
    assert_strictly_alternating(without)
    assert pairs(without)[-1] == ("assistant", NO_REPLY[TurnState.CANCELLED])


def test_a_run_of_failed_and_cancelled_turns_still_alternates() -> None:
    turns = (
        turn("q1", state=TurnState.ERROR),
        turn("q2", state=TurnState.CANCELLED),
        turn("q3", state=TurnState.ERROR),
        turn("q4"),  # complete, yet the provider said nothing
    )
    history = histories.history(turns)
    assert_strictly_alternating(history)
    assert [m.text for m in history if m.role == "user"] == ["q1", "q2", "q3", "q4"]


def test_restored_turns_as_the_store_loads_them_alternate_too() -> None:
    """A restart loads each turn's stored text as one part, and closes a turn that
    was running as an error (execution_abandoned) with whatever text it stored."""
    restored = (
        turn("q1", "a1"),
        Turn(
            id="q2",
            message=UserMessage(text="q2"),
            response_parts=(MarkdownPart(id="q2-md", content="interrupted at"),),
            state=TurnState.ERROR,
            error=AgentHostError(code=ErrorCode.EXECUTION_ABANDONED, message=ABANDONED_ON_RESTART),
        ),
        Turn(
            id="q3",
            message=UserMessage(text="q3"),
            state=TurnState.ERROR,
            error=AgentHostError(code=ErrorCode.EXECUTION_ABANDONED, message=ABANDONED_ON_RESTART),
        ),
    )
    history = histories.history(restored)
    assert_strictly_alternating(history)
    assert pairs(history)[2:] == [
        ("user", "q2"),
        ("assistant", "interrupted at"),
        ("user", "q3"),
        ("assistant", NO_REPLY[TurnState.ERROR]),
    ]


def test_steering_folded_into_a_turn_joins_its_user_message() -> None:
    steering = PendingMessage(
        id="p1",
        kind=PendingKind.STEERING,
        message=UserMessage(text="also this", origin=MessageOrigin(kind=OriginKind.STEERING)),
    )
    folded = Turn(
        id="t",
        message=UserMessage(text="do that"),
        response_parts=(MarkdownPart(id="t-md", content="done"),),
        steering=(steering,),
        state=TurnState.COMPLETE,
    )
    assert pairs(histories.history((folded,))) == [
        ("user", "do that\n\nalso this"),
        ("assistant", "done"),
    ]


class Recording(ScriptedProvider):
    """The scripted claude shape, stateful or not (`sends` records every ProviderSend)."""

    def __init__(self, *, stateful: bool) -> None:
        super().__init__(shape="claude")
        self.capabilities = attrs.evolve(self.capabilities, stateful_prompt=stateful)


def run_conversation(provider: Recording, db_path: Path) -> None:
    """A complete turn, an errored one, a cancelled one, a restart, then a turn."""
    provider.on("q2", Say("part"), Reject("boom"))
    provider.on("q3", Gate("never"))
    first = Host.start(store=SqliteStore(db_path), providers={"p": provider}, clock=FakeClock())
    session = first.create_session(provider="p")
    chat = session.chat()
    assert chat.send("q1").result(timeout=10).state is OutcomeState.COMPLETE
    assert chat.send("q2").result(timeout=10).state is OutcomeState.ERROR
    cancelled = chat.send("q3")
    provider.wait_reached("never", timeout=10)
    chat.cancel()
    assert cancelled.result(timeout=10).state is OutcomeState.CANCELLED
    first.stop()
    with Host.start(store=SqliteStore(db_path), providers={"p": provider}, clock=FakeClock()) as h:
        assert h.open_session(session.id).chat().send("q4").result(timeout=10).text == "echo: q4"


def test_a_stateless_provider_gets_the_whole_history_after_error_cancel_and_restart(
    db_path: Path,
) -> None:
    provider = Recording(stateful=False)
    run_conversation(provider, db_path)
    assert [s.text for s in provider.sends] == ["q1", "q2", "q3", "q4"]
    assert pairs(provider.sends[-1].history) == [
        ("user", "q1"),
        ("assistant", "echo: q1"),
        ("user", "q2"),
        ("assistant", "part"),
        ("user", "q3"),
        ("assistant", NO_REPLY[TurnState.CANCELLED]),
    ]
    for send in provider.sends:
        assert_strictly_alternating(send.history)


def test_a_stateful_provider_gets_only_the_current_turn_after_error_cancel_and_restart(
    db_path: Path,
) -> None:
    provider = Recording(stateful=True)
    run_conversation(provider, db_path)
    assert [(s.text, s.history) for s in provider.sends] == [
        ("q1", ()),
        ("q2", ()),
        ("q3", ()),
        ("q4", ()),
    ]
