"""actors/steering.py: the steering ledger, without actors (DESIGN.md rule 1)."""

from agenthost.actors.protocol import Handled, RemovalOutcome
from agenthost.actors.steering import (
    Cancel,
    Requeue,
    Settle,
    Stage,
    SteeringLedger,
    Unpark,
    Withdraw,
)
from agenthost.messages.provider import UserMessageEcho


def sent(ledger: SteeringLedger, pending_id: str, text: str, provider_id: str | None) -> None:
    ledger.add(pending_id, text)
    assert ledger.handled(pending_id, Handled.HANDED, may_withdraw=True) == []
    assert ledger.answered(pending_id, provider_id, refused=False, may_withdraw=True) == []


def echo(text: str, provider_id: str | None = None) -> UserMessageEcho:
    return UserMessageEcho(turn_id="run", text=text, provider_message_id=provider_id)


def test_a_removal_of_a_message_the_provider_has_is_a_withdraw_request() -> None:
    ledger = SteeringLedger()
    sent(ledger, "p", "text", "m1")
    assert ledger.remove("p", may_withdraw=True) == [Withdraw("p", "m1", "text")]
    assert "p" in ledger  # only the provider's answer removes it
    assert ledger.withdrawn("p", removed=True) == [Settle("p", RemovalOutcome.WITHDRAWN)]
    assert "p" not in ledger


def test_a_provider_that_says_no_keeps_the_message_until_its_echo() -> None:
    ledger = SteeringLedger()
    sent(ledger, "p", "text", "m1")
    ledger.remove("p", may_withdraw=True)
    assert ledger.withdrawn("p", removed=False) == [Settle("p", RemovalOutcome.NOT_WITHDRAWN)]
    assert ledger.match(echo("text", "m1")) is not None


def test_a_provider_that_cannot_withdraw_rejects_the_removal_at_once() -> None:
    ledger = SteeringLedger()
    sent(ledger, "p", "text", "m1")
    assert ledger.remove("p", may_withdraw=False) == [Settle("p", RemovalOutcome.REJECTED)]
    assert "p" in ledger


def test_a_message_still_being_handed_over_is_unparked_and_dropped_if_it_was_not_sent() -> None:
    ledger = SteeringLedger()
    ledger.add("p", "text")
    assert ledger.remove("p", may_withdraw=True) == [Unpark("p")]
    assert ledger.handled("p", Handled.DROPPED, may_withdraw=True) == [
        Settle("p", RemovalOutcome.DROPPED)
    ]


def test_a_removal_that_raced_the_hand_over_becomes_a_withdraw_once_the_id_is_known() -> None:
    ledger = SteeringLedger()
    ledger.add("p", "text")
    assert ledger.remove("p", may_withdraw=True) == [Unpark("p")]
    assert ledger.handled("p", Handled.HANDED, may_withdraw=True) == []  # no id yet
    assert ledger.answered("p", "m1", refused=False, may_withdraw=True) == [
        Withdraw("p", "m1", "text")
    ]


def test_held_steering_is_simply_dropped() -> None:
    ledger = SteeringLedger()
    ledger.add("p", "text")
    ledger.handled("p", Handled.HELD, may_withdraw=False)
    assert ledger.held() == ("p",) and not ledger.on_provider()
    assert ledger.remove("p", may_withdraw=False) == [Settle("p", RemovalOutcome.DROPPED)]


def test_echoes_match_by_provider_id_first_then_by_text_where_an_id_is_missing() -> None:
    ledger = SteeringLedger()
    sent(ledger, "a", "same", "m1")
    sent(ledger, "b", "same", "m2")
    sent(ledger, "c", "same", None)
    match = ledger.match(echo("same", "m2"))
    assert match is not None and match.pending_id == "b"
    assert match.stage is Stage.CONSUMING
    match = ledger.match(echo("same", "m9"))  # an unknown id: text, among those without one
    assert match is not None and match.pending_id == "c"
    match = ledger.match(echo("same"))  # no id: text, oldest first
    assert match is not None and match.pending_id == "a"
    assert ledger.match(echo("same")) is None


def test_a_message_being_withdrawn_is_matched_last() -> None:
    ledger = SteeringLedger()
    sent(ledger, "a", "same", None)
    sent(ledger, "b", "same", None)
    ledger.answered("a", None, refused=False, may_withdraw=True)
    ledger.get("a").withdrawing = True  # type: ignore[union-attr]
    match = ledger.match(echo("same"))
    assert match is not None and match.pending_id == "b"


def test_a_removal_after_the_model_read_it_is_answered_gone() -> None:
    ledger = SteeringLedger()
    sent(ledger, "p", "text", "m1")
    ledger.match(echo("text", "m1"))
    assert ledger.remove("p", may_withdraw=True) == [Settle("p", RemovalOutcome.GONE)]
    ledger.consumed("p")
    assert "p" not in ledger


def test_a_refused_steer_goes_back_to_the_queue() -> None:
    ledger = SteeringLedger()
    ledger.add("p", "text")
    ledger.handled("p", Handled.HANDED, may_withdraw=True)
    assert ledger.answered("p", None, refused=True, may_withdraw=True) == [Requeue("p")]


def test_a_cancel_takes_what_the_provider_had_never_a_withdraw() -> None:
    ledger = SteeringLedger()
    sent(ledger, "a", "one", "m1")
    sent(ledger, "b", "two", "m2")
    ledger.add("h", "held")
    ledger.handled("h", Handled.HELD, may_withdraw=True)
    assert ledger.cancelled() == [Cancel(("a", "b"))]
    assert ledger.held() == ("h",)


def test_a_lost_provider_requeues_what_it_had_and_drops_what_a_client_was_removing() -> None:
    ledger = SteeringLedger()
    sent(ledger, "a", "one", "m1")
    sent(ledger, "b", "two", "m2")
    ledger.remove("b", may_withdraw=True)  # withdrawing
    assert ledger.provider_gone() == [Requeue("a"), Settle("b", RemovalOutcome.DROPPED)]
    assert len(ledger) == 0
