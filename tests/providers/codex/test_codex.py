"""The codex adapter, driven through the real openai-codex SDK against a stand-in CLI.

The stand-in (standin_codex.py) speaks codex app-server's wire protocol on stdio
and records every message it receives, so the tests see each prompt.
"""

import asyncio
import json
import os
import select
import signal
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agenthost.messages import AgentHostError, ErrorCode
from agenthost.messages.provider import (
    CallSettled,
    ConnectionFailed,
    HostRequestKind,
    HostRequestOpened,
    Idle,
    ProviderAnswer,
    ProviderCancel,
    ProviderEvent,
    ProviderRefReported,
    ProviderResume,
    ProviderSend,
    ProviderSteer,
    ReplyDelta,
    ReplyMessage,
    Settlement,
    ToolCallCompleted,
    ToolCallStarted,
    UserMessageEcho,
)
from agenthost.providers import CodexProvider, ProviderCallError, ProviderCrashed
from agenthost.providers.base import ProviderResumeError, RetryPolicy, resume_with_retry
from agenthost.providers.codex import CodexAdapter
from tests.providers.codex.harness import Standin, texts
from tests.providers.processes import guarded

WAIT_S = 10.0
SESSION, CHAT = "s1", "c1"


class Events:
    """What the adapter emitted (always on the loop's thread)."""

    def __init__(self) -> None:
        self.seen: list[ProviderEvent] = []
        self.refs: list[str] = []  # the references reported, apart
        self._changed = asyncio.Event()

    def __call__(self, event: ProviderEvent) -> None:
        if isinstance(event, ProviderRefReported):
            self.refs.append(event.provider_ref)
        else:
            self.seen.append(event)
        self._changed.set()

    async def wait_for(self, found: Callable[[list[ProviderEvent]], bool]) -> None:
        async def wait() -> None:
            while not found(self.seen):
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(wait(), WAIT_S)

    async def wait_kind(self, kind: type) -> Any:
        await self.wait_for(lambda seen: any(isinstance(e, kind) for e in seen))
        return next(e for e in self.seen if isinstance(e, kind))

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.seen if isinstance(e, kind)]


@asynccontextmanager
async def adapter_of(
    provider: CodexProvider, *, resume: str | None = None
) -> AsyncIterator[tuple[CodexAdapter, Events]]:
    """An adapter started, or resumed with the reference `resume`."""
    events = Events()
    adapter = provider.open_session(SESSION, CHAT, events)
    try:
        if resume is not None:
            await adapter.resume(
                ProviderResume(session_id=SESSION, chat_id=CHAT, provider_ref=resume)
            )
        else:
            await adapter.start()
        yield adapter, events
    finally:
        await adapter.dispose()


def run(scenario: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(scenario, 60))


def send(turn_id: str, text: str) -> ProviderSend:
    return ProviderSend(session_id=SESSION, chat_id=CHAT, turn_id=turn_id, text=text)


def steer(pending_id: str, text: str, turn_id: str = "t1") -> ProviderSteer:
    return ProviderSteer(
        session_id=SESSION, chat_id=CHAT, turn_id=turn_id, pending_id=pending_id, text=text
    )


@pytest.fixture
def standin(tmp_path: Path) -> Standin:
    return Standin(tmp_path)


# -- turns ---------------------------------------------------------------------------------


def test_a_turn_is_echoed_streamed_and_ends_with_its_final_message_and_idle(
    standin: Standin,
) -> None:
    async def scenario() -> None:
        async with adapter_of(standin.provider()) as (adapter, events):
            codex_turn = await adapter.send(send("t1", "hello"))
            assert codex_turn is not None
            await events.wait_kind(Idle)
            assert events.seen[0] == UserMessageEcho(
                turn_id="t1", text="hello", provider_message_id="t1"
            )
            assert "".join(d.text for d in events.of(ReplyDelta)) == "echo: hello"
            assert events.seen[-2:] == [
                ReplyMessage(turn_id="t1", text="echo: hello", finish_reason="stop"),
                Idle(turn_id="t1"),
            ]

    run(scenario())


