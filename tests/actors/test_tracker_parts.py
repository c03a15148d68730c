"""The turn tracker's plain objects, without actors: what goes to the chat
(actors/chat_outbox.py), steering on its way to the provider
(actors/steering_handover.py), the echo stall (actors/echo_stall.py), the end
a settled call gives a turn (actors/settlement.py), diagnoses
(actors/diagnoses.py) and the actions of tool calls and usage
(actors/turn_events.py)."""

from typing import Any

from agenthost.actors import diagnoses, turn_events
from agenthost.actors.active_turn import ActiveTurn, AssistantStream
from agenthost.actors.chat_outbox import ChatOutbox
from agenthost.actors.diagnoses import Diagnoses
from agenthost.actors.echo_stall import EchoStall, Held, TextRun, text_runs
from agenthost.actors.protocol import (
    ApplyActions,
    AssistantStable,
    ChatBatch,
    EndTurn,
    Handled,
    HandOverSteering,
)
from agenthost.actors.settlement import NEVER_STARTED, settled_end
from agenthost.actors.steering_handover import SteeringHandOver
from agenthost.messages.commands import CallState
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    AssistantDelta,
    ToolCallCompleted,
    ToolCallReady,
    ToolCallStarted,
    TurnCompleted,
    TurnFailed,
)
from agenthost.messages.provider import (
    CallSettled,
    ProviderSteer,
    ReplyDelta,
    Settlement,
    UsageUpdated,
    UserMessageEcho,
)
from agenthost.messages.provider import ToolCallCompleted as ProviderToolCallCompleted
from agenthost.messages.provider import ToolCallStarted as ProviderToolCallStarted
from agenthost.messages.state import OpenRequest, RequestKind, Usage


def active(turn_id: str = "t1", **fields: Any) -> ActiveTurn:
    fields.setdefault("key", turn_id)
    return ActiveTurn(
        turn_id=turn_id, text="hi", stream=AssistantStream("s", "c", turn_id), **fields
    )


def delta(text: str) -> AssistantDelta:
    return AssistantDelta(turn_id="t1", part_id="p", text=text)


# -- ChatOutbox ------------------------------------------------------------------------


def outbox() -> tuple[ChatOutbox, list[object]]:
    sent: list[object] = []
    return ChatOutbox("s", "c", sent.append), sent


def test_the_outbox_sends_nothing_when_nothing_is_queued() -> None:
    box, sent = outbox()
    box.flush()
    assert sent == []


def test_consecutive_actions_reach_the_chat_as_one_apply_actions() -> None:
    box, sent = outbox()
    box.actions((delta("a"),))
    box.message(ApplyActions(actions=(delta("b"),)))
    box.actions((delta("c"),))
    box.flush()
    assert sent == [ApplyActions(actions=(delta("a"), delta("b"), delta("c")))]


def test_a_message_between_actions_keeps_its_place_in_one_batch() -> None:
    box, sent = outbox()
    stable = AssistantStable(turn_id="t1", text="ab")
    box.actions((delta("a"),))
    box.message(stable)
    box.actions((delta("b"),))
    box.flush()
    assert sent == [
        ChatBatch(
            messages=(
                ApplyActions(actions=(delta("a"),)),
                stable,
                ApplyActions(actions=(delta("b"),)),
            )
        )
    ]


def test_a_turns_end_right_behind_its_stable_text_carries_it_instead() -> None:
    box, sent = outbox()
    done = TurnCompleted(turn_id="t1")
    box.message(AssistantStable(turn_id="t1", text="ab"))
    box.message(EndTurn(action=done, finish_reason="stop"))
    box.flush()
    assert sent == [EndTurn(action=done, finish_reason="stop", stable="ab")]
    # another turn's text, or one with a message between, keeps its own message
    other = AssistantStable(turn_id="t0", text="old")
    box.message(other)
    box.message(EndTurn(action=done))
    box.message(AssistantStable(turn_id="t1", text="cd"))
    box.message("between")
    box.message(EndTurn(action=done))
    box.flush()
    assert sent[1] == ChatBatch(
        messages=(
            other,
            EndTurn(action=done),
            AssistantStable(turn_id="t1", text="cd"),
            "between",
            EndTurn(action=done),
        )
    )


def test_a_flush_sends_only_what_was_queued_since_the_last_one() -> None:
    box, sent = outbox()
    box.message("first")
    box.flush()
    box.message("second")
    box.flush()
    assert sent == ["first", "second"]


