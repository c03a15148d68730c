"""The Copilot adapter over the real SDK, against the stand-in CLI (no actors)."""

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from agenthost.messages import AgentHostError, ErrorCode
from agenthost.messages.fields import Json
from agenthost.messages.inputs import AnswerState, AnswerValue, AnswerValueKind, InputAnswer
from agenthost.messages.provider import (
    CallSettled,
    ConnectionFailed,
    HostRequestKind,
    HostRequestOpened,
    Idle,
    ProviderAnswer,
    ProviderCancel,
    ProviderResume,
    ProviderSteer,
    ProviderWithdraw,
    ReplyDelta,
    ReplyMessage,
    ReplyReasoning,
    Settlement,
    ToolCallCompleted,
    ToolCallStarted,
    UserMessageEcho,
)
from agenthost.messages.state import ClientTool
from agenthost.providers.base import (
    ProviderCallError,
    ProviderCrashed,
    ProviderResumeError,
    RetryPolicy,
    resume_with_retry,
)
from agenthost.providers.copilot import CopilotProvider
from tests.providers.copilot.conftest import STANDIN, WAIT_S, Driver, StandIn
from tests.providers.processes import guarded, wait_gone

Drive = Callable[..., Driver]
NOT_FOUND = (
    "Request session.resume failed with message: Failed to load session events: "
    "Session not found: 00000000-0000-4000-8000-000000000000"
)
OFFLINE = (
    "Request session.resume failed with message: Authentication failed: Failed to validate "
    "SDK token: network fetch failed: request failed: error sending request for url "
    "(https://api.github.com/copilot_internal/user)"
)


def steer(driver: Driver, text: str, pending_id: str = "p1") -> str:
    message = ProviderSteer(
        session_id="s1", chat_id="c1", turn_id="t1", pending_id=pending_id, text=text
    )
    message_id = driver.call(driver.adapter.steer(message))
    assert message_id is not None
    return message_id


def answer(driver: Driver, request_id: str, **reply: object) -> None:
    message = ProviderAnswer(session_id="s1", chat_id="c1", request_id=request_id, **reply)  # type: ignore[arg-type]
    driver.call(driver.adapter.answer(message))


def after(driver: Driver, kind: type) -> list:
    return [e for e in driver.seen if isinstance(e, kind)]


# -- a turn ---------------------------------------------------------------------------------


def test_a_turn_is_echoed_streamed_and_ends_with_a_final_message_then_idle(drive: Drive) -> None:
    driver = drive()
    message_id = driver.send("hi")
    driver.wait_for(Idle)
    assert driver.seen == [
        UserMessageEcho(turn_id="t1", text="hi", provider_message_id=message_id),
        ReplyDelta(turn_id="t1", text="echo: "),
        ReplyDelta(turn_id="t1", text="hi"),
        ReplyMessage(turn_id="t1", text="echo: hi", finish_reason="stop"),
        Idle(turn_id="t1"),
    ]
    [sent] = driver.standin.requests("session.send")
    assert sent["prompt"] == "hi" and "mode" not in sent


def test_a_session_error_fails_the_turn_with_the_providers_own_message(drive: Drive) -> None:
    driver = drive({"replies": {"hi": [{"error": "model overloaded"}]}})
    driver.send("hi")
    settled = driver.wait_for(CallSettled)
    assert settled.settlement is Settlement.REJECTED
    assert settled.error == AgentHostError(
        code=ErrorCode.PROVIDER_ERROR, message="model overloaded"
    )


def test_a_multi_turn_conversation_never_resends_an_earlier_user_message(drive: Drive) -> None:
    driver = drive()
    questions = ["first question", "second question", "third question"]
    for n, question in enumerate(questions):
        driver.send(question, turn_id=f"t{n}")
        reply = driver.wait_for(ReplyMessage)
        assert reply.text == f"echo: {question}"
        driver.wait_for(Idle)
    assert driver.standin.prompts() == questions


# -- steering and withdraw ----------------------------------------------------------------------


