"""Codex end to end: the public host surface, the real SDK, the stand-in CLI."""

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from agenthost.actors import Chat, Host, RestartPolicy, Subscription
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState, TurnState
from agenthost.messages.events import AssistantDelta, RequestOpened
from agenthost.messages.state import RequestKind
from agenthost.providers import CodexProvider
from agenthost.providers.codex import APPROVAL_POLICIES, SANDBOXES
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.providers.codex.harness import Standin, texts

WAIT_S = 10.0


@pytest.fixture
def standin(tmp_path: Path) -> Standin:
    return Standin(tmp_path)


@pytest.fixture
def start(db_path: Path, clock: FakeClock) -> Iterator[Callable[[CodexProvider], Host]]:
    hosts: list[Host] = []

    def start_host(provider: CodexProvider) -> Host:
        host = Host.start(store=SqliteStore(db_path), providers={"codex": provider}, clock=clock)
        hosts.append(host)
        return host

    yield start_host
    for host in hosts:
        host.stop()


def next_of(sub: Subscription, kind: type) -> Any:
    while not isinstance(event := sub.next(WAIT_S), kind):
        pass
    return event


def turns_of(chat: Chat) -> list[tuple[str, str, TurnState]]:
    return [(t.user_text, t.assistant_text, t.state) for t in chat.state().turns]


def test_a_turn_through_the_host_completes_and_its_reply_is_stored(
    start: Callable[[CodexProvider], Host], standin: Standin
) -> None:
    provider = standin.provider()
    host = start(provider)
    session = host.create_session(provider="codex")
    chat = session.chat()
    outcome = chat.send("hi").result(timeout=WAIT_S)
    assert outcome.state is OutcomeState.COMPLETE
    assert outcome.text == "echo: hi"
    host.stop()

    again = start(provider).open_session(session.id).chat()  # from the store; codex resumes
    assert turns_of(again) == [("hi", "echo: hi", TurnState.COMPLETE)]
    [started] = standin.received("turn/start")
    assert standin.received("thread/resume") == [{"threadId": started["threadId"]}]


def test_a_restarted_host_resumes_the_thread_stored_with_the_chat(
    start: Callable[[CodexProvider], Host], standin: Standin
) -> None:
    """A new provider, a new host: the codex thread id lives with the chat in the
    store, not in the provider (a user kept it in a mapping of their own before)."""
    host = start(standin.provider())
    session = host.create_session(provider="codex")
    assert session.chat().send("hi").result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    host.stop()
    again = start(standin.provider())
    chat = again.open_session(session.id).chat()
    assert chat.send("again").result(timeout=WAIT_S).text == "echo: again"
    again.stop()
    [first, second] = standin.received("turn/start")
    assert standin.received("thread/resume") == [{"threadId": first["threadId"]}]
    assert second["threadId"] == first["threadId"]


def test_steering_through_the_host_is_recorded_inside_the_running_turn(
    start: Callable[[CodexProvider], Host], standin: Standin
) -> None:
    standin.on("first", {"say": "a"}, {"wait": "turn/steer"}, {"say": "b"})
    chat = start(standin.provider()).create_session(provider="codex").chat()
    sub = chat.subscribe()
    first = chat.send("first")
    next_of(sub, AssistantDelta)  # the turn runs
    chat.steer("and this")
    outcome = first.result(timeout=WAIT_S)
    assert outcome.state is OutcomeState.COMPLETE
    [turn] = chat.state().turns
    assert (turn.user_text, turn.assistant_text) == ("first", "ab")
    assert [m.text for m in turn.steering] == ["and this"]
    assert chat.state().pending == ()
    assert texts(standin.received("turn/start")) == ["first"]
    assert texts(standin.received("turn/steer")) == ["and this"]


def test_a_permission_request_through_the_host_is_answered_by_the_user(
    start: Callable[[CodexProvider], Host], standin: Standin
) -> None:
    standin.on("run ls", {"approval": "ls"}, {"say": "listed"})
    chat = start(standin.provider()).create_session(provider="codex").chat()
    sub = chat.subscribe()
    turn = chat.send("run ls")
    opened = next_of(sub, RequestOpened)
    assert opened.request.kind is RequestKind.PERMISSION
    assert opened.request.tool_name == "shell"
    chat.answer(opened.request.request_id, approved=True)
    outcome = turn.result(timeout=WAIT_S)
    assert (outcome.state, outcome.text) == (OutcomeState.COMPLETE, "listed")
    assert standin.approvals() == ["accept"]


