"""Codex's own errors end turns in its words (DESIGN.md, "Errors end turns"):
the `error` notifications codex sends while its model API fails or its
network is gone, against the stand-in CLI through the real SDK."""

import logging
from pathlib import Path

import pytest
import structlog

from agenthost.actors import Host
from agenthost.messages import ErrorCode, OutcomeState
from agenthost.messages.provider import CallSettled, Idle, ReplyDelta, Settlement
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.providers.codex.harness import Standin, texts
from tests.providers.codex.test_codex import adapter_of, run, send

NETWORK = "Reconnecting... waiting for network"
DETAILS = "Connection failed: error sending request"


@pytest.fixture
def standin(tmp_path: Path) -> Standin:
    return Standin(tmp_path)


@pytest.fixture
def logs() -> list[dict[str, object]]:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    with structlog.testing.capture_logs() as captured:
        yield captured


def test_each_retry_is_logged_at_warning_and_the_turn_goes_on(
    standin: Standin, logs: list[dict[str, object]]
) -> None:
    standin.on(
        "a secret prompt",
        {"retry": "Reconnecting... 1/5", "details": "high demand"},
        {"retry": "Reconnecting... 2/5"},
        {"say": "fine"},
    )

    async def scenario() -> None:
        async with adapter_of(standin.provider()) as (adapter, events):
            await adapter.send(send("t1", "a secret prompt"))
            await events.wait_kind(Idle)
            assert not events.of(CallSettled)

    run(scenario())
    retries = [e for e in logs if e["event"] == "codex_retrying"]
    assert [(e["attempt"], e["error"], e["log_level"]) for e in retries] == [
        (1, "Reconnecting... 1/5 (high demand)", "warning"),
        (2, "Reconnecting... 2/5", "warning"),
    ]
    assert all(e["session_id"] == "s1" and e["turn_id"] == "t1" for e in retries)
    assert "a secret prompt" not in repr(logs)


def test_an_error_codex_will_not_retry_ends_the_turn_in_its_words_with_no_completion_to_follow(
    standin: Standin, logs: list[dict[str, object]]
) -> None:
    standin.on("go", {"say": "half"}, {"retry": NETWORK}, {"give_up": "stream disconnected"})

    async def scenario() -> None:
        async with adapter_of(standin.provider()) as (adapter, events):
            await adapter.send(send("t1", "go"))
            settled = await events.wait_kind(CallSettled)
            assert settled.settlement is Settlement.REJECTED
            assert settled.error is not None
            assert settled.error.code is ErrorCode.PROVIDER_ERROR
            assert settled.error.message == "stream disconnected"
            await adapter.send(send("t2", "next"))  # not held up by the turn that failed
            await events.wait_for(lambda seen: any(isinstance(e, Idle) for e in seen))
            assert [e.turn_id for e in events.of(Idle)] == ["t2"]

    run(scenario())
    assert texts(standin.received("turn/start")) == ["go", "next"]
    assert len(standin.received("turn/interrupt")) == 1  # codex may still hold the turn
    [error] = [e for e in logs if e["event"] == "codex_turn_error"]
    assert error["log_level"] == "warning" and error["error"] == "stream disconnected"


def test_a_final_error_and_the_failed_completion_after_it_end_the_turn_once(
    standin: Standin,
) -> None:
    standin.on("go", {"give_up": "We are experiencing high demand", "completed": True})

    async def scenario() -> None:
        async with adapter_of(standin.provider()) as (adapter, events):
            await adapter.send(send("t1", "go"))
            await events.wait_kind(CallSettled)
            await adapter.send(send("t2", "next"))
            await events.wait_kind(Idle)
            [settled] = events.of(CallSettled)
            assert settled.error is not None
            assert settled.error.message == "We are experiencing high demand"

    run(scenario())


def test_retries_past_max_retries_end_the_turn_in_codexs_words_and_interrupt_codex(
    standin: Standin,
) -> None:
    standin.on("go", {"retry_forever": NETWORK, "details": DETAILS, "times": 4})

    async def scenario() -> None:
        async with adapter_of(standin.provider(max_retries=2)) as (adapter, events):
            await adapter.send(send("t1", "go"))
            settled = await events.wait_kind(CallSettled)
            assert settled.error is not None
            assert settled.error.message == f"{NETWORK} ({DETAILS}); gave up after 3 attempts"
            await adapter.send(send("t2", "next"))
            await events.wait_kind(Idle)
            assert [e.turn_id for e in events.of(Idle)] == ["t2"]
            assert len(events.of(CallSettled)) == 1

    run(scenario())
    assert len(standin.received("turn/interrupt")) == 1


def test_without_a_bound_codex_retries_as_long_as_it_likes(standin: Standin) -> None:
    standin.on("go", {"retry": NETWORK, "times": 12}, {"say": "back"})

    async def scenario() -> None:
        async with adapter_of(standin.provider(max_retries=None)) as (adapter, events):
            await adapter.send(send("t1", "go"))
            await events.wait_kind(Idle)
            assert [e.text for e in events.of(ReplyDelta)] == ["back"]
            assert not events.of(CallSettled)

    run(scenario())


def test_a_turn_the_network_failed_ends_through_the_host_with_codexs_words(
    standin: Standin, db_path: Path
) -> None:
    standin.on("go", {"retry_forever": NETWORK, "details": DETAILS, "times": 2})
    host = Host.start(
        store=SqliteStore(db_path),
        providers={"codex": standin.provider(max_retries=1)},
        clock=FakeClock(),
    )
    try:
        chat = host.create_session(provider="codex").chat()
        outcome = chat.send("go").result(timeout=10)
        assert outcome.state is OutcomeState.ERROR
        assert outcome.error is not None and outcome.error.code is ErrorCode.PROVIDER_ERROR
        assert NETWORK in outcome.error.message and DETAILS in outcome.error.message
        assert chat.send("again").result(timeout=10).text == "echo: again"
    finally:
        host.stop()