def test_steering_goes_in_immediate_mode_and_its_echo_starts_its_own_turn(drive: Drive) -> None:
    script = {
        "replies": {"work": [{"say": "a"}, {"until": "steer"}, {"tool": "grep"}, {"say": "b"}]}
    }
    driver = drive(script)
    driver.send("work")
    driver.wait_for(ReplyDelta)
    message_id = steer(driver, "focus")
    echo = driver.wait_for(UserMessageEcho, lambda e: e.text == "focus")
    # The run goes on under its key; the host starts the steering message's turn on it.
    assert echo == UserMessageEcho(
        turn_id="t1", text="focus", provider_message_id=message_id, starts_turn=True
    )
    assert driver.wait_for(ReplyDelta) == ReplyDelta(turn_id="t1", text="b")
    assert driver.wait_for(Idle) == Idle(turn_id="t1")
    assert driver.standin.requests("session.send")[-1] == {
        "sessionId": driver.adapter.copilot_session_id,
        "prompt": "focus",
        "mode": "immediate",
    }


def test_steering_while_nothing_runs_opens_a_run_under_its_pending_id(drive: Drive) -> None:
    driver = drive()
    message_id = steer(driver, "late", pending_id="p9")
    assert driver.wait_for(UserMessageEcho) == UserMessageEcho(
        turn_id="p9", text="late", provider_message_id=message_id, starts_turn=True
    )
    assert driver.wait_for(Idle) == Idle(turn_id="p9")


def test_steering_withdrawn_before_the_model_read_it_is_removed_and_never_echoed(
    drive: Drive,
) -> None:
    driver = drive({"replies": {"work": [{"say": "a"}, {"until": "withdraw"}, {"say": "b"}]}})
    driver.send("work")
    driver.wait_for(ReplyDelta)
    message_id = steer(driver, "never mind")
    withdraw = ProviderWithdraw(
        session_id="s1",
        chat_id="c1",
        pending_id="p1",
        provider_message_id=message_id,
        text="never mind",
    )
    assert driver.call(driver.adapter.withdraw(withdraw)) is True
    driver.wait_for(Idle)
    assert [e.text for e in after(driver, UserMessageEcho)] == ["work"]
    assert driver.standin.requests("session.queue.withdrawMessage") == [
        {
            "sessionId": driver.adapter.copilot_session_id,
            "messageId": message_id,
            "expectedPrompt": "never mind",
        }
    ]


def test_steering_the_model_already_read_is_not_removed_and_keeps_its_turn(
    drive: Drive,
) -> None:
    script = {
        "replies": {
            "work": [{"until": "steer"}, {"tool": "grep"}, {"until": "withdraw"}, {"say": "b"}]
        }
    }
    driver = drive(script)
    driver.send("work")
    driver.wait_for(UserMessageEcho)
    message_id = steer(driver, "too late")
    driver.wait_for(UserMessageEcho, lambda e: e.text == "too late")
    withdraw = ProviderWithdraw(
        session_id="s1",
        chat_id="c1",
        pending_id="p1",
        provider_message_id=message_id,
        text="too late",
    )
    assert driver.call(driver.adapter.withdraw(withdraw)) is False
    assert driver.wait_for(ReplyMessage) == ReplyMessage(
        turn_id="t1", text="b", finish_reason="stop"
    )
    driver.wait_for(Idle)


# -- cancel -------------------------------------------------------------------------------------


def test_cancel_aborts_the_run_and_the_session_takes_the_next_turn(drive: Drive) -> None:
    driver = drive({"replies": {"long": [{"say": "a"}, {"until": "abort"}, {"say": "never"}]}})
    driver.send("long")
    driver.wait_for(ReplyDelta)
    driver.call(driver.adapter.cancel(ProviderCancel(session_id="s1", chat_id="c1", turn_id="t1")))
    assert driver.wait_for(Idle) == Idle(turn_id="t1")
    assert len(driver.standin.requests("session.abort")) == 1
    assert not any(e.text == "never" for e in after(driver, ReplyDelta))
    driver.send("after", turn_id="t2")
    assert driver.wait_for(ReplyMessage).text == "echo: after"


