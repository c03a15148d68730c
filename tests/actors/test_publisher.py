"""The chat's durable publisher and its store writes, as plain objects (no actors).

Publication order is reduction order; a turn's end, and everything reduced
after it, waits for its store write's commit; a reply waits for what was
reduced before it (read your writes)."""

import pytest

from agenthost.actors.handles import Subscription, Ticket
from agenthost.actors.publisher import Publication, Publisher, StoreWrites
from agenthost.messages.commands import OutcomeState
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import AssistantDelta, ChatEvent, TurnCompleted, TurnStarted
from agenthost.messages.reducers import reduce_chat
from agenthost.messages.state import ChatState, TurnState, UserMessage
from agenthost.store.records import SaveAssistantText, SavePending, SaveTurnEnded, StoreOp

EMPTY = ChatState(resource="ahp-chat:/c")
STARTED = TurnStarted(turn_id="t", message=UserMessage(text="go"))
DELTA = AssistantDelta(turn_id="t", part_id="p", text="hi")
ENDED = TurnCompleted(turn_id="t")


def _subscribed(publisher: Publisher) -> Subscription:
    subscription = Subscription(maxsize=100)
    publisher.subscribers.append(subscription)
    return subscription


def _drained(subscription: Subscription) -> list[ChatEvent]:
    events = []
    while (event := subscription.next_nowait()) is not None:
        events.append(event)
    return events


def _ended(state: ChatState) -> ChatState:
    return reduce_chat(reduce_chat(state, STARTED), ENDED)


def test_an_event_nothing_waits_ahead_of_is_published_at_once_and_pushed_once_per_burst() -> None:
    publisher = Publisher(EMPTY)
    subscription = _subscribed(publisher)
    started = reduce_chat(EMPTY, STARTED)
    publisher.event(STARTED, started)
    publisher.event(DELTA, started)
    assert publisher.published is started
    assert _drained(subscription) == []  # nothing pushed before publish_ready
    publisher.publish_ready()
    assert _drained(subscription) == [STARTED, DELTA]


def test_a_publication_waiting_on_a_write_holds_back_everything_reduced_after_it() -> None:
    publisher = Publisher(EMPTY)
    subscription = _subscribed(publisher)
    started = reduce_chat(EMPTY, STARTED)
    ended = reduce_chat(started, ENDED)
    publisher.add(Publication(after_write=3, state=ended, event=ENDED))
    publisher.event(STARTED, started)  # reduced after the end: waits behind it
    publisher.publish_ready()
    assert publisher.published is EMPTY and _drained(subscription) == []
    publisher.committed_upto(2, None)
    publisher.publish_ready()
    assert publisher.published is EMPTY
    publisher.committed_upto(3, None)
    publisher.publish_ready()
    assert _drained(subscription) == [ENDED, STARTED]
    assert publisher.published is started


def test_a_reply_is_at_once_when_nothing_waits_else_once_what_came_before_is_published() -> None:
    publisher = Publisher(EMPTY)
    assert publisher.reply_when_published("now", EMPTY) == "now"
    ended = _ended(EMPTY)
    publisher.add(Publication(after_write=1, state=ended, event=ENDED))
    future = publisher.reply_when_published("later", ended)
    assert publisher.waited_on()
    publisher.publish_ready()
    assert not future.done()
    publisher.committed_upto(1, None)
    publisher.publish_ready()
    assert future.get(timeout=0) == "later"
    assert not publisher.waited_on()


def test_a_turns_ticket_resolves_from_the_published_state_once_its_end_is_committed() -> None:
    publisher = Publisher(EMPTY)
    ticket = Ticket()
    ticket.started("t")
    ended = _ended(EMPTY)
    publisher.add(Publication(after_write=1, state=ended, event=ENDED, ticket=ticket))
    publisher.publish_ready()
    assert not ticket.outcome.done()
    publisher.committed_upto(1, None)
    publisher.publish_ready()
    outcome = ticket.outcome.get(timeout=0)
    assert outcome.state is OutcomeState.COMPLETE and outcome.turn_id == "t"
    assert ended.turns[-1].state is TurnState.COMPLETE


