"""The Copilot provider end to end: the public Host surface, the real SDK, the stand-in CLI."""

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agenthost.actors import Chat, Host
from agenthost.messages import ErrorCode, OutcomeState, TurnState
from agenthost.messages.events import (
    AssistantDelta,
    ChatEvent,
    ChatSnapshot,
    PendingMessageRemoved,
    RemovalReason,
    RequestOpened,
)
from agenthost.messages.reducers import reduce_chat
from agenthost.messages.state import ChatState, ClientTool, RequestKind
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.providers.copilot.conftest import WAIT_S, StandIn


@pytest.fixture
def copilot_chat(tmp_path: Path, db_path: Path, clock: FakeClock) -> Iterator[Callable[..., Any]]:
    """A chat on a Copilot provider whose stand-in CLI follows `script`."""
    hosts: list[Host] = []

    def make(
        script: dict[str, Any] | None = None, client_tools: tuple[ClientTool, ...] = ()
    ) -> tuple[Chat, StandIn]:
        standin = StandIn(tmp_path, script or {}, client_tools=client_tools)
        host = Host.start(
            store=SqliteStore(db_path), providers={"copilot": standin.provider}, clock=clock
        )
        hosts.append(host)
        session = host.create_session(provider="copilot")
        if client_tools:
            session.set_client_tools("client-1", client_tools)
        return session.chat(), standin

    yield make
    for host in hosts:
        host.stop()


def turns_of(chat: Chat) -> list[tuple[str, str, TurnState]]:
    return [(t.user_text, t.assistant_text, t.state) for t in chat.state().turns]


class Follow:
    """A chat's events as they come, folded into its state the way clients do."""

    def __init__(self, chat: Chat) -> None:
        self.sub = chat.subscribe()
        self.seen: list[ChatEvent] = []
        self.state: ChatState | None = None

    def next(self) -> ChatEvent:
        event = self.sub.next(WAIT_S)
        self.seen.append(event)
        snapshot = isinstance(event, ChatSnapshot)
        self.state = event.state if snapshot else reduce_chat(self.state, event)
        return event

    def until_delta(self, text: str) -> None:
        while not (isinstance(event := self.next(), AssistantDelta) and event.text == text):
            pass

    def until_settled(self, turns: int) -> None:
        """Until `turns` turns ended, none runs and no steering is pending."""
        while not (
            (state := self.state) is not None
            and len(state.turns) >= turns
            and state.active_turn is None
            and not state.steering_messages
        ):
            self.next()


def test_a_turn_completes_and_the_assistant_text_is_stored(copilot_chat) -> None:
    chat, standin = copilot_chat()
    outcome = chat.send("hi").result(timeout=WAIT_S)
    assert (outcome.state, outcome.text) == (OutcomeState.COMPLETE, "echo: hi")
    assert turns_of(chat) == [("hi", "echo: hi", TurnState.COMPLETE)]
    assert standin.prompts() == ["hi"]


def test_steering_reaches_the_running_turn_and_becomes_its_own_turn(copilot_chat) -> None:
    script = {
        "replies": {"work": [{"say": "a"}, {"until": "steer"}, {"tool": "grep"}, {"say": "b"}]}
    }
    chat, standin = copilot_chat(script)
    follow = Follow(chat)
    first = chat.send("work")
    follow.until_delta("a")
    steering = chat.steer("focus")
    assert first.result(timeout=WAIT_S).text == "a"
    follow.until_settled(turns=2)
    assert turns_of(chat) == [
        ("work", "a", TurnState.COMPLETE),
        ("focus", "b", TurnState.COMPLETE),
    ]
    removed = [e for e in follow.seen if isinstance(e, PendingMessageRemoved)]
    assert [(e.pending_id, e.reason) for e in removed] == [(steering.id, RemovalReason.CONSUMED)]
    assert standin.requests("session.send")[-1]["mode"] == "immediate"


def test_removing_steering_the_model_has_not_read_withdraws_it(copilot_chat) -> None:
    chat, standin = copilot_chat({"replies": {"work": [{"say": "a"}, {"until": "withdraw"}]}})
    follow = Follow(chat)
    first = chat.send("work")
    follow.until_delta("a")
    steering = chat.steer("never mind")
    assert chat.remove_pending(steering.id) is True
    assert first.result(timeout=WAIT_S).text == "a"
    assert turns_of(chat) == [("work", "a", TurnState.COMPLETE)]
    assert chat.state().pending == ()
    [withdrawn] = standin.requests("session.queue.withdrawMessage")
    assert withdrawn["expectedPrompt"] == "never mind"


def test_a_cancelled_turn_keeps_its_text_and_the_next_turn_runs(copilot_chat) -> None:
    chat, standin = copilot_chat({"replies": {"long": [{"say": "a"}, {"until": "abort"}]}})
    follow = Follow(chat)
    first = chat.send("long")
    follow.until_delta("a")
    assert chat.cancel() is True
    assert first.result(timeout=WAIT_S).state is OutcomeState.CANCELLED
    assert chat.send("next").result(timeout=WAIT_S).text == "echo: next"
    assert turns_of(chat) == [
        ("long", "a", TurnState.CANCELLED),
        ("next", "echo: next", TurnState.COMPLETE),
    ]
    assert len(standin.requests("session.abort")) == 1


def test_permission_and_client_tool_requests_are_answered_through_the_chat(
    copilot_chat,
) -> None:
    script = {"replies": {"go": [{"tool": "make", "permission": True}, {"client_tool": "lookup"}]}}
    chat, standin = copilot_chat(script, client_tools=(ClientTool(name="lookup"),))
    follow = Follow(chat)
    turn = chat.send("go")
    while not isinstance(opened := follow.next(), RequestOpened):
        pass
    assert opened.request.kind is RequestKind.PERMISSION
    chat.answer(opened.request.request_id, approved=True)
    while not isinstance(opened := follow.next(), RequestOpened):
        pass
    assert (opened.request.kind, opened.request.tool_name) == (RequestKind.CLIENT_TOOL, "lookup")
    chat.answer(opened.request.request_id, result="found", client_id="client-1")
    assert turn.result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    [decision] = standin.requests("session.permissions.handlePendingPermissionRequest")
    assert decision["result"]["kind"] == "approve-once"
    [result] = standin.requests("session.tools.handlePendingToolCall")
    assert result["result"]["textResultForLlm"] == "found"


def test_after_a_failed_turn_the_next_prompt_carries_only_its_own_message(copilot_chat) -> None:
    chat, standin = copilot_chat({"replies": {"one": [{"error": "model overloaded"}]}})
    failed = chat.send("one").result(timeout=WAIT_S)
    assert failed.state is OutcomeState.ERROR
    assert failed.error is not None and failed.error.message == "model overloaded"
    assert chat.send("two").result(timeout=WAIT_S).text == "echo: two"
    assert chat.send("three").result(timeout=WAIT_S).text == "echo: three"
    assert standin.prompts() == ["one", "two", "three"]


def test_a_crashed_cli_is_restarted_and_the_session_resumed(copilot_chat) -> None:
    chat, standin = copilot_chat({"replies": {"boom": [{"say": "a"}, {"crash": True}]}})
    crashed = chat.send("boom").result(timeout=WAIT_S)
    assert crashed.state is OutcomeState.ERROR
    assert crashed.error is not None and crashed.error.code is ErrorCode.EXECUTION_ABANDONED
    assert chat.send("hi").result(timeout=WAIT_S).text == "echo: hi"
    [created] = standin.requests("session.create")
    [resumed] = standin.requests("session.resume")
    assert resumed["sessionId"] == created["sessionId"]