def test_deltas_stream_in_order_before_the_final_message(standin: Standin) -> None:
    standin.on("count", {"say": "one "}, {"say": "two "}, {"say": "three"})

    async def scenario() -> None:
        async with adapter_of(standin.provider()) as (adapter, events):
            await adapter.send(send("t1", "count"))
            await events.wait_kind(Idle)
            kinds = [type(e).__name__ for e in events.seen]
            assert kinds == [
                "UserMessageEcho",
                "ReplyDelta",
                "ReplyDelta",
                "ReplyDelta",
                "ReplyMessage",
                "Idle",
            ]
            assert [d.text for d in events.of(ReplyDelta)] == ["one ", "two ", "three"]

    run(scenario())


def test_a_turn_codex_refuses_was_never_taken_and_the_next_one_runs(standin: Standin) -> None:
    standin.script["refuse"] = {"too long": "input exceeds the context window"}

    async def scenario() -> None:
        async with adapter_of(standin.provider()) as (adapter, events):
            with pytest.raises(ProviderCallError) as refused:
                await adapter.send(send("t1", "too long"))
            assert not refused.value.taken
            assert refused.value.error.message == "codex: input exceeds the context window"
            await adapter.send(send("t2", "short"))
            await events.wait_kind(Idle)
            assert [e.turn_id for e in events.seen] == ["t2"] * len(events.seen)

    run(scenario())


def test_a_failed_codex_turn_keeps_its_own_error(standin: Standin) -> None:
    standin.on("boom", {"say": "partial"}, {"fail": "model overloaded"})

    async def scenario() -> None:
        async with adapter_of(standin.provider()) as (adapter, events):
            await adapter.send(send("t1", "boom"))
            settled = await events.wait_kind(CallSettled)
            assert settled.settlement is Settlement.REJECTED
            assert settled.error == AgentHostError(
                code=ErrorCode.PROVIDER_ERROR, message="model overloaded"
            )
            assert not events.of(Idle)

    run(scenario())


# -- steering and cancel ----------------------------------------------------------------------


def test_steering_reaches_the_running_turn_and_is_echoed_with_its_id(standin: Standin) -> None:
    standin.on("first", {"say": "a"}, {"wait": "turn/steer"}, {"say": "b"})

    async def scenario() -> None:
        async with adapter_of(standin.provider()) as (adapter, events):
            codex_turn = await adapter.send(send("t1", "first"))
            await events.wait_kind(ReplyDelta)
            message_id = await adapter.steer(steer("p1", "also this"))
            await events.wait_kind(Idle)
            [own, steered] = events.of(UserMessageEcho)
            assert own.text == "first"
            assert steered == UserMessageEcho(
                turn_id="t1", text="also this", provider_message_id=message_id
            )
            assert events.seen.index(steered) < events.seen.index(events.of(ReplyDelta)[1])
            [call] = standin.received("turn/steer")
            assert call["expectedTurnId"] == codex_turn
            assert texts([call]) == ["also this"]

    run(scenario())


def test_steering_after_codex_ended_its_turn_is_refused_as_no_active_turn(
    standin: Standin,
) -> None:
    # The turn ended in the CLI while its turn/completed is still on its way:
    # codex answers the steer "no active turn to steer" and the host queues it.
    standin.on("first", {"say": "a"}, {"end_unseen": True})

    async def scenario() -> None:
        async with adapter_of(standin.provider()) as (adapter, events):
            await adapter.send(send("t1", "first"))
            await events.wait_kind(ReplyDelta)
            with pytest.raises(ProviderCallError) as refused:
                await adapter.steer(steer("p1", "too late"))
            assert refused.value.no_active_turn and not refused.value.taken
            assert refused.value.error.message == "no active turn to steer"
            await events.wait_kind(Idle)
            with pytest.raises(ProviderCallError) as idle:  # codex is idle: not even asked
                await adapter.steer(steer("p2", "later"))
            assert idle.value.no_active_turn
            assert len(standin.received("turn/steer")) == 1

    run(scenario())


def test_cancel_interrupts_the_turn_and_the_next_turn_runs_on_its_own(standin: Standin) -> None:
    standin.on("long", {"say": "a"}, {"wait": "never"})

    async def scenario() -> None:
        async with adapter_of(standin.provider()) as (adapter, events):
            codex_turn = await adapter.send(send("t1", "long"))
            await events.wait_kind(ReplyDelta)
            await adapter.cancel(ProviderCancel(session_id=SESSION, chat_id=CHAT, turn_id="t1"))
            await events.wait_kind(Idle)
            assert events.of(ReplyMessage)[-1].finish_reason == "interrupted"
            assert standin.received("turn/interrupt") == [
                {"threadId": standin.received("turn/start")[0]["threadId"], "turnId": codex_turn}
            ]
            await adapter.send(send("t2", "next"))
            await events.wait_for(lambda seen: Idle(turn_id="t2") in seen)
            assert texts(standin.received("turn/start")) == ["long", "next"]

    run(scenario())


