"""The adapter alone (no actors): the provider protocol it emits for a stream."""

import asyncio
import sys
from collections.abc import Callable

import pytest

from agenthost.messages import AgentHostError, ErrorCode
from agenthost.messages.provider import (
    HistoryMessage,
    Idle,
    ProviderCancel,
    ProviderEvent,
    ProviderSend,
    ReplyDelta,
    ReplyMessage,
    UsageUpdated,
    UserMessageEcho,
)
from agenthost.providers import OpenAICompatProvider, ProviderCallError
from tests.providers.openai.conftest import KEY
from tests.providers.openai.standin import Reply, StandIn

MakeProvider = Callable[..., OpenAICompatProvider]


def send_message(
    text: str = "q", history: tuple[HistoryMessage, ...] = (), instructions: str = ""
) -> ProviderSend:
    return ProviderSend(
        session_id="s",
        chat_id="c",
        turn_id="t1",
        text=text,
        history=history,
        instructions=instructions,
    )


def run_send(provider: OpenAICompatProvider, message: ProviderSend) -> list[ProviderEvent]:
    events: list[ProviderEvent] = []

    async def main() -> None:
        adapter = provider.open_session("s", "c", events.append)
        await adapter.start()
        try:
            await adapter.send(message)
        finally:
            await adapter.dispose()

    asyncio.run(main())
    return events


def test_capabilities_are_those_of_a_stateless_endpoint(openai_provider: MakeProvider) -> None:
    capabilities = openai_provider().capabilities
    assert capabilities.stateful_prompt is False
    assert capabilities.call_settles_with_turn is True
    assert capabilities.can_withdraw_steering is False
    assert capabilities.accepts_steering is False


def test_a_stream_emits_echo_deltas_usage_the_final_message_and_idle(
    openai_provider: MakeProvider, standin: StandIn
) -> None:
    standin.script(Reply(chunks=("a", "b"), usage=(5, 2)))
    events = run_send(openai_provider(), send_message("q"))
    assert events == [
        UserMessageEcho(turn_id="t1", text="q"),
        ReplyDelta(turn_id="t1", text="a"),
        ReplyDelta(turn_id="t1", text="b"),
        UsageUpdated(turn_id="t1", prompt_tokens=5, completion_tokens=2),
        ReplyMessage(turn_id="t1", text="ab", finish_reason="stop"),
        Idle(turn_id="t1"),
    ]


def test_a_stream_without_a_finish_reason_still_flushes_its_final_message(
    openai_provider: MakeProvider, standin: StandIn
) -> None:
    standin.script(Reply(chunks=("x", "y"), finish_reason=None))
    events = run_send(openai_provider(), send_message())
    assert ReplyMessage(turn_id="t1", text="xy", finish_reason=None) in events
    assert events[-1] == Idle(turn_id="t1")


def test_the_request_is_system_instructions_then_history_then_the_turn(
    openai_provider: MakeProvider, standin: StandIn
) -> None:
    history = (HistoryMessage(role="user", text="u1"), HistoryMessage(role="assistant", text="a1"))
    run_send(openai_provider(), send_message("u2", history=history, instructions="be brief"))
    assert standin.requests[0].messages == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "u2"},
    ]
    run_send(openai_provider(), send_message("u3"))  # no instructions: no system message
    assert standin.requests[1].messages == [{"role": "user", "content": "u3"}]


def test_a_failure_midway_is_a_taken_call_error_with_the_providers_text(
    openai_provider: MakeProvider, standin: StandIn
) -> None:
    standin.script(Reply(chunks=("a", "b"), fail_after=1, error_message="quota gone"))
    with pytest.raises(ProviderCallError) as caught:
        run_send(openai_provider(), send_message())
    assert caught.value.taken is True
    assert caught.value.error.code is ErrorCode.PROVIDER_ERROR
    assert "quota gone" in caught.value.error.message


def test_a_refused_connection_is_a_call_error_not_taken(openai_provider: MakeProvider) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ProviderCallError) as caught:
        run_send(openai_provider(base_url=f"http://127.0.0.1:{port}/v1"), send_message())
    assert caught.value.taken is False
    assert KEY not in caught.value.error.message


def test_an_error_that_echoes_the_key_is_scrubbed(
    openai_provider: MakeProvider, standin: StandIn
) -> None:
    standin.script(Reply(status=401, error_message=f"bad key {KEY}"))
    with pytest.raises(ProviderCallError) as caught:
        run_send(openai_provider(), send_message())
    assert KEY not in caught.value.error.message
    assert "bad key ***" in caught.value.error.message


def test_cancel_stops_the_stream_and_the_send_returns(
    openai_provider: MakeProvider, standin: StandIn
) -> None:
    standin.script(Reply(chunks=("a", "b"), hold_after=1))
    events: list[ProviderEvent] = []

    async def main() -> None:
        adapter = openai_provider().open_session("s", "c", events.append)
        await adapter.start()
        send = asyncio.create_task(adapter.send(send_message()))
        await asyncio.to_thread(standin.wait_held)
        await adapter.cancel(ProviderCancel(session_id="s", chat_id="c", turn_id="t1"))
        assert await asyncio.wait_for(send, 10) is None
        await adapter.dispose()

    asyncio.run(main())
    standin.wait_dropped()
    assert not any(isinstance(e, Idle | ReplyMessage) for e in events)


def test_a_missing_key_variable_is_a_clear_error_naming_provider_and_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NOPE_KEY", raising=False)
    with pytest.raises(AgentHostError) as caught:
        OpenAICompatProvider(model="m", api_key_env="NOPE_KEY", name="gpt")
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    assert "'gpt'" in caught.value.message
    assert "NOPE_KEY" in caught.value.message


def test_the_key_is_not_in_the_providers_repr(openai_provider: MakeProvider) -> None:
    assert KEY not in repr(openai_provider())


def test_without_the_openai_package_the_error_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, api_key: str
) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # not importable
    with pytest.raises(AgentHostError) as caught:
        OpenAICompatProvider(model="m", api_key_env="TEST_KEY", name="gpt")
    assert "'gpt'" in caught.value.message
    assert "agenthost[openai]" in caught.value.message