def test_a_message_the_cli_drops_with_an_aborted_run_ends_its_turn(drive: Drive) -> None:
    """Sent while an abort unwinds (the abort's idle took longer than rpc_timeout),
    the message is queued behind the aborted run and dropped with it, never echoed:
    its turn ends with the CLI's reason instead of waiting forever."""
    long = [{"say": "a"}, {"until": "abort"}]
    driver = drive({"replies": {"long": long}, "abort_lag": 1.0}, rpc_timeout=0.2)
    driver.send("long")
    driver.wait_for(ReplyDelta)
    driver.call(driver.adapter.cancel(ProviderCancel(session_id="s1", chat_id="c1", turn_id="t1")))
    driver.send("after", turn_id="t2")
    assert driver.wait_for(Idle) == Idle(turn_id="t1")
    settled = driver.wait_for(CallSettled)
    assert (settled.turn_id, settled.settlement) == ("t2", Settlement.REJECTED)
    assert settled.error is not None
    assert "dropped the message with the aborted run" in settled.error.message


# -- host requests ------------------------------------------------------------------------------


@pytest.mark.parametrize(("approved", "decision"), [(True, "approve-once"), (False, "reject")])
def test_a_permission_request_waits_for_the_host_and_carries_its_decision(
    drive: Drive, approved: bool, decision: str
) -> None:
    driver = drive({"replies": {"risky": [{"tool": "rm -rf build", "permission": True}]}})
    driver.send("risky")
    started = driver.wait_for(ToolCallStarted)
    assert started.needs_permission and started.name == "rm -rf build"
    request = driver.wait_for(HostRequestOpened)
    assert request.kind is HostRequestKind.PERMISSION
    assert request.tool_call_id == started.tool_call_id
    answer(driver, request.request_id, approved=approved)
    completed = driver.wait_for(ToolCallCompleted)
    assert (completed.tool_call_id, completed.success) == (started.tool_call_id, approved)
    driver.wait_for(Idle)
    [sent] = driver.standin.requests("session.permissions.handlePendingPermissionRequest")
    assert sent["result"]["kind"] == decision


def test_a_denials_words_reach_the_cli_as_its_feedback(drive: Drive) -> None:
    driver = drive({"replies": {"risky": [{"tool": "rm -rf build", "permission": True}]}})
    driver.send("risky")
    request = driver.wait_for(HostRequestOpened)
    answer(driver, request.request_id, approved=False, reason="denied", reason_message="not now")
    driver.wait_for(Idle)
    [sent] = driver.standin.requests("session.permissions.handlePendingPermissionRequest")
    assert (sent["result"]["kind"], sent["result"]["feedback"]) == ("reject", "not now")


def test_an_external_tool_call_is_a_client_tool_request_answered_with_its_result(
    drive: Drive,
) -> None:
    script = {"replies": {"look": [{"client_tool": "lookup", "arguments": {"q": "x"}}]}}
    driver = drive(script, client_tools=(ClientTool(name="lookup", description="find"),))
    driver.send("look")
    request = driver.wait_for(HostRequestOpened)
    assert request.kind is HostRequestKind.CLIENT_TOOL
    assert (request.tool_name, request.arguments) == ("lookup", '{"q": "x"}')
    [started] = after(driver, ToolCallStarted)
    assert (started.tool_call_id, started.name) == (request.tool_call_id, "lookup")
    answer(driver, request.request_id, result="42")
    completed = driver.wait_for(ToolCallCompleted)
    assert (completed.result, completed.success) == ("42", True)
    driver.wait_for(Idle)
    [created] = driver.standin.requests("session.create")
    assert [tool["name"] for tool in created["tools"]] == ["lookup"]
    [sent] = driver.standin.requests("session.tools.handlePendingToolCall")
    assert sent["result"]["textResultForLlm"] == "42"