def test_an_applied_action_names_the_trackers_session_and_chat() -> None:
    box, sent = outbox()
    box.apply(TurnCompleted(turn_id="t1"))
    box.flush()
    assert sent == [
        ApplyActions(actions=(TurnCompleted(session_id="s", chat_id="c", turn_id="t1"),))
    ]


# -- SteeringHandOver -------------------------------------------------------------------


class Handover:
    def __init__(self) -> None:
        self.reports: list[tuple[str, Handled]] = []
        self.steered: list[ProviderSteer] = []
        self.desk = SteeringHandOver(
            "s", "c", lambda p, how: self.reports.append((p, how)), self.steered.append
        )

    def take(self, pending_id: str, for_turn: str | None = None) -> None:
        self.desk.take(HandOverSteering(pending_id=pending_id, text=pending_id, for_turn=for_turn))


def test_steering_waits_until_it_is_handed_over_and_then_goes_to_the_running_turn() -> None:
    h = Handover()
    h.take("p1")
    assert h.steered == [] and h.desk.parked == ("p1",)
    h.desk.hand_over("run", accepts_steering=True)
    assert h.reports == [("p1", Handled.HANDED)]
    assert h.steered == [
        ProviderSteer(session_id="s", chat_id="c", turn_id="run", pending_id="p1", text="p1")
    ]
    assert h.desk.parked == ()


def test_steering_a_provider_cannot_take_mid_turn_is_held_and_never_sent() -> None:
    h = Handover()
    h.take("p1")
    h.desk.hand_over("run", accepts_steering=False)
    assert h.reports == [("p1", Handled.HELD)]
    assert h.steered == []


def test_steering_removed_before_its_hand_over_is_dropped_and_never_sent() -> None:
    h = Handover()
    h.take("p1")
    h.take("p2")
    h.desk.unpark("p1")
    h.desk.hand_over("run", accepts_steering=True)
    assert h.reports == [("p1", Handled.DROPPED), ("p2", Handled.HANDED)]
    assert [s.pending_id for s in h.steered] == ["p2"]


def test_unparking_a_message_already_handed_over_reports_nothing() -> None:
    h = Handover()
    h.take("p1")
    h.desk.hand_over("run", accepts_steering=True)
    h.desk.unpark("p1")
    assert h.reports == [("p1", Handled.HANDED)]


def test_steering_for_the_turn_a_cancel_ended_is_cancelled_on_arrival() -> None:
    h = Handover()
    h.desk.cancelled = "t1"
    h.take("p1", for_turn="t1")
    h.take("p2", for_turn="t2")
    assert h.reports == [("p1", Handled.CANCELLED)]
    assert h.desk.parked == ("p2",)


def test_giving_back_reports_every_parked_message_once() -> None:
    h = Handover()
    h.take("p1")
    h.take("p2")
    h.desk.give_back(Handled.REQUEUED)
    h.desk.give_back(Handled.REQUEUED)
    assert h.reports == [("p1", Handled.REQUEUED), ("p2", Handled.REQUEUED)]


# -- EchoStall --------------------------------------------------------------------------


def echo(text: str) -> UserMessageEcho:
    return UserMessageEcho(turn_id="run", text=text)


def test_plain_deltas_in_a_row_of_one_turn_key_are_one_text_run_and_nothing_else_is() -> None:
    a, b, c = (ReplyDelta(turn_id="run", text=t) for t in "abc")
    other = ReplyDelta(turn_id="next", text="d")
    subagent = ReplyDelta(turn_id="run", text="s", subagent_id="sub")
    steer = echo("steer")
    items = text_runs((a, b, subagent, c, steer, other, a))
    assert items == [
        TextRun("run", ["a", "b"]),
        subagent,  # a subagent's delta goes to its chat, one by one
        TextRun("run", ["c"]),
        steer,  # an echo (it may stall) is never inside a run
        TextRun("next", ["d"]),
        TextRun("run", ["a"]),
    ]
    assert text_runs(()) == []


