"""actors/active_turn.py without actors: a turn's assistant text as it streams
(its markdown parts, what became stable), and the record of the active turn."""

from agenthost.actors.active_turn import ActiveTurn, AssistantStream
from agenthost.actors.protocol import AssistantStable, BeginTurn
from agenthost.messages.events import AssistantDelta, ResponsePartAdded
from agenthost.messages.provider import HistoryMessage, ProviderSend
from agenthost.messages.state import MarkdownPart, Turn, TurnState, UserMessage


def stream() -> AssistantStream:
    return AssistantStream("s", "c", "t")


def test_the_first_delta_opens_a_markdown_part_and_later_ones_append_to_it() -> None:
    text = stream()
    assert text.delta("Hel") == (
        ResponsePartAdded(session_id="s", chat_id="c", turn_id="t", part=MarkdownPart(id="t-md1")),
        AssistantDelta(session_id="s", chat_id="c", turn_id="t", part_id="t-md1", text="Hel"),
    )
    assert text.delta("lo") == (
        AssistantDelta(session_id="s", chat_id="c", turn_id="t", part_id="t-md1", text="lo"),
    )


def test_stable_text_is_everything_since_the_last_stable_point() -> None:
    text = stream()
    text.delta("Hel")
    text.delta("lo")
    assert text.stable() == AssistantStable(turn_id="t", text="Hello")
    assert text.unflushed == []


def test_nothing_is_stable_when_nothing_streamed() -> None:
    assert stream().stable() is None


def test_text_after_a_stable_point_opens_a_new_part() -> None:
    text = stream()
    text.delta("one")
    text.stable()
    added, delta = text.delta("two")
    assert added == ResponsePartAdded(
        session_id="s", chat_id="c", turn_id="t", part=MarkdownPart(id="t-md2")
    )
    assert isinstance(delta, AssistantDelta) and delta.part_id == "t-md2"


def begin(**fields: object) -> ActiveTurn:
    message = BeginTurn(turn_id="t", text="hi", instructions="be brief", **fields)  # type: ignore[arg-type]
    return ActiveTurn.begin(message, "s", "c", now=5.0)


def test_a_begun_turn_is_keyed_by_its_own_id_and_not_sent() -> None:
    turn = begin()
    assert (turn.key, turn.text, turn.sent, turn.last_event_at) == ("t", "hi", False, 5.0)


def test_a_stateful_provider_gets_only_the_turns_own_text() -> None:
    earlier = Turn(id="t0", message=UserMessage(text="before"), state=TurnState.COMPLETE)
    turn = begin(history=(earlier,))
    assert turn.send("s", "c", stateful_prompt=True) == ProviderSend(
        session_id="s", chat_id="c", turn_id="t", text="hi", instructions="be brief"
    )
    assert turn.sent


def test_a_stateless_provider_gets_the_earlier_turns_too() -> None:
    earlier = Turn(id="t0", message=UserMessage(text="before"), state=TurnState.COMPLETE)
    sent = begin(history=(earlier,)).send("s", "c", stateful_prompt=False)
    assert sent.history == (
        HistoryMessage(role="user", text="before"),
        HistoryMessage(role="assistant", text="[no reply]"),
    )