def test_a_question_to_the_user_is_a_user_input_request_answered_by_the_host(
    drive: Drive,
) -> None:
    driver = drive({"replies": {"plan": [{"ask": "which branch?"}]}})
    driver.send("plan")
    request = driver.wait_for(HostRequestOpened)
    assert (request.kind, request.question) == (HostRequestKind.USER_INPUT, "which branch?")
    answer(driver, request.request_id, answer="main")
    assert driver.wait_for(ReplyMessage).text == "you said main"
    assert driver.standin.requests("response") == [{"answer": "main", "wasFreeform": True}]


def test_a_permission_offers_the_decisions_the_cli_takes(drive: Drive) -> None:
    script = {"replies": {"risky": [{"tool": "make", "permission": True}]}}
    driver = drive(script)
    driver.send("risky")
    request = driver.wait_for(HostRequestOpened)
    assert [(o.id, o.kind) for o in request.options] == [
        ("approve-once", "approve"),
        ("reject", "deny"),
    ]
    answer(driver, request.request_id, approved=True, option="approve-once")
    driver.wait_for(Idle)


def test_approve_for_this_session_is_offered_where_the_cli_can_remember_it(
    drive: Drive,
) -> None:
    script = {
        "replies": {"risky": [{"tool": "make", "permission": True, "session_approval": True}]}
    }
    driver = drive(script)
    driver.send("risky")
    request = driver.wait_for(HostRequestOpened)
    assert [o.id for o in request.options] == ["approve-once", "approve-for-session", "reject"]
    answer(driver, request.request_id, approved=True, option="approve-for-session")
    driver.wait_for(Idle)
    [sent] = driver.standin.requests("session.permissions.handlePendingPermissionRequest")
    assert sent["result"] == {
        "kind": "approve-for-session",
        "approval": {"kind": "commands", "commandIdentifiers": ["make"]},
    }


def test_a_question_with_choices_is_a_select_question_answered_by_a_choice(
    drive: Drive,
) -> None:
    script = {
        "replies": {"plan": [{"ask": "which?", "choices": ["main", "dev"], "freeform": False}]}
    }
    driver = drive(script)
    driver.send("plan")
    request = driver.wait_for(HostRequestOpened)
    [question] = request.questions
    assert [o.label for o in question.options or ()] == ["main", "dev"]
    assert question.allow_freeform_input is False
    selected = InputAnswer(
        state=AnswerState.SUBMITTED,
        value=AnswerValue(kind=AnswerValueKind.SELECTED, value=Json.of("c2")),
    )
    answer(
        driver, request.request_id, approved=True, answer="dev", answers=((question.id, selected),)
    )
    assert driver.wait_for(ReplyMessage).text == "you said dev"
    assert driver.standin.requests("response") == [{"answer": "dev", "wasFreeform": False}]


def test_a_declined_question_is_an_error_to_the_cli(drive: Drive) -> None:
    driver = drive({"replies": {"plan": [{"ask": "which?"}]}})
    driver.send("plan")
    request = driver.wait_for(HostRequestOpened)
    answer(driver, request.request_id, approved=False, error="The user declined to answer.")
    driver.wait_for(Idle)
    [response] = driver.standin.requests("response")
    assert response["error"]["message"] == "The user declined to answer."


@pytest.mark.parametrize("streamed", [True, False])
def test_the_models_reasoning_is_reported_once_whether_or_not_it_streamed(
    drive: Drive, streamed: bool
) -> None:
    script = {"replies": {"why": [{"think": "Because.", "streamed": streamed}, {"say": "so"}]}}
    driver = drive(script)
    driver.send("why")
    driver.wait_for(Idle)
    assert [(e.turn_id, e.text) for e in after(driver, ReplyReasoning)] == [("t1", "Because.")]


# -- resume -------------------------------------------------------------------------------------

RESUME = ProviderResume(session_id="s1", chat_id="c1")