def test_events_are_handled_until_one_stalls_and_the_rest_wait_for_the_match() -> None:
    stall = EchoStall()
    handled: list[object] = []
    tokens: list[int] = []
    first, second, third = (ReplyDelta(turn_id="run", text=t) for t in "abc")

    def handle(event: object) -> None:
        handled.append(event)
        if event is first:
            tokens.append(stall.begin(echo("steer")))

    stall.events((first, second, third), handle)
    stall.hold("a message")
    assert handled == [first] and stall.stalled
    released = stall.matched(tokens[0])
    assert released is not None and not stall.stalled
    assert released.echo == echo("steer")
    assert released.held == (
        Held(second, from_provider=True),
        Held(third, from_provider=True),
        Held("a message", from_provider=False),
    )


def test_only_the_current_stalls_match_ends_it() -> None:
    stall = EchoStall()
    old = stall.begin(echo("one"))
    assert stall.matched(old) is not None
    current = stall.begin(echo("two"))
    assert stall.matched(old) is None and stall.stalled
    assert stall.matched(current) is not None


def test_a_replay_that_stalls_again_holds_the_rest_in_order() -> None:
    stall = EchoStall()
    handled: list[object] = []
    held = [Held("a", False), Held("b", False), Held("c", True)]

    def handle(entry: Held) -> None:
        handled.append(entry.item)
        if entry.item == "a":
            stall.begin(echo("again"))

    stall.replay(held, handle)
    stall.hold("d")
    assert handled == ["a"]
    released = stall.matched(1)
    assert released is not None
    assert [h.item for h in released.held] == ["b", "c", "d"]


# -- settlement -------------------------------------------------------------------------


def settled(settlement: Settlement, error: AgentHostError | None = None) -> CallSettled:
    return CallSettled(turn_id="t1", settlement=settlement, error=error)


PROVIDER_ERROR = AgentHostError(code=ErrorCode.PROVIDER_ERROR, message="model overloaded")


def test_a_resolved_call_that_settles_with_its_turn_lost_its_completion() -> None:
    turn = active(settled=settled(Settlement.RESOLVED))
    assert settled_end(turn, call_settles_with_turn=True) == TurnCompleted(turn_id="t1")


def test_a_resolved_call_that_returns_early_leaves_the_turn_running() -> None:
    turn = active(settled=settled(Settlement.RESOLVED))
    assert settled_end(turn, call_settles_with_turn=False) is None


def test_a_rejected_call_keeps_the_providers_own_error() -> None:
    turn = active(settled=settled(Settlement.REJECTED, PROVIDER_ERROR))
    assert settled_end(turn, call_settles_with_turn=False) == TurnFailed(
        turn_id="t1", error=PROVIDER_ERROR
    )


def test_a_call_refused_before_it_was_taken_is_abandoned_in_the_providers_words() -> None:
    turn = active(settled=settled(Settlement.NOT_STARTED, PROVIDER_ERROR))
    end = settled_end(turn, call_settles_with_turn=True)
    assert isinstance(end, TurnFailed)
    assert end.error == AgentHostError(
        code=ErrorCode.EXECUTION_ABANDONED, message="model overloaded"
    )


def test_a_call_never_started_without_words_says_so() -> None:
    turn = active(settled=settled(Settlement.NOT_STARTED))
    end = settled_end(turn, call_settles_with_turn=False)
    assert isinstance(end, TurnFailed)
    assert end.error.code is ErrorCode.EXECUTION_ABANDONED
    assert end.error.message == NEVER_STARTED


def test_no_settled_end_while_a_request_is_open() -> None:
    request = OpenRequest(request_id="r", kind=RequestKind.PERMISSION, turn_id="t1")
    turn = active(settled=settled(Settlement.NOT_STARTED), requests={"r": request})
    assert settled_end(turn, call_settles_with_turn=True) is None


def test_no_settled_end_before_the_call_settled() -> None:
    assert settled_end(active(), call_settles_with_turn=True) is None


# -- diagnoses --------------------------------------------------------------------------


def test_a_snapshot_lists_parked_requests_by_kind_and_how_quiet_the_provider_was() -> None:
    requests = {
        "r1": OpenRequest(request_id="r1", kind=RequestKind.PERMISSION, turn_id="t1"),
        "r2": OpenRequest(request_id="r2", kind=RequestKind.USER_INPUT, turn_id="t1"),
        "r3": OpenRequest(request_id="r3", kind=RequestKind.CLIENT_TOOL, turn_id="t1"),
    }
    turn = active(sent=True, own_echo_seen=True, requests=requests, last_event_at=10.0)
    snap = diagnoses.snapshot(turn, now=12.5)
    assert (snap.parked_permissions, snap.parked_user_input, snap.parked_client_tools) == (
        ("r1",),
        ("r2",),
        ("r3",),
    )
    assert snap.quiet_s == 2.5 and snap.provider_started
    assert snap.call_state is CallState.PENDING


