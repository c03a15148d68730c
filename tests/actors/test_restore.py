"""Opening a stored session resumes its provider session; errors leave it intact."""

import pytest

from agenthost.actors import Host
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.providers import RetryPolicy
from agenthost.providers.scripted import ScriptedProvider
from agenthost.testing import FakeClock
from tests.fakes.stores import StoreFactory


async def no_sleep(seconds: float) -> None:
    return None


def start(stores: StoreFactory, provider: ScriptedProvider) -> Host:
    return Host.start(
        store=stores(),
        providers={"scripted": provider},
        clock=FakeClock(),
        resume_retry=RetryPolicy(attempts=3, sleep=no_sleep),
    )


def stored_session(stores: StoreFactory, provider: ScriptedProvider) -> str:
    host = start(stores, provider)
    session = host.create_session()
    session.chat().send("remember me").result(timeout=10)
    host.stop()
    return session.id


NETWORK = "Authentication failed: Failed to validate SDK token: network fetch failed"


def test_a_transient_resume_error_past_the_retries_propagates_and_leaves_the_session_intact(
    store_factory: StoreFactory,
) -> None:
    provider = ScriptedProvider()
    session_id = stored_session(store_factory, provider)
    provider.fail_resume(code=-32603, message=NETWORK, times=10)
    clock = FakeClock()
    host = Host.start(
        store=store_factory(),
        providers={"scripted": provider},
        clock=clock,
        resume_retry=RetryPolicy(attempts=3, sleep=no_sleep),
    )
    with host:
        for _ in range(3):  # three attempts each
            with pytest.raises(AgentHostError) as caught:
                host.open_session(session_id)
            assert caught.value.code is ErrorCode.PROVIDER_ERROR
            assert "network fetch failed" in caught.value.message
        clock.advance(3600)  # no GC ever takes it
        assert [s.turn_count for s in host.list_sessions()] == [1]
        chat = host.open_session(session_id).chat()  # the last failure, then the network is back
        assert [t.user_text for t in chat.state().turns] == ["remember me"]
        assert chat.send("again").result(timeout=10).state is OutcomeState.COMPLETE


def test_a_transient_resume_error_is_retried_then_succeeds(store_factory: StoreFactory) -> None:
    provider = ScriptedProvider()
    session_id = stored_session(store_factory, provider)
    provider.fail_resume(code=-32603, message=NETWORK, times=2)
    with start(store_factory, provider) as host:
        chat = host.open_session(session_id).chat()
        assert [t.user_text for t in chat.state().turns] == ["remember me"]


def test_any_other_resume_error_propagates_at_once_without_retries(
    store_factory: StoreFactory,
) -> None:
    provider = ScriptedProvider()
    session_id = stored_session(store_factory, provider)
    provider.fail_resume(code=-32000, message="permission denied", times=2)
    with start(store_factory, provider) as host:
        with pytest.raises(AgentHostError):
            host.open_session(session_id)
        with pytest.raises(AgentHostError):  # the second failure was not used up by a retry
            host.open_session(session_id)
        assert host.open_session(session_id).chat().state().turns[0].user_text == "remember me"


def test_a_provider_that_reports_no_history_falls_back_to_a_fresh_provider_session(
    store_factory: StoreFactory,
) -> None:
    provider = ScriptedProvider()
    session_id = stored_session(store_factory, provider)
    provider.fail_resume(code=-32603, message="Session not found: x", times=1)
    with start(store_factory, provider) as host:
        chat = host.open_session(session_id).chat()
        assert [t.user_text for t in chat.state().turns] == ["remember me"]
        assert chat.send("next").result(timeout=10).text == "echo: next"


def test_opening_a_resident_session_returns_the_same_session(host: Host) -> None:
    session = host.create_session()
    chat = session.chat()
    chat.send("x").result(timeout=10)
    again = host.open_session(session.id).chat()
    assert again.id == chat.id
    assert len(again.state().turns) == 1
