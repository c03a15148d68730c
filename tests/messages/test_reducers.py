import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenthost.messages import AgentHostError, ChatState, ChatStatus, ErrorCode, TurnState, reduce
from agenthost.messages.events import (
    AssistantDelta,
    PendingMessageAdded,
    PendingMessageRemoved,
    ReasoningDelta,
    ResponsePartAdded,
    Truncated,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
    UsageReported,
)
from agenthost.messages.reducers import _replace, delta_runs, joined_delta, reduce_chat
from agenthost.messages.reduction import ACTIVE_REDUCERS, reduce_active_run
from agenthost.messages.state import (
    ErrorPart,
    MarkdownPart,
    PendingKind,
    PendingMessage,
    ReasoningPart,
    Usage,
    UserMessage,
)

NOW = 9_999


def started(turn_id: str = "t1", text: str = "hi", queued: str | None = None) -> TurnStarted:
    return TurnStarted(turn_id=turn_id, message=UserMessage(text=text), queued_message_id=queued)


def run(*actions: object, state: ChatState | None = None) -> ChatState:
    state = state or ChatState(resource="ahp-chat:/c")
    for action in actions:
        state = reduce_chat(state, action, NOW)  # type: ignore[arg-type]
    return state


def test_turn_started_makes_the_turn_active_and_stamps_the_chat() -> None:
    state = run(started())
    assert state.active_turn_id == "t1"
    assert state.status is ChatStatus.IN_PROGRESS
    assert state.modified_at == NOW


def test_deltas_append_to_their_markdown_part() -> None:
    state = run(
        started(),
        ResponsePartAdded(turn_id="t1", part=MarkdownPart(id="p")),
        AssistantDelta(turn_id="t1", part_id="p", text="Hello "),
        AssistantDelta(turn_id="t1", part_id="p", text="world"),
    )
    assert state.active_turn is not None
    assert state.active_turn.assistant_text == "Hello world"


def test_completion_moves_the_active_turn_into_turns() -> None:
    state = run(
        started(),
        ResponsePartAdded(turn_id="t1", part=MarkdownPart(id="p")),
        AssistantDelta(turn_id="t1", part_id="p", text="done"),
        TurnCompleted(turn_id="t1"),
    )
    assert state.active_turn is None
    assert [(t.id, t.state, t.user_text, t.assistant_text) for t in state.turns] == [
        ("t1", TurnState.COMPLETE, "hi", "done")
    ]
    assert state.status is ChatStatus.IDLE


@pytest.mark.parametrize(
    ("end", "turn_state", "status"),
    [
        (TurnCancelled(turn_id="t1"), TurnState.CANCELLED, ChatStatus.IDLE),
        (
            TurnFailed(
                turn_id="t1", error=AgentHostError(code=ErrorCode.PROVIDER_ERROR, message="x")
            ),
            TurnState.ERROR,
            ChatStatus.ERROR,
        ),
    ],
)
def test_cancel_and_error_end_the_turn(
    end: object, turn_state: TurnState, status: ChatStatus
) -> None:
    state = run(started(), end)
    assert state.turns[-1].state is turn_state
    assert state.status is status


def test_a_turn_ends_exactly_once() -> None:
    state = run(started(), TurnCompleted(turn_id="t1"))
    again = run(
        TurnCancelled(turn_id="t1"),
        TurnFailed(turn_id="t1", error=AgentHostError(code=ErrorCode.INTERNAL, message="late")),
        state=state,
    )
    assert again == state


def test_terminal_action_for_another_turn_is_a_no_op() -> None:
    state = run(started())
    assert run(TurnCompleted(turn_id="other"), state=state) == state


def test_turn_started_is_idempotent_per_turn_id() -> None:
    state = run(started())
    assert run(started(), state=state) == state


def test_turn_started_from_a_pending_message_removes_it() -> None:
    queued = PendingMessage(id="q1", kind=PendingKind.QUEUED, message=UserMessage(text="a"))
    other = PendingMessage(id="q2", kind=PendingKind.QUEUED, message=UserMessage(text="b"))
    state = run(
        PendingMessageAdded(pending=queued),
        PendingMessageAdded(pending=other),
        started(queued="q1"),
    )
    assert [m.id for m in state.queued_messages] == ["q2"]


def test_pending_set_upserts_and_removed_drops() -> None:
    first = PendingMessage(id="q1", kind=PendingKind.QUEUED, message=UserMessage(text="a"))
    edited = attrs.evolve(first, message=UserMessage(text="b"))
    state = run(PendingMessageAdded(pending=first), PendingMessageAdded(pending=edited))
    assert [m.text for m in state.pending] == ["b"]
    state = run(PendingMessageRemoved(kind=PendingKind.QUEUED, pending_id="q1"), state=state)
    assert state.pending == ()