def test_a_failed_commit_fails_the_tickets_it_carried_and_publication_goes_on() -> None:
    publisher = Publisher(EMPTY)
    ticket = Ticket()
    ticket.started("t")
    ended = _ended(EMPTY)
    publisher.add(Publication(after_write=1, state=ended, event=ENDED, ticket=ticket))
    lost = AgentHostError(code=ErrorCode.STORE_ERROR, message="disk full")
    publisher.committed_upto(1, lost)
    publisher.publish_ready()
    with pytest.raises(AgentHostError) as raised:
        ticket.outcome.get(timeout=0)
    assert raised.value is lost
    assert publisher.published is ended


def test_a_subscriber_that_closed_is_dropped_and_reported() -> None:
    publisher = Publisher(EMPTY)
    gone = _subscribed(publisher)
    kept = _subscribed(publisher)
    gone.close()
    publisher.event(STARTED, reduce_chat(EMPTY, STARTED))
    assert publisher.publish_ready() is True
    assert publisher.subscribers == [kept]
    assert publisher.publish_ready() is False


def test_stop_fails_every_waiting_caller_and_closes_the_subscribers() -> None:
    publisher = Publisher(EMPTY)
    subscription = _subscribed(publisher)
    ticket = Ticket()
    ended = _ended(EMPTY)
    publisher.add(Publication(after_write=1, state=ended, event=ENDED, ticket=ticket))
    reply = publisher.reply_when_published(True, ended)
    stopped = AgentHostError(code=ErrorCode.HOST_STOPPED, message="stopped")
    publisher.stop(stopped)
    for future in (ticket.outcome, reply):
        with pytest.raises(AgentHostError) as raised:
            future.get(timeout=0)
        assert raised.value is stopped
    assert subscription.closed


def _pending() -> StoreOp:
    from agenthost.messages.state import PendingKind, PendingMessage

    pending = PendingMessage(id="q", kind=PendingKind.QUEUED, message=UserMessage(text="x"))
    return SavePending(session_id="s", chat_id="c", pending=pending, position=0)


def test_store_writes_leave_as_one_write_many_in_order_acked_only_when_gated() -> None:
    writes = StoreWrites()
    assert writes.take("chat", lambda seq: seq) is None
    first = writes.write(_pending())
    second = writes.write(SaveAssistantText(chat_id="c", turn_id="t", text="a"))
    assert (first, second) == (1, 2)
    batch = writes.take("chat", lambda seq: ("ack", seq))
    assert batch is not None and batch.ack_to is None  # nothing gated: nobody waits
    assert [type(op) for op in batch.ops] == [SavePending, SaveAssistantText]
    end = SaveTurnEnded(
        chat_id="c", turn_id="t", state=TurnState.COMPLETE, assistant_text="ab", ended_at=1
    )
    assert writes.write(end, gate=True) == 3
    gated = writes.take("chat", lambda seq: ("ack", seq))
    assert gated is not None and gated.ack_to == "chat" and gated.ack == ("ack", 3)
    assert writes.take("chat", lambda seq: seq) is None


def test_a_turns_end_in_the_batch_drops_the_batchs_partial_texts_of_that_turn() -> None:
    writes = StoreWrites()
    writes.write(SaveAssistantText(chat_id="c", turn_id="t", text="a"))
    writes.write(SaveAssistantText(chat_id="c", turn_id="other", text="b"))
    end = SaveTurnEnded(
        chat_id="c", turn_id="t", state=TurnState.COMPLETE, assistant_text="ab", ended_at=1
    )
    writes.write(end, gate=True)
    batch = writes.take("chat", lambda seq: seq)
    assert batch is not None
    assert batch.ops == (SaveAssistantText(chat_id="c", turn_id="other", text="b"), end)
