"""The Copilot provider end to end: the public Host surface, the real SDK, the stand-in CLI."""

import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from agenthost.actors import Chat, Host
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState, TurnState
from agenthost.messages.events import (
    AssistantDelta,
    ChatEvent,
    ChatSnapshot,
    PendingMessageRemoved,
    RemovalReason,
    RequestOpened,
    TurnFailed,
)
from agenthost.messages.reducers import reduce_chat
from agenthost.messages.state import ChatState, ClientTool, RequestKind
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.providers.copilot.conftest import LOADER, STANDIN, WAIT_S, StandIn
from tests.providers.processes import wait_gone


@pytest.fixture
def copilot_chat(tmp_path: Path, db_path: Path, clock: FakeClock) -> Iterator[Callable[..., Any]]:
    """A chat on a Copilot provider whose stand-in CLI follows `script`."""
    hosts: list[Host] = []

    def make(
        script: dict[str, Any] | None = None,
        client_tools: tuple[ClientTool, ...] = (),
        cli: Path = STANDIN,
    ) -> tuple[Chat, StandIn]:
        standin = StandIn(tmp_path, script or {}, cli=cli, client_tools=client_tools)
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


@pytest.mark.parametrize("abort_lag", [0, 0.5], ids=["prompt abort", "lagging abort"])
def test_a_cancelled_turn_keeps_its_text_and_the_next_turn_runs(
    copilot_chat, abort_lag: float
) -> None:
    """The real CLI answers the abort at once and unwinds the run after, dropping
    what it queued meanwhile: the next turn's message waits for the abort's idle."""
    script = {"replies": {"long": [{"say": "a"}, {"until": "abort"}]}, "abort_lag": abort_lag}
    chat, standin = copilot_chat(script)
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


NO_LOGIN = "Execution failed: InvalidArg, No GitHub OAuth token or Copilot HMAC key provided"


def test_without_a_login_each_send_ends_with_an_error_naming_the_missing_login(
    copilot_chat: Callable[..., Any],
) -> None:
    """The real CLI answers the send, then says session.error and goes idle, never
    echoing the message: the turn ends with that error (it stayed open for good)."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    chat, _ = copilot_chat({"refuse_sends": NO_LOGIN})
    follow = Follow(chat)
    with structlog.testing.capture_logs() as logs:
        first = chat.send("hello").result(timeout=WAIT_S)
        second = chat.send("hello again").result(timeout=WAIT_S)
    for outcome in (first, second):
        assert outcome.state is OutcomeState.ERROR
        assert outcome.error is not None
        assert outcome.error.code is ErrorCode.PROVIDER_LOGIN_REQUIRED
        assert "no GitHub login" in outcome.error.message
        assert NO_LOGIN in outcome.error.message  # the CLI's own words
    while not isinstance(event := follow.next(), TurnFailed):
        pass
    assert event.error == first.error
    ended = [e for e in logs if e["event"] == "turn_ended"]
    assert [e["turn_id"] for e in ended] == [first.turn_id, second.turn_id]
    assert all(NO_LOGIN in e["reason"] for e in ended)
    assert any(e["event"] == "copilot_session_error" for e in logs)


def test_an_error_before_the_echo_ends_the_turn_in_the_cli_s_words(
    copilot_chat: Callable[..., Any],
) -> None:
    chat, _ = copilot_chat({"refuse_sends": "Model is overloaded"})
    outcome = chat.send("hello").result(timeout=WAIT_S)
    assert outcome.state is OutcomeState.ERROR
    assert outcome.error == AgentHostError(
        code=ErrorCode.PROVIDER_ERROR, message="Model is overloaded"
    )


def test_a_cli_that_goes_idle_without_running_the_message_ends_its_turn(
    copilot_chat: Callable[..., Any],
) -> None:
    chat, _ = copilot_chat({"drop_sends": True})
    outcome = chat.send("hello").result(timeout=WAIT_S)
    assert outcome.state is OutcomeState.ERROR
    assert outcome.error is not None
    assert "went idle without running the message" in outcome.error.message


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the guard's tree is Linux's")
@pytest.mark.parametrize(("killed", "gone"), [("pid", "ppid"), ("ppid", "pid")])
def test_with_a_loader_as_cli_path_a_kill_mid_turn_ends_the_turn_and_leaves_nothing(
    copilot_chat: Callable[..., Any], killed: str, gone: str
) -> None:
    """npm's `copilot` is a loader that starts the native CLI as its child: a kill -9
    of either mid-turn ends the turn, the other goes with it (the guard ends the
    tree) and the next send starts a new CLI."""
    chat, standin = copilot_chat(
        {"replies": {"long": [{"say": "a"}, {"until": "abort"}]}}, cli=LOADER
    )
    follow = Follow(chat)
    long = chat.send("long")
    follow.until_delta("a")
    [first] = standin.requests("$process")
    assert first["ppid"] != first["sid"], "the stand-in CLI is the loader's child"
    os.kill(first[killed], signal.SIGKILL)
    assert wait_gone(first[gone]), "the rest of the tree outlived the kill"
    outcome = long.result(timeout=WAIT_S)
    assert outcome.state is OutcomeState.ERROR
    assert outcome.error is not None and outcome.error.code is ErrorCode.EXECUTION_ABANDONED
    after = chat.send("after").result(timeout=WAIT_S)
    assert (after.state, after.text) == (OutcomeState.COMPLETE, "echo: after")
    assert standin.requests("$process")[-1]["pid"] != first["pid"]