def test_a_cli_crash_mid_turn_abandons_the_turn_and_the_restarted_cli_resumes_the_thread(
    start: Callable[[CodexProvider], Host], standin: Standin
) -> None:
    standin.on("crash", {"say": "a"}, {"crash": True})
    chat = start(standin.provider()).create_session(provider="codex").chat()
    crashed = chat.send("crash").result(timeout=WAIT_S)
    assert crashed.state is OutcomeState.ERROR
    assert crashed.error is not None and crashed.error.code is ErrorCode.EXECUTION_ABANDONED
    after = chat.send("after").result(timeout=WAIT_S)
    assert (after.state, after.text) == (OutcomeState.COMPLETE, "echo: after")
    assert len(standin.startups()) == 2, "the supervisor started a new CLI"
    [first, second] = standin.received("turn/start")
    assert standin.received("thread/resume") == [{"threadId": first["threadId"]}]
    assert second["threadId"] == first["threadId"]


def test_no_prompt_ever_carries_an_earlier_user_message(
    start: Callable[[CodexProvider], Host], standin: Standin
) -> None:
    # Errored and cancelled turns leave the stored history ending in a user
    # message; codex keeps the conversation, so each turn sends its own text only.
    standin.on("second fails", {"say": "x"}, {"fail": "model error"})
    standin.on("third is cancelled", {"say": "y"}, {"wait": "never"})
    chat = start(standin.provider()).create_session(provider="codex").chat()
    sub = chat.subscribe()
    assert chat.send("first").result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    failed = chat.send("second fails").result(timeout=WAIT_S)
    assert failed.state is OutcomeState.ERROR
    assert failed.error is not None and failed.error.message == "model error"
    third = chat.send("third is cancelled")
    while next_of(sub, AssistantDelta).text != "y":  # the third turn runs
        pass
    chat.cancel()
    assert third.result(timeout=WAIT_S).state is OutcomeState.CANCELLED
    assert chat.send("fourth").result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    assert chat.send("fifth").result(timeout=WAIT_S).text == "echo: fifth"

    prompts = texts(standin.received("turn/start"))
    assert prompts == ["first", "second fails", "third is cancelled", "fourth", "fifth"]
    for later, prompt in enumerate(prompts):
        assert not any(earlier in prompt for earlier in prompts[:later])


NO_LONGER = 'approval_policy = "untrusted" is no longer supported; remove this setting'


def test_a_cli_that_cannot_start_says_why_in_the_turn_s_error_and_the_log(
    db_path: Path, clock: FakeClock, standin: Standin
) -> None:
    """codex 0.163 exits at initialize on a setting it no longer takes: the error a
    user sees carries the CLI's own words, not only a count of restarts."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    standin.script["exit_at_initialize"] = NO_LONGER
    host = Host.start(
        store=SqliteStore(db_path),
        providers={"codex": standin.provider()},
        clock=clock,
        restart_policy=RestartPolicy(intensity=0),
    )
    try:
        with structlog.testing.capture_logs() as logs:
            chat = host.create_session(provider="codex").chat()
            outcome = chat.send("hi").result(timeout=WAIT_S)
        assert outcome.state is OutcomeState.ERROR
        assert outcome.error is not None
        assert outcome.error.code is ErrorCode.PROVIDER_UNAVAILABLE
        assert NO_LONGER in outcome.error.message
        assert "status 1" in outcome.error.message
        assert "PATH aliases" not in outcome.error.message  # its noise is left out
        [unavailable] = [e for e in logs if e["event"] == "provider_marked_unavailable"]
        assert NO_LONGER in unavailable["error"]
    finally:
        host.stop()


def test_approval_policy_and_sandbox_go_with_thread_start_and_thread_resume(
    start: Callable[[CodexProvider], Host], standin: Standin
) -> None:
    provider = standin.provider(approval_policy="never", sandbox="workspace-write")
    host = start(provider)
    session = host.create_session(provider="codex")
    assert session.chat().send("hi").result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    host.stop()
    again = start(standin.provider(approval_policy="never", sandbox="workspace-write"))
    again.open_session(session.id).chat().send("again").result(timeout=WAIT_S)
    again.stop()
    [started] = standin.received("thread/start")
    [resumed] = standin.received("thread/resume")
    for params in (started, resumed):
        assert params["approvalPolicy"] == "never"
        assert params["sandbox"] == "workspace-write"


@pytest.mark.parametrize(
    ("option", "value"),
    [("approval_policy", "on-failure"), ("approval_policy", "always"), ("sandbox", "none")],
)
def test_an_approval_policy_or_sandbox_codex_does_not_take_is_refused(
    standin: Standin, option: str, value: str
) -> None:
    with pytest.raises(AgentHostError) as refused:
        standin.provider(**{option: value})
    assert refused.value.code is ErrorCode.INVALID_ARGUMENT
    accepted = APPROVAL_POLICIES if option == "approval_policy" else SANDBOXES
    assert refused.value.message == (
        f"codex: {option} must be one of {', '.join(accepted)} (got {value!r})"
    )