def test_a_new_session_reports_its_id_as_the_chat_s_reference(drive: Drive) -> None:
    driver = drive()
    [created] = driver.standin.requests("session.create")
    assert driver.refs == [created["sessionId"]]


def test_resume_reopens_the_session_whose_reference_it_is_given(drive: Drive) -> None:
    driver = drive(start=False)
    stored = "5d9a4f52-0000-4000-8000-00000000c0de"
    driver.call(driver.adapter.resume(attrs.evolve(RESUME, provider_ref=stored)))
    [resumed] = driver.standin.requests("session.resume")
    assert resumed["sessionId"] == stored
    assert driver.refs == [stored]
    driver.send("hi")
    driver.wait_for(Idle)


def test_resume_without_a_stored_reference_reopens_the_derived_session(drive: Drive) -> None:
    driver = drive(start=False)
    driver.call(driver.adapter.resume(RESUME))
    [resumed] = driver.standin.requests("session.resume")
    assert resumed["sessionId"] == driver.adapter.copilot_session_id


BYOK_KEY = "sk-byok-do-not-leak-42"


def test_byok_is_the_sdks_provider_option_on_create_and_on_resume(
    drive: Drive, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_BYOK_KEY", BYOK_KEY)
    byok = {
        "type": "anthropic",
        "base_url": "http://127.0.0.1:9/anthropic",
        "api_key_env": "TEST_BYOK_KEY",
        "wire_model": "claude-fake",
    }
    driver = drive(byok=byok)
    wire = {
        "type": "anthropic",
        "baseUrl": "http://127.0.0.1:9/anthropic",
        "apiKey": BYOK_KEY,
        "wireModel": "claude-fake",
    }
    [created] = driver.standin.requests("session.create")
    assert created["provider"] == wire
    driver.call(driver.adapter.resume(RESUME))
    [resumed] = driver.standin.requests("session.resume")
    assert resumed["provider"] == wire
    assert BYOK_KEY not in repr(driver.standin.provider)


def test_without_byok_no_provider_option_is_sent(drive: Drive) -> None:
    driver = drive()
    [created] = driver.standin.requests("session.create")
    assert "provider" not in created


@pytest.mark.parametrize(
    ("byok", "says"),
    [
        ({"type": "gemini", "base_url": "http://x"}, "'type' must be one of"),
        ({"type": "openai", "base_url": "ftp://x"}, "'base_url' must be"),
        (
            {"type": "openai", "base_url": "http://x", "api_key": BYOK_KEY, "api_key_env": "K"},
            "not both",
        ),
        (
            {"type": "openai", "base_url": "http://x", "api_key_env": "UNSET_BYOK_VARIABLE"},
            "not set",
        ),
        ({"type": "openai", "base_url": "http://x", "apikey": BYOK_KEY}, "unknown key 'apikey'"),
    ],
)
def test_a_bad_byok_is_refused_naming_the_key_never_the_value(
    byok: dict[str, str], says: str
) -> None:
    with pytest.raises(AgentHostError) as refused:
        CopilotProvider(cli_path=STANDIN, byok=byok)
    assert refused.value.code is ErrorCode.INVALID_ARGUMENT
    assert says in refused.value.message
    assert BYOK_KEY not in refused.value.message


def test_resume_of_an_unknown_session_reports_no_history_and_opens_a_fresh_one(
    drive: Drive,
) -> None:
    driver = drive({"resume": {"code": -32603, "message": NOT_FOUND}}, start=False)
    with pytest.raises(ProviderResumeError) as failed:
        driver.call(driver.adapter.resume(RESUME))
    assert failed.value.no_history is True
    assert failed.value.code == -32603
    [created] = driver.standin.requests("session.create")
    assert created["sessionId"] == driver.adapter.copilot_session_id
    driver.send("hi")
    assert driver.wait_for(ReplyMessage).text == "echo: hi"


def test_a_transient_resume_error_is_retried_then_propagates(drive: Drive) -> None:
    driver = drive({"resume": {"code": -32603, "message": OFFLINE}}, start=False)

    async def no_wait(_: float) -> None:
        return None

    policy = RetryPolicy(attempts=3, sleep=no_wait)
    with pytest.raises(ProviderResumeError) as failed:
        driver.call(resume_with_retry(driver.adapter, RESUME, policy))
    assert failed.value.no_history is False
    assert "network fetch failed" in failed.value.message
    assert len(driver.standin.requests("session.resume")) == 3
    assert driver.standin.requests("session.create") == []


# -- failure ------------------------------------------------------------------------------------


def test_a_cli_that_crashes_mid_turn_fails_the_connection(drive: Drive) -> None:
    driver = drive({"replies": {"boom": [{"say": "a"}, {"crash": True}]}})
    driver.send("boom")
    failed = driver.wait_for(ConnectionFailed)
    assert failed.error.code is ErrorCode.PROVIDER_CRASHED
    assert "exited" in failed.error.message
    with pytest.raises(ProviderCrashed):
        driver.send("again", turn_id="t2")


def test_a_hung_cli_fails_the_connection_after_repeated_timeouts(drive: Drive) -> None:
    driver = drive(
        {"replies": {"stall": [{"say": "a"}, {"hang": True}]}}, rpc_timeout=1.0, max_timeouts=2
    )
    driver.send("stall")
    failed = driver.wait_for(ConnectionFailed)
    with pytest.raises(ProviderCrashed):
        driver.send("again", turn_id="t2")
    assert "stopped answering" in failed.error.message
    assert driver.adapter.turn_diagnostic_snapshot("t1")["timeouts"] == 2


def test_a_call_that_times_out_fails_and_the_next_timeout_fails_the_connection(
    drive: Drive,
) -> None:
    script = {"replies": {"stall": [{"hang": True}]}}
    driver = drive(script, rpc_timeout=1.0, max_timeouts=2, heartbeat_s=3600)
    driver.send("stall")
    with pytest.raises(ProviderCallError, match=r"session\.send timed out") as timed_out:
        driver.send("second", turn_id="t2")
    assert timed_out.value.taken is False
    with pytest.raises(ProviderCrashed, match="stopped answering"):
        driver.send("third", turn_id="t3")


def test_a_cli_that_exits_at_start_fails_the_connection_with_its_own_words(
    drive: Drive,
) -> None:
    driver = drive({"exit_at_start": True}, start=False)
    with pytest.raises(ProviderCrashed, match="told to exit at start"):
        driver.call(driver.adapter.start())


def test_a_missing_cli_is_a_clear_error_naming_cli_path(tmp_path: Path) -> None:
    with pytest.raises(AgentHostError) as missing:
        CopilotProvider(cli_path=tmp_path / "no-copilot")
    assert missing.value.code is ErrorCode.PROVIDER_UNAVAILABLE
    assert "cli_path=" in missing.value.message
    with pytest.raises(AgentHostError, match="cli_path="):
        CopilotProvider()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux's")
def test_the_cli_runs_in_its_own_session_without_a_terminal_and_dies_with_a_killed_host(
    tmp_path: Path,
) -> None:
    standin = StandIn(tmp_path, {"outlive_stdin": True})
    script = tmp_path / "script.json"
    host = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("copilot_host.py")),
            str(STANDIN),
            str(script),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "COPILOT_SKIP_CLI_DOWNLOAD": "1"},
        text=True,
    )
    cli = None
    try:
        assert host.stdout is not None
        assert host.stdout.readline().strip() == "ready"
        [cli] = standin.requests("$process")
        assert guarded(cli), "it runs in the guard's own session and group"
        assert cli["tty"] is False
        os.kill(host.pid, signal.SIGKILL)
        assert wait_gone(cli["pid"]), "the CLI outlived its host"
    finally:
        host.kill()
        host.wait(timeout=WAIT_S)
        if cli is not None and not wait_gone(cli["pid"]):
            os.kill(cli["pid"], signal.SIGKILL)