# -- permissions ------------------------------------------------------------------------------


@pytest.mark.parametrize(("approved", "decision"), [(True, "accept"), (False, "decline")])
def test_an_approval_request_is_a_permission_request_answered_by_the_host(
    standin: Standin, approved: bool, decision: str
) -> None:
    standin.on("run ls", {"approval": "ls -la"}, {"say": "done"})

    async def scenario() -> None:
        async with adapter_of(standin.provider()) as (adapter, events):
            await adapter.send(send("t1", "run ls"))
            request = await events.wait_kind(HostRequestOpened)
            [started] = events.of(ToolCallStarted)
            assert request.kind is HostRequestKind.PERMISSION
            assert request.turn_id == "t1" and request.tool_call_id == started.tool_call_id
            assert started.name == request.tool_name == "shell"
            assert json.loads(request.arguments)["command"] == "ls -la"
            await adapter.answer(
                ProviderAnswer(
                    session_id=SESSION,
                    chat_id=CHAT,
                    request_id=request.request_id,
                    approved=approved,
                )
            )
            await events.wait_kind(Idle)
            assert standin.approvals() == [decision]
            [completed] = events.of(ToolCallCompleted)
            assert completed.tool_call_id == started.tool_call_id
            assert completed.success is approved

    run(scenario())


def test_cancel_during_an_approval_answers_it_cancel_and_interrupts(standin: Standin) -> None:
    # The SDK answers approvals on its reader thread: until the approval is
    # answered, no response (not even turn/interrupt's) can be read.
    standin.on("risky", {"approval": "rm -rf build"}, {"say": "never said"})

    async def scenario() -> None:
        async with adapter_of(standin.provider()) as (adapter, events):
            await adapter.send(send("t1", "risky"))
            await events.wait_kind(HostRequestOpened)
            await adapter.cancel(ProviderCancel(session_id=SESSION, chat_id=CHAT, turn_id="t1"))
            await events.wait_kind(Idle)
            assert len(standin.received("turn/interrupt")) == 1
            assert events.of(ReplyMessage)[-1].finish_reason == "interrupted"
            assert not [d for d in events.of(ReplyDelta) if d.text == "never said"]
            # The approval's answer was written before turn/interrupt's answer could
            # be read; the stand-in has read it once it answers a later request.
            await adapter.send(send("t2", "next"))
            assert standin.approvals() == ["cancel"]
            await events.wait_for(lambda seen: Idle(turn_id="t2") in seen)

    run(scenario())


# -- resume -----------------------------------------------------------------------------------


def test_a_restarted_connection_resumes_its_codex_thread(standin: Standin) -> None:
    provider = standin.provider()

    async def scenario() -> None:
        async with adapter_of(provider) as (adapter, events):
            await adapter.send(send("t1", "remember this"))
            await events.wait_kind(Idle)
            [thread] = events.refs  # reported as codex started it
        async with adapter_of(provider, resume=thread) as (adapter, events):
            assert events.refs == [thread]
            await adapter.send(send("t2", "and now"))
            await events.wait_kind(Idle)
        assert len(standin.received("thread/start")) == 1, "resume starts no new thread"
        [first, second] = standin.received("turn/start")
        assert standin.received("thread/resume") == [{"threadId": first["threadId"]}]
        assert second["threadId"] == first["threadId"]
        assert texts([second]) == ["and now"]

    run(scenario())