def test_pending_lists_steering_before_queued() -> None:
    queued = PendingMessage(id="q", kind=PendingKind.QUEUED, message=UserMessage(text="q"))
    steer = PendingMessage(id="s", kind=PendingKind.STEERING, message=UserMessage(text="s"))
    state = run(PendingMessageAdded(pending=queued), PendingMessageAdded(pending=steer))
    assert [m.id for m in state.pending] == ["s", "q"]


def test_truncate_keeps_turns_up_to_and_including_and_drops_the_active_turn() -> None:
    state = run(
        started("a"),
        TurnCompleted(turn_id="a"),
        started("b"),
        TurnCompleted(turn_id="b"),
        started("c"),
    )
    state = run(Truncated(turn_id="a"), state=state)
    assert [t.id for t in state.turns] == ["a"]
    assert state.active_turn is None


def test_unknown_actions_are_no_ops() -> None:
    state = run(started())
    assert reduce(state, object(), NOW) == state  # type: ignore[arg-type]


def test_the_streaming_paths_copy_is_what_attrs_evolve_makes_and_still_validates() -> None:
    state = reduce_chat(
        ChatState(resource="r", modified_at=5),
        TurnStarted(turn_id="t", message=UserMessage(text="q")),
    )
    assert state.active_turn is not None
    part = MarkdownPart(id="p", content="a")
    for value, changes in (
        (state, {"draft": "d"}),
        (state.active_turn, {"response_parts": (part,)}),
        (part, {"content": "ab"}),
    ):
        copy = _replace(value, **changes)
        assert copy == attrs.evolve(value, **changes)
        assert type(copy) is type(value)
    with pytest.raises(ValueError):  # a field with a validator goes through attrs
        _replace(state, modified_at=-1)


def test_a_copy_keeps_a_constant_field_init_does_not_take_and_refuses_to_change_it() -> None:
    @attrs.frozen
    class Made:
        count: int
        kind: str = attrs.field(default="made", init=False)
        made: list[int] = attrs.field(factory=list, init=False)

    part = MarkdownPart(id="p", content="a")  # `kind` is such a field: copied
    copy = _replace(part, content="ab")
    assert copy == attrs.evolve(part, content="ab")
    assert copy.kind == "markdown"
    with pytest.raises(KeyError):
        _replace(part, kind="reasoning")  # type: ignore[call-arg]
    made = Made(count=1)  # a factory's field: attrs makes a new one, as evolve does
    assert _replace(made, count=2).made is not made.made


def _deltas(*part_ids: str) -> st.SearchStrategy[AssistantDelta]:
    return st.builds(
        AssistantDelta,
        turn_id=st.sampled_from(["t1", "t2"]),
        part_id=st.sampled_from(part_ids),
        text=st.text(max_size=3),
    )


_ACTIONS = st.one_of(
    _deltas("p", "q"),
    st.builds(
        ResponsePartAdded,
        turn_id=st.just("t1"),
        part=st.sampled_from([MarkdownPart(id="p"), MarkdownPart(id="q")]),
    ),
    st.just(TurnCompleted(turn_id="t1")),
)


@given(actions=st.lists(_ACTIONS, max_size=12))
def test_a_burst_reduced_run_by_run_ends_where_one_by_one_does(actions: list[object]) -> None:
    state = run(started("t1"))
    runs = delta_runs(tuple(actions))
    assert [a for r in runs for a in r] == actions  # every action, once, in order
    joined = state
    for part in runs:
        action = joined_delta(part) if len(part) > 1 else part[0]  # type: ignore[arg-type]
        joined = reduce_chat(joined, action, NOW)  # type: ignore[arg-type]
    assert joined == run(*actions, state=state)


_ACTIVE_ACTIONS = st.one_of(
    _deltas("p", "q", "r"),
    st.builds(
        ReasoningDelta,
        turn_id=st.sampled_from(["t1", "t2"]),
        part_id=st.sampled_from(["p", "r"]),
        content=st.text(max_size=3),
    ),
    st.builds(
        ResponsePartAdded,
        turn_id=st.sampled_from(["t1", "t2"]),
        part=st.sampled_from(
            [
                MarkdownPart(id="p"),
                MarkdownPart(id="q"),
                ReasoningPart(id="r"),
                ErrorPart(error=AgentHostError(code=ErrorCode.INTERNAL, message="x")),
            ]
        ),
    ),
    st.builds(UsageReported, turn_id=st.sampled_from(["t1", "t2"]), usage=st.builds(Usage)),
)


@given(actions=st.lists(_ACTIVE_ACTIONS, max_size=12), active=st.booleans())
def test_a_run_of_active_turn_actions_reduced_at_once_ends_where_one_by_one_does(
    actions: list[object], active: bool
) -> None:
    state = run(started("t1")) if active else ChatState(resource="ahp-chat:/c")
    assert all(type(a) in ACTIVE_REDUCERS for a in actions)
    at_once = reduce_active_run(state, actions)
    assert at_once == run(*actions, state=state)
    if at_once == state:
        assert at_once is state  # nothing changed: no copy
