"""The dispatcher's rules, without actors: order, isolation, fail-closed
admission, threading of outgoing turns, hydration fall-through, registration."""

from types import SimpleNamespace
from typing import Any

import pytest

from agenthost.actors.contributions import (
    ACCEPT,
    ChatKey,
    Contribution,
    ContributionError,
    Handled,
    IncomingRequest,
    Outgoing,
    OutgoingTurn,
    Reject,
    RequestKind,
    RequestSource,
    TurnEnd,
    TurnEndReason,
    Verdict,
    build_dispatcher,
)
from agenthost.actors.contributions.dispatcher import Dispatcher
from agenthost.messages import AgentHostError, ChatState, ErrorCode
from agenthost.messages.events import AssistantDelta, TurnStarted
from agenthost.messages.state import SessionState, Turn, TurnState, UserMessage

CHAT = ChatKey(session_id="s", chat_id="c")
STATE = ChatState(resource="ahp-chat:/c")


def request(text: str = "hi") -> IncomingRequest:
    return IncomingRequest(
        chat=CHAT,
        kind=RequestKind.SEND,
        text=text,
        source=RequestSource.CLIENT,
        client_id=None,
        state=STATE,
        session=SessionState(),
    )


def end() -> TurnEnd:
    return TurnEnd(chat=CHAT, reason=TurnEndReason.SUCCESS, state=STATE, session=SessionState())


def named(cid: str, order: int, **hooks: Any) -> Contribution:
    """A contribution instance with these hooks (as methods taking the hook's value)."""
    cls = type(f"C_{cid}", (Contribution,), {"id": cid, "order": order, **hooks})
    return cls()  # type: ignore[no-any-return]


def test_lower_order_runs_first_and_ties_keep_registration_order() -> None:
    calls: list[str] = []

    def note(cid: str) -> Any:
        return lambda self, value: calls.append(cid)

    dispatcher = Dispatcher(
        [
            named("late", 300, on_turn_end=note("late")),
            named("tie_a", 200, on_turn_end=note("tie_a")),
            named("early", 100, on_turn_end=note("early")),
            named("tie_b", 200, on_turn_end=note("tie_b")),
        ]
    )
    dispatcher.turn_end(end())
    assert calls == ["early", "tie_a", "tie_b", "late"]


def test_only_contributions_that_implement_a_hook_are_called_for_it() -> None:
    dispatcher = Dispatcher(
        [named("observer", 1, on_turn_end=lambda self, e: None), named("idle", 2)]
    )
    assert dispatcher.ids("on_turn_end") == ["observer"]
    assert dispatcher.ids("on_incoming_request") == []
    assert dispatcher.ids() == ["observer", "idle"]


def test_an_observer_that_raises_is_logged_and_the_next_one_still_runs() -> None:
    calls: list[str] = []

    def boom(self: Contribution, value: object) -> None:
        raise RuntimeError("boom")

    for hook, call in (
        ("on_turn_end", lambda d: d.turn_end(end())),
        ("on_did_dispatch_action", lambda d: d.did_dispatch(SimpleNamespace(action=object()))),
        (
            "on_did_apply_client_action",
            lambda d: d.did_apply_client_action(SimpleNamespace(action=object())),
        ),
    ):
        calls.clear()
        dispatcher = Dispatcher(
            [
                named("bad", 1, **{hook: boom}),
                named("good", 2, **{hook: lambda s, v: calls.append("good")}),
            ]
        )
        call(dispatcher)
        assert calls == ["good"], hook


@pytest.mark.parametrize(
    ("hook", "names", "from_client"),
    [
        ("on_did_dispatch_action", "observes", False),
        ("on_did_apply_client_action", "applies", True),
    ],
)
def test_a_hook_that_names_its_action_types_sees_only_those(
    hook: str, names: str, from_client: bool
) -> None:
    seen: list[tuple[str, str]] = []

    def note(cid: str) -> Any:
        return lambda self, value: seen.append((cid, type(value.action).__name__))

    picky = named("picky", 1, **{hook: note("picky")})
    setattr(type(picky), names, (TurnStarted,))
    dispatcher = Dispatcher([picky, named("all", 2, **{hook: note("all")})])
    for action in (AssistantDelta(turn_id="t", part_id="p", text="x"), turn_started()):
        dispatched = SimpleNamespace(
            action=action,
            from_client=from_client,
            rejection=None,
            chat=None,
            client_id="c",
            state=None,
            session=None,
        )
        dispatcher.action_done(dispatched)  # type: ignore[arg-type]
    assert seen == [("all", "AssistantDelta"), ("picky", "TurnStarted"), ("all", "TurnStarted")]
    assert Dispatcher([picky]).wants(AssistantDelta, from_client=from_client) is False
    assert Dispatcher([picky]).wants(TurnStarted, from_client=from_client) is True
    if from_client:  # a client action hook hears only clients' actions
        assert Dispatcher([picky]).wants(TurnStarted, from_client=False) is False