@pytest.mark.parametrize("stored", ["thread-the-cli-never-saw", None])
def test_resume_of_a_thread_codex_has_no_rollout_for_or_of_none_means_no_history(
    standin: Standin, stored: str | None
) -> None:
    provider = standin.provider()

    async def scenario() -> None:
        events = Events()
        adapter = provider.open_session(SESSION, CHAT, events)
        try:
            with pytest.raises(ProviderResumeError) as failed:
                await adapter.resume(
                    ProviderResume(session_id=SESSION, chat_id=CHAT, provider_ref=stored)
                )
            assert failed.value.no_history
            assert failed.value.code == -32600
            if stored is not None:
                assert failed.value.message == f"no rollout found for thread id {stored}"
            # a new thread, as the fallback wants, reported for the host to store
            assert len(standin.received("thread/start")) == 1
            assert len(events.refs) == 1 and events.refs[0] != stored
            await adapter.send(send("t1", "fresh start"))
            await events.wait_kind(Idle)
            assert len(standin.received("thread/start")) == 1
        finally:
            await adapter.dispose()

    run(scenario())


def test_a_transient_resume_error_is_retried_and_then_propagates(standin: Standin) -> None:
    standin.script["resume_error"] = {"code": -32603, "message": "network fetch failed"}
    provider = standin.provider()
    slept: list[float] = []

    async def no_sleep(seconds: float) -> None:
        slept.append(seconds)

    async def scenario() -> None:
        adapter = provider.open_session(SESSION, CHAT, Events())
        try:
            with pytest.raises(ProviderResumeError) as failed:
                await resume_with_retry(
                    adapter,
                    ProviderResume(session_id=SESSION, chat_id=CHAT, provider_ref="some-thread"),
                    RetryPolicy(attempts=3, sleep=no_sleep),
                )
            assert not failed.value.no_history
            assert failed.value.message == "network fetch failed"
            assert adapter.is_transient(failed.value)
            assert len(standin.received("thread/resume")) == 3 and len(slept) == 2
        finally:
            await adapter.dispose()

    run(scenario())


# -- failures ---------------------------------------------------------------------------------


def test_a_cli_that_crashes_mid_turn_fails_the_connection(standin: Standin) -> None:
    standin.on("crash", {"say": "a"}, {"crash": True})

    async def scenario() -> None:
        async with adapter_of(standin.provider()) as (adapter, events):
            await adapter.send(send("t1", "crash"))
            failed = await events.wait_kind(ConnectionFailed)
            assert failed.error.code is ErrorCode.PROVIDER_CRASHED
            assert len(events.of(ConnectionFailed)) == 1
            with pytest.raises(ProviderCrashed):
                await adapter.send(send("t2", "anyone there?"))

    run(scenario())


def test_a_cli_that_dies_while_idle_fails_the_connection(standin: Standin) -> None:
    async def scenario() -> None:
        async with adapter_of(standin.provider()) as (_adapter, events):
            [startup] = standin.startups()
            os.kill(startup["pid"], signal.SIGKILL)
            failed = await events.wait_kind(ConnectionFailed)
            assert failed.error.code is ErrorCode.PROVIDER_CRASHED

    run(scenario())


def test_a_hung_cli_times_out_and_repeated_timeouts_fail_the_connection(
    standin: Standin,
) -> None:
    standin.script["hang_on"] = "turn/start"

    async def scenario() -> None:
        provider = standin.provider(max_timeouts=2)
        async with adapter_of(provider) as (adapter, _events):
            provider.rpc_timeout = 1.0  # opened at the default; now the CLI hangs
            with pytest.raises(ProviderCallError) as first:
                await adapter.send(send("t1", "hello"))
            assert first.value.taken
            assert "did not answer turn/start" in first.value.error.message
            with pytest.raises(ProviderCrashed):
                await adapter.send(send("t2", "hello again"))

    run(scenario())


def _gone(pid: int) -> bool:
    """Wait (bounded) for a process that is not our child to exit."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], WAIT_S)[0])
    finally:
        os.close(fd)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pidfd and setsid checks")
def test_the_cli_runs_through_the_guard_and_is_gone_after_dispose(standin: Standin) -> None:
    async def scenario() -> None:
        async with adapter_of(standin.provider()):
            [startup] = standin.startups()
            assert guarded(startup), "it runs in the guard's own session"
        assert _gone(startup["pid"])

    run(scenario())


def test_a_missing_cli_is_a_clear_error_naming_cli_path(tmp_path: Path) -> None:
    with pytest.raises(AgentHostError) as missing:
        CodexProvider(cli_path=tmp_path / "codex")
    assert missing.value.code is ErrorCode.PROVIDER_UNAVAILABLE
    assert "cli_path=" in missing.value.message and "codex" in missing.value.message
