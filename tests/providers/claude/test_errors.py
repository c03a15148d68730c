"""Errors end turns in the Claude CLI's own words (DESIGN.md, "Errors end turns"):
a model API that fails (the CLI retries, saying so, then gives up) and a CLI
that cannot start, against the stand-in CLI through the real SDK."""

import logging
from pathlib import Path

import pytest
import structlog

pytest.importorskip("claude_agent_sdk")

from agenthost.actors import Host
from agenthost.actors.supervisor import RestartPolicy
from agenthost.messages import ErrorCode, OutcomeState
from agenthost.providers.base import ProviderCallError, ProviderCrashed
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.providers.claude.standin import WAIT_S, Events, StandIn, run, send

INVALID = "fatal: invalid setting permissions.defaultMode: 'sometimes' is not a mode"


@pytest.fixture
def standin(tmp_path: Path) -> StandIn:
    return StandIn(tmp_path)


def test_each_api_retry_is_logged_at_warning_with_the_ids_and_without_the_prompt(
    standin: StandIn,
) -> None:
    standin.script(
        {
            "a secret prompt": [
                {"retry": {"error_status": 529, "error": "overloaded_error"}},
                {"retry": {"error_status": 529, "error": "overloaded_error"}},
                {"say": ["fine"]},
            ]
        }
    )
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))

    async def scenario() -> str | None:
        adapter = standin.provider().open_session("s1", "c1", Events())
        await adapter.start()
        try:
            return await adapter.send(send("t1", "a secret prompt"))
        finally:
            await adapter.dispose()

    with structlog.testing.capture_logs() as logs:
        run(scenario)
    retries = [e for e in logs if e["event"] == "claude_api_retrying"]
    assert [(e["attempt"], e["error_status"], e["log_level"]) for e in retries] == [
        (1, 529, "warning"),
        (2, 529, "warning"),
    ]
    assert all(e["session_id"] == "s1" and e["chat_id"] == "c1" for e in retries)
    assert all(e["turn_id"] == "t1" for e in retries)
    assert "a secret prompt" not in repr(logs)


def test_an_api_that_gives_up_fails_the_call_with_the_clis_words(standin: StandIn) -> None:
    standin.script({"go": [{"retry": {"error_status": 500}}, {"api_error": "500 the API is down"}]})

    async def scenario() -> ProviderCallError:
        adapter = standin.provider().open_session("s1", "c1", Events())
        await adapter.start()
        try:
            with pytest.raises(ProviderCallError) as failed:
                await adapter.send(send("t1", "go"))
            return failed.value
        finally:
            await adapter.dispose()

    error = run(scenario)
    assert error.taken is True
    assert error.error.message == "API Error: 500 the API is down"


def test_the_clis_stand_in_reply_for_a_failed_api_is_no_reply(
    standin: StandIn, db_path: Path
) -> None:
    standin.script({"go": [{"api_error": "Connection error."}]})
    host = Host.start(
        store=SqliteStore(db_path), providers={"claude": standin.provider()}, clock=FakeClock()
    )
    try:
        outcome = host.create_session(provider="claude").chat().send("go").result(timeout=WAIT_S)
    finally:
        host.stop()
    assert outcome.state is OutcomeState.ERROR
    assert outcome.error is not None and outcome.error.message == "API Error: Connection error."
    assert outcome.text == ""


def test_a_cli_that_cannot_start_says_why_in_its_own_words(standin: StandIn) -> None:
    standin.script(exit_at_start={"code": 3, "stderr": INVALID})
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))

    async def scenario() -> ProviderCrashed:
        adapter = standin.provider().open_session("s1", "c1", Events())
        try:
            with pytest.raises(ProviderCrashed) as failed:
                await adapter.start()
            return failed.value
        finally:
            await adapter.dispose()

    with structlog.testing.capture_logs() as logs:
        crashed = run(scenario)
    assert INVALID in crashed.error.message
    assert "exit code 3" in crashed.error.message
    assert "Check stderr output for details" not in crashed.error.message
    [failed] = [e for e in logs if e["event"] == "claude_cli_start_failed"]
    assert INVALID in failed["error"] and failed["log_level"] == "warning"


def test_a_host_whose_claude_cli_cannot_start_ends_the_turn_with_its_words(
    standin: StandIn, db_path: Path
) -> None:
    standin.script(exit_at_start={"code": 3, "stderr": INVALID})
    host = Host.start(
        store=SqliteStore(db_path),
        providers={"claude": standin.provider()},
        clock=FakeClock(),
        restart_policy=RestartPolicy(intensity=0),
    )
    try:
        outcome = host.create_session(provider="claude").chat().send("hi").result(timeout=WAIT_S)
    finally:
        host.stop()
    assert outcome.state is OutcomeState.ERROR
    assert outcome.error is not None and outcome.error.code is ErrorCode.PROVIDER_UNAVAILABLE
    assert INVALID in outcome.error.message