def test_the_call_state_follows_the_send_and_its_settlement() -> None:
    assert diagnoses.call_state(active()) is CallState.NOT_STARTED
    assert diagnoses.call_state(active(sent=True)) is CallState.PENDING
    resolved = active(sent=True, settled=settled(Settlement.RESOLVED))
    assert diagnoses.call_state(resolved) is CallState.RESOLVED
    rejected = active(sent=True, settled=settled(Settlement.NOT_STARTED))
    assert diagnoses.call_state(rejected) is CallState.REJECTED


def test_waiting_callers_get_the_providers_view_when_it_answers() -> None:
    desk = Diagnoses()
    snap = diagnoses.snapshot(active(), now=0.0)
    future = desk.wait(snap)
    desk.answered((("running", "True"),))
    assert future.get(timeout=0).provider == (("running", "True"),)


def test_waiting_callers_get_the_hosts_view_when_the_provider_will_not_answer() -> None:
    desk = Diagnoses()
    snap = diagnoses.snapshot(active(), now=0.0)
    future = desk.wait(snap)
    desk.unanswered()
    desk.answered((("late", "1"),))  # nobody waits any more
    assert future.get(timeout=0) == snap


# -- turn_events ------------------------------------------------------------------------


def test_a_tool_call_without_permission_is_ready_as_it_starts() -> None:
    turn = active()
    event = ProviderToolCallStarted(turn_id="t1", tool_call_id="c1", name="ls", arguments="{}")
    assert turn_events.tool_started(turn, event) == (
        ToolCallStarted(turn_id="t1", tool_call_id="c1", tool_name="ls", display_name="ls"),
        ToolCallReady(
            turn_id="t1",
            tool_call_id="c1",
            invocation_message="ls",
            tool_input="{}",
            confirmed="not-needed",
        ),
    )
    assert turn.tool_calls == {"c1": "ls"}


def test_a_tool_call_that_needs_permission_only_starts() -> None:
    event = ProviderToolCallStarted(
        turn_id="t1", tool_call_id="c1", name="rm", needs_permission=True
    )
    [started] = turn_events.tool_started(active(), event)
    assert isinstance(started, ToolCallStarted)


def test_a_completed_tool_call_names_the_hosts_turn_and_usage_is_the_providers() -> None:
    turn = active("host-turn", key="run")
    done = ProviderToolCallCompleted(turn_id="run", tool_call_id="c1", success=False)
    assert turn_events.tool_completed(turn, done) == ToolCallCompleted(
        turn_id="host-turn", tool_call_id="c1", success=False
    )
    used = UsageUpdated(turn_id="run", prompt_tokens=3, completion_tokens=5)
    assert turn_events.usage(used) == Usage(prompt_tokens=3, completion_tokens=5)


# -- streamed tool input ---------------------------------------------------------------
def test_a_streaming_call_is_started_then_ready_once_whole_and_only_its_deltas_go_out() -> None:
    from agenthost.actors.turn_events import tool_input_delta, tool_started
    from agenthost.messages.provider import ToolCallStarted, ToolInputDelta

    turn = active()
    plain = ToolCallStarted(turn_id="t1", tool_call_id="c1", name="ls")
    assert [a.wire_type for a in tool_started(turn, plain)] == [
        "chat/toolCallStart",
        "chat/toolCallReady",
    ]
    assert tool_input_delta(turn, ToolInputDelta(turn_id="t1", tool_call_id="c1")) is None
    streaming = ToolCallStarted(turn_id="t1", tool_call_id="c2", name="w", streaming=True)
    assert [a.wire_type for a in tool_started(turn, streaming)] == ["chat/toolCallStart"]
    piece = tool_input_delta(turn, ToolInputDelta(turn_id="t1", tool_call_id="c2", content="{"))
    assert piece is not None and piece.content == "{"
    whole = ToolCallStarted(turn_id="t1", tool_call_id="c2", name="w", arguments="{}")
    [ready] = tool_started(turn, whole)
    assert ready.wire_type == "chat/toolCallReady" and ready.tool_input == "{}"  # type: ignore[attr-defined]
    assert tool_input_delta(turn, ToolInputDelta(turn_id="t1", tool_call_id="c2")) is None
