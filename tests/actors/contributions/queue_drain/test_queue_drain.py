"""queue_drain: the queue drains after a success, as its senders' requests."""

from typing import Any

import attrs

from agenthost.actors import Host
from agenthost.actors.contributions import (
    ChatKey,
    Contribution,
    IncomingRequest,
    TurnEnd,
    TurnEndReason,
)
from agenthost.actors.contributions.queue_drain import QueueDrain
from agenthost.messages import AgentHostError, ChatState, ErrorCode, OutcomeState
from agenthost.messages.state import (
    ActiveTurn,
    PendingKind,
    PendingMessage,
    SessionState,
    Turn,
    TurnState,
    UserMessage,
)
from agenthost.providers.scripted import Gate, Say, ScriptedProvider
from tests.actors.contributions.conftest import Start


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
        self.told: list[tuple[ChatKey, bool | None, bool]] = []

    def turn_ended(
        self, chat: ChatKey, state: ChatState, *, succeeded: bool | None, drain: bool
    ) -> bool:
        self.told.append((chat, succeeded, drain))
        return True


def test_queue_drain_tells_how_turns_ended_and_drains_only_after_a_success() -> None:
    """A success releases the queue and drains (not after a resumable error, not
    while a turn runs); any other end of a turn holds it; a local command drains
    without releasing; with nothing pending there is nothing to tell."""
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

    def ended(reason: TurnEndReason, state: ChatState) -> tuple[bool | None, bool] | None:
        before = len(chats.told)
        drain.on_turn_end(TurnEnd(chat=key, reason=reason, state=state, session=SessionState()))
        return chats.told[-1][1:] if len(chats.told) > before else None

    assert ended(TurnEndReason.SUCCESS, ChatState(resource="r")) is None  # nothing pending
    assert ended(TurnEndReason.ERROR, waiting) == (False, False)
    assert ended(TurnEndReason.CANCELLED, waiting) == (False, False)
    assert ended(TurnEndReason.ABANDONED, waiting) == (False, False)
    assert ended(TurnEndReason.REJECTED, waiting) == (None, False)
    assert ended(TurnEndReason.SUCCESS, attrs.evolve(waiting, turns=(resumable,))) == (True, False)
    active = ActiveTurn(id="a", message=UserMessage(text="a"))
    assert ended(TurnEndReason.SUCCESS, attrs.evolve(waiting, active_turn=active)) == (True, False)
    assert ended(TurnEndReason.SUCCESS, waiting) == (True, True)
    assert ended(TurnEndReason.LOCAL_COMMAND, waiting) == (None, True)
    # Steering waiting: the queue-drain actor decides (held steering runs next).
    steering_waits = ChatState(resource="r", steering_messages=(steering,))
    assert ended(TurnEndReason.SUCCESS, steering_waits) == (True, True)
    assert {told[0] for told in chats.told} == {key}