def test_admission_the_first_non_accept_wins_and_later_ones_are_not_asked() -> None:
    asked: list[str] = []

    def verdict(cid: str, answer: Verdict) -> Any:
        def hook(self: Contribution, request: IncomingRequest) -> Verdict:
            asked.append(cid)
            return answer

        return hook

    refusal = Reject(error=AgentHostError(code=ErrorCode.READ_ONLY, message="no"))
    dispatcher = Dispatcher(
        [
            named("yes", 1, on_incoming_request=verdict("yes", ACCEPT)),
            named("no", 2, on_incoming_request=verdict("no", refusal)),
            named("handler", 3, on_incoming_request=verdict("handler", Handled(reply="x"))),
        ]
    )
    result = dispatcher.incoming(request())
    assert isinstance(result, Reject) and result.stage == "no"
    assert asked == ["yes", "no"]


def test_admission_fails_closed_when_a_contribution_raises_naming_it() -> None:
    asked: list[str] = []

    def explode(self: Contribution, request: IncomingRequest) -> Verdict:
        raise ValueError("bug")

    dispatcher = Dispatcher(
        [
            named("faulty", 1, on_incoming_request=explode),
            named("later", 2, on_incoming_request=lambda s, r: asked.append("later") or ACCEPT),
        ]
    )
    result = dispatcher.incoming(request())
    assert isinstance(result, Reject)
    assert result.error.code is ErrorCode.INTERNAL and "faulty" in result.error.message
    assert result.stage == "faulty"
    assert asked == []


def test_outgoing_turns_thread_text_and_concatenate_instructions_in_order() -> None:
    seen: list[str] = []

    def step(text: str | None, instructions: str) -> Any:
        def hook(self: Contribution, turn: OutgoingTurn) -> Outgoing:
            seen.append(turn.text)
            return Outgoing(text=text, instructions=instructions)

        return hook

    def broken(self: Contribution, turn: OutgoingTurn) -> Outgoing:
        seen.append(turn.text)
        raise RuntimeError("broken")

    dispatcher = Dispatcher(
        [
            named("upper", 1, on_outgoing_turn=step("HELLO", "be brief")),
            named("broken", 2, on_outgoing_turn=broken),
            named("keep", 3, on_outgoing_turn=step(None, "")),
            named("suffix", 4, on_outgoing_turn=step("HELLO!", "cite sources")),
        ]
    )
    result = dispatcher.outgoing(
        OutgoingTurn(chat=CHAT, turn_id="t", text="hello", state=STATE, session=SessionState())
    )
    assert seen == ["hello", "HELLO", "HELLO", "HELLO"]
    assert result.text == "HELLO!"
    assert result.instructions == "be brief\n\ncite sources"


def test_hydration_passes_the_previous_value_past_a_failing_stage() -> None:
    turn = Turn(id="t1", message=UserMessage(text="hi"), state=TurnState.COMPLETE)

    def retitle(title: str) -> Any:
        return lambda self, t, d, *, chat: (title, d)

    def fail(self: Contribution, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no")

    dispatcher = Dispatcher(
        [
            named(
                "first",
                1,
                on_hydrate_chat=retitle("one"),
                on_hydrate_turns=lambda s, t, *, chat: t + t,
            ),
            named("failing", 2, on_hydrate_chat=fail, on_hydrate_turns=fail),
            named("last", 3, on_hydrate_chat=lambda s, t, d, *, chat: (t + "+", "draft")),
        ]
    )
    assert dispatcher.hydrate_chat("", None, CHAT) == ("one+", "draft")
    assert dispatcher.hydrate_turns((turn,), CHAT) == (turn, turn)


class First(Contribution):
    id = "same"


class Second(Contribution):
    id = "same"
    constructed = False

    def __init__(self) -> None:
        Second.constructed = True


def test_a_second_registration_of_an_id_raises_before_anything_is_constructed() -> None:
    with pytest.raises(ContributionError, match="'same' is registered twice"):
        build_dispatcher([Second, First], {})
    assert not Second.constructed


class WantsServices(Contribution):
    id = "wants"

    def __init__(self, mementos: object, clock: object, log: object) -> None:
        self.got = (mementos, clock, log)


class WantsNothingKnown(Contribution):
    id = "unknown"

    def __init__(self, database: object) -> None:
        pass


def test_services_are_injected_by_constructor_parameter_name() -> None:
    services = {
        name: (lambda cid, name=name: f"{name} for {cid}")
        for name in ("mementos", "clock", "log", "sessions")
    }
    dispatcher = build_dispatcher([WantsServices], services)
    (built,) = dispatcher.contributions
    assert isinstance(built, WantsServices)
    assert built.got == ("mementos for wants", "clock for wants", "log for wants")
    with pytest.raises(ContributionError, match="'database'"):
        build_dispatcher([WantsNothingKnown], services)


def turn_started() -> TurnStarted:
    return TurnStarted(turn_id="t", message=UserMessage(text="hi"))
