"""ClaudeAdapter over the real claude-agent-sdk, against the stand-in CLI."""

import asyncio
import json
from pathlib import Path

import attrs
import pytest

pytest.importorskip("claude_agent_sdk")

from agenthost.messages import AgentHostError, ErrorCode
from agenthost.messages.provider import (
    CallSettled,
    ConnectionFailed,
    HistoryMessage,
    HostRequestKind,
    HostRequestOpened,
    Idle,
    ProviderAnswer,
    ProviderCancel,
    ProviderResume,
    ProviderSteer,
    ReplyDelta,
    ReplyMessage,
    ToolCallCompleted,
    ToolCallStarted,
    ToolInputDelta,
    UserMessageEcho,
)
from agenthost.providers import ClaudeProvider, RetryPolicy
from agenthost.providers.base import (
    ProviderCallError,
    ProviderCrashed,
    ProviderResumeError,
    resume_with_retry,
)
from agenthost.providers.claude import ClaudeAdapter
from tests.providers.claude.standin import Events, StandIn, run, send

RESUME = ProviderResume(session_id="s1", chat_id="c1")


@pytest.fixture
def standin(tmp_path: Path) -> StandIn:
    return StandIn(tmp_path)


async def opened(provider: ClaudeProvider, events: Events) -> ClaudeAdapter:
    adapter = provider.open_session("s1", "c1", events)
    await adapter.start()
    return adapter


def steer(pending_id: str, text: str) -> ProviderSteer:
    return ProviderSteer(
        session_id="s1", chat_id="c1", turn_id="t1", pending_id=pending_id, text=text
    )


def test_a_turn_echoes_streams_and_ends_with_the_final_message_and_idle(standin: StandIn) -> None:
    standin.script({"hi": [{"say": ["Hel", "lo", "!"]}]})
    events = Events()

    async def scenario() -> str | None:
        adapter = await opened(standin.provider(), events)
        try:
            return await adapter.send(send("t1", "hi"))
        finally:
            await adapter.dispose()

    message_id = run(scenario)
    assert events.seen == [
        UserMessageEcho(turn_id="t1", text="hi", provider_message_id=message_id),
        ReplyDelta(turn_id="t1", text="Hel"),
        ReplyDelta(turn_id="t1", text="lo"),
        ReplyDelta(turn_id="t1", text="!"),
        ReplyMessage(turn_id="t1", text="Hello!", finish_reason="end_turn"),
        Idle(turn_id="t1"),
    ]


def test_each_assistant_message_becomes_stable_once_and_tools_run_between(
    standin: StandIn,
) -> None:
    standin.script(
        {"go": [{"say": ["looking"]}, {"tool": "Read", "input": {"path": "x"}}, {"say": ["done"]}]}
    )
    events = Events()

    async def scenario() -> None:
        adapter = await opened(standin.provider(), events)
        try:
            await adapter.send(send("t1", "go"))
        finally:
            await adapter.dispose()

    run(scenario)
    [started] = events.of(ToolCallStarted)
    assert (started.name, json.loads(started.arguments)) == ("Read", {"path": "x"})
    assert events.of(ToolCallCompleted) == [
        ToolCallCompleted(turn_id="t1", tool_call_id=started.tool_call_id, result="ran Read")
    ]
    assert [(m.text, m.finish_reason) for m in events.of(ReplyMessage)] == [
        ("looking", None),
        ("done", "end_turn"),
    ]
    assert events.seen[-1] == Idle(turn_id="t1")


def test_a_tool_use_block_that_streams_is_started_streaming_then_whole(standin: StandIn) -> None:
    pieces = ['{"path"', ': "x"}']
    step = {"tool": "Read", "input": {"path": "x"}, "streamed": pieces}
    standin.script({"go": [step, {"say": ["done"]}]})
    events = Events()

    async def scenario() -> None:
        adapter = await opened(standin.provider(), events)
        try:
            await adapter.send(send("t1", "go"))
        finally:
            await adapter.dispose()

    run(scenario)
    streaming, whole = events.of(ToolCallStarted)
    assert (streaming.name, streaming.streaming, streaming.arguments) == ("Read", True, "")
    assert whole.tool_call_id == streaming.tool_call_id and not whole.streaming
    assert json.loads(whole.arguments) == {"path": "x"}
    assert events.of(ToolInputDelta) == [
        ToolInputDelta(turn_id="t1", tool_call_id=streaming.tool_call_id, content=p) for p in pieces
    ]
    kinds = [type(e).__name__ for e in events.seen]
    assert kinds.index("ToolInputDelta") < kinds.index(
        "ToolCallStarted", kinds.index("ToolInputDelta")
    )


def test_steering_taken_in_at_a_tool_boundary_is_folded_into_the_running_turn(
    standin: StandIn,
) -> None:
    standin.script({"first": [{"say": ["a"]}, {"block": True}, {"tool": "Bash"}, {"say": ["b"]}]})
    events = Events()

    async def scenario() -> str | None:
        adapter = await opened(standin.provider(), events)
        try:
            turn = asyncio.ensure_future(adapter.send(send("t1", "first")))
            await events.wait_for(ReplyDelta)
            message_id = await adapter.steer(steer("p1", "steer me"))
            await turn
            return message_id
        finally:
            await adapter.dispose()

    message_id = run(scenario)
    echoes = events.of(UserMessageEcho)
    assert echoes[1] == UserMessageEcho(
        turn_id="t1", text="steer me", provider_message_id=message_id, starts_turn=False
    )
    assert events.seen[-1] == Idle(turn_id="t1")
    assert [(e["event"], e["text"]) for e in standin.log() if "text" in e] == [
        ("prompt", "first"),
        ("steering", "steer me"),
    ]


def test_steering_with_no_boundary_left_runs_as_its_own_turn(standin: StandIn) -> None:
    standin.script({"first": [{"say": ["a"]}, {"block": True}, {"say": ["b"]}]})
    events = Events()

    async def scenario() -> str | None:
        adapter = await opened(standin.provider(), events)
        try:
            turn = asyncio.ensure_future(adapter.send(send("t1", "first")))
            await events.wait_for(ReplyDelta)
            message_id = await adapter.steer(steer("p1", "then this"))
            await turn
            await events.wait_for(Idle, lambda e: e.turn_id == "p1")
            return message_id
        finally:
            await adapter.dispose()

    message_id = run(scenario)
    turns = [(type(e).__name__, getattr(e, "turn_id", None)) for e in events.seen]
    assert turns.index(("Idle", "t1")) < turns.index(("UserMessageEcho", "p1"))
    assert events.of(UserMessageEcho)[1] == UserMessageEcho(
        turn_id="p1", text="then this", provider_message_id=message_id, starts_turn=True
    )
    assert [m.text for m in events.of(ReplyMessage) if m.turn_id == "p1"] == ["echo: then this"]


def test_cancel_interrupts_the_turn_and_the_session_goes_on(standin: StandIn) -> None:
    standin.script({"long": [{"say": ["a"]}, {"block": True}, {"say": ["never"]}]})
    events = Events()

    async def scenario() -> None:
        adapter = await opened(standin.provider(), events)
        try:
            turn = asyncio.ensure_future(adapter.send(send("t1", "long")))
            await events.wait_for(ReplyDelta)
            await adapter.cancel(ProviderCancel(session_id="s1", chat_id="c1", turn_id="t1"))
            await turn  # resolves: the interrupted turn's error result is the cancel's own
            await adapter.send(send("t2", "after"))
        finally:
            await adapter.dispose()

    run(scenario)
    assert not [e for e in events.seen if isinstance(e, (Idle, CallSettled)) and e.turn_id == "t1"]
    assert "never" not in [d.text for d in events.of(ReplyDelta)]
    assert events.seen[-1] == Idle(turn_id="t2")


def test_cancel_of_a_turn_the_cli_has_not_started_interrupts_it_when_it_starts(
    standin: StandIn,
) -> None:
    standin.script(
        {
            "first": [{"say": ["a"]}, {"block": True}, {"say": ["b"]}],
            "then this": [{"block": "interrupt"}, {"say": ["never"]}],
        }
    )
    events = Events()

    async def scenario() -> None:
        adapter = await opened(standin.provider(), events)
        try:
            turn = asyncio.ensure_future(adapter.send(send("t1", "first")))
            await events.wait_for(ReplyDelta)
            await adapter.steer(steer("p1", "then this"))  # runs after "first", as its own turn
            await adapter.cancel(ProviderCancel(session_id="s1", chat_id="c1", turn_id="p1"))
            await turn
            await adapter.send(send("t2", "after"))
        finally:
            await adapter.dispose()

    run(scenario)
    assert not [e for e in events.seen if isinstance(e, (Idle, CallSettled)) and e.turn_id == "p1"]
    assert "never" not in [d.text for d in events.of(ReplyDelta)]
    assert events.seen[-1] == Idle(turn_id="t2")
    assert standin.received() == ["first", "then this", "after"]


@pytest.mark.parametrize("approved", [True, False], ids=["approved", "denied"])
def test_a_permission_request_round_trips_through_the_host(
    standin: StandIn, approved: bool
) -> None:
    standin.script(
        {"go": [{"tool": "Bash", "input": {"command": "ls"}, "ask": True}, {"say": ["ok"]}]}
    )
    events = Events()

    async def scenario() -> None:
        adapter = await opened(standin.provider(), events)
        try:
            turn = asyncio.ensure_future(adapter.send(send("t1", "go")))
            request = await events.wait_for(HostRequestOpened)
            assert (request.kind, request.tool_name) == (HostRequestKind.PERMISSION, "Bash")
            assert json.loads(request.arguments) == {"command": "ls"}
            await adapter.answer(
                ProviderAnswer(
                    session_id="s1",
                    chat_id="c1",
                    request_id=request.request_id,
                    approved=approved,
                    error=None if approved else "not now",
                )
            )
            await turn
        finally:
            await adapter.dispose()

    run(scenario)
    [started] = events.of(ToolCallStarted)
    [request] = events.of(HostRequestOpened)
    [completed] = events.of(ToolCallCompleted)
    assert request.tool_call_id == started.tool_call_id == completed.tool_call_id
    assert completed.success is approved
    [permission] = standin.log("permission")
    answer = permission["answer"]["response"]
    if approved:
        assert answer == {"behavior": "allow", "updatedInput": {"command": "ls"}}
    else:
        assert answer == {"behavior": "deny", "message": "not now"}


def test_an_error_result_fails_the_call_with_the_clis_own_text(standin: StandIn) -> None:
    standin.script({"go": [{"say": ["half"]}, {"error": "API Error: 529 overloaded"}]})
    events = Events()

    async def scenario() -> ProviderCallError:
        adapter = await opened(standin.provider(), events)
        try:
            with pytest.raises(ProviderCallError) as failed:
                await adapter.send(send("t1", "go"))
            return failed.value
        finally:
            await adapter.dispose()

    error = run(scenario)
    assert error.taken is True
    assert error.error.message == "API Error: 529 overloaded"
    assert not events.of(Idle)


def test_a_multi_turn_conversation_sends_only_each_turns_own_text(standin: StandIn) -> None:
    events = Events()
    questions = ["one", "two", "three", "four"]

    async def scenario() -> None:
        adapter = await opened(standin.provider(), events)
        try:
            for i, text in enumerate(questions):
                await adapter.send(send(f"t{i}", text))
        finally:
            await adapter.dispose()

    run(scenario)
    assert standin.received() == questions
    assert [m.text for m in events.of(ReplyMessage)] == [f"echo: {q}" for q in questions]


def test_a_send_ignores_any_history_it_is_given(standin: StandIn) -> None:
    history = (HistoryMessage(role="user", text="old"), HistoryMessage(role="user", text="older"))

    async def scenario() -> None:
        adapter = await opened(standin.provider(), Events())
        try:
            await adapter.send(attrs.evolve(send("t1", "new"), history=history))
        finally:
            await adapter.dispose()

    run(scenario)
    assert standin.received() == ["new"]


def test_resume_continues_the_conversation_whose_reference_it_is_given(standin: StandIn) -> None:
    """The reference the first adapter reported is all a later one needs: the
    conversation is found by it, whatever the host's ids."""
    first_events, events = Events(), Events()

    async def scenario() -> None:
        first = await opened(standin.provider(), first_events)
        await first.send(send("t1", "remember me"))
        await first.dispose()
        again = standin.provider().open_session("s2", "c2", events)
        [ref] = first_events.refs
        await again.resume(ProviderResume(session_id="s2", chat_id="c2", provider_ref=ref))
        try:
            await again.send(send("t2", "next", session_id="s2", chat_id="c2"))
        finally:
            await again.dispose()

    run(scenario)
    [started] = standin.log("started")
    [resumed] = standin.log("resumed")
    assert first_events.refs == [started["session"]]
    assert resumed["session"] == started["session"]
    assert events.refs == [started["session"]]
    assert standin.received() == ["remember me", "next"]


def test_resume_of_an_unknown_conversation_reports_no_history_and_starts_fresh(
    standin: StandIn,
) -> None:
    events = Events()

    async def scenario() -> ProviderResumeError:
        adapter = standin.provider().open_session("s1", "c1", events)
        try:
            with pytest.raises(ProviderResumeError) as failed:
                await adapter.resume(RESUME)
            await adapter.send(send("t1", "hello"))
            return failed.value
        finally:
            await adapter.dispose()

    error = run(scenario)
    assert error.no_history is True
    assert "No conversation found with session ID" in error.message
    assert events.seen[-1] == Idle(turn_id="t1")


def test_any_other_resume_error_propagates(standin: StandIn) -> None:
    async def scenario() -> ProviderResumeError:
        first = await opened(standin.provider(), Events())
        await first.dispose()
        standin.script(resume_error="network fetch failed")
        adapter = standin.provider().open_session("s1", "c1", Events())

        async def no_wait(_: float) -> None:
            return None

        try:
            with pytest.raises(ProviderResumeError) as failed:
                await resume_with_retry(adapter, RESUME, RetryPolicy(attempts=2, sleep=no_wait))
            return failed.value
        finally:
            await adapter.dispose()

    error = run(scenario)
    assert error.no_history is False
    assert "network fetch failed" in error.message
    assert standin.log("resumed") == []


def test_a_cli_that_crashes_mid_turn_fails_the_connection(standin: StandIn) -> None:
    standin.script({"go": [{"say": ["a"]}, {"crash": 3}]})
    events = Events()

    async def scenario() -> None:
        adapter = await opened(standin.provider(), events)
        try:
            with pytest.raises(ProviderCrashed):
                await adapter.send(send("t1", "go"))
            await events.wait_for(ConnectionFailed)
        finally:
            await adapter.dispose()

    run(scenario)
    [failed] = events.of(ConnectionFailed)
    assert failed.error.code is ErrorCode.PROVIDER_CRASHED
    assert "exit code 3" in failed.error.message


def test_a_cli_that_hangs_mid_turn_times_out_and_fails_the_connection(standin: StandIn) -> None:
    standin.script({"go": [{"say": ["a"]}, {"hang": True}]})
    events = Events()

    async def scenario() -> None:
        provider = standin.provider(rpc_timeout=2.0, probe_after=0.2, max_timeouts=2)
        adapter = await opened(provider, events)
        try:
            with pytest.raises(ProviderCrashed):
                await adapter.send(send("t1", "go"))
        finally:
            await adapter.dispose()

    run(scenario)
    [failed] = events.of(ConnectionFailed)
    assert "timed out" in failed.error.message


def test_a_cli_that_never_answers_initialize_fails_the_open(standin: StandIn) -> None:
    standin.script(hang_on_initialize=True)

    async def scenario() -> None:
        adapter = standin.provider(start_timeout=1.0).open_session("s1", "c1", Events())
        try:
            with pytest.raises(ProviderCrashed, match="initialize"):
                await adapter.start()
        finally:
            await adapter.dispose()

    run(scenario)


def test_the_options_reach_the_cli_as_the_sdks_own(standin: StandIn, tmp_path: Path) -> None:
    async def scenario() -> None:
        provider = standin.provider(
            model="claude-test-model",
            cwd=tmp_path,
            sdk_options={"system_prompt": "be brief", "max_turns": 3},
        )
        adapter = await opened(provider, Events())
        await adapter.dispose()

    run(scenario)
    [started] = standin.log("started")
    argv = started["argv"]
    assert argv[argv.index("--model") + 1] == "claude-test-model"
    assert argv[argv.index("--permission-prompt-tool") + 1] == "stdio"
    assert f"--session-id={started['session']}" in argv
    assert "--include-partial-messages" in argv
    assert argv[argv.index("--system-prompt") + 1] == "be brief"
    assert argv[argv.index("--max-turns") + 1] == "3"


def test_sdk_options_cannot_take_over_what_the_adapter_sets(standin: StandIn) -> None:
    with pytest.raises(ValueError, match="cli_path, resume"):
        standin.provider(sdk_options={"resume": "x", "cli_path": "/bin/claude"})


def test_a_missing_cli_is_a_clear_error_naming_cli_path(tmp_path: Path) -> None:
    for cli_path in (None, tmp_path / "no-claude-here"):
        with pytest.raises(AgentHostError) as missing:
            ClaudeProvider(cli_path=cli_path)
        assert missing.value.code is ErrorCode.PROVIDER_UNAVAILABLE
        assert "cli_path=" in missing.value.message


def test_capabilities_are_claudes() -> None:
    capabilities = ClaudeProvider.capabilities
    assert capabilities.call_settles_with_turn
    assert capabilities.accepts_steering
    assert capabilities.stateful_prompt
    assert not capabilities.can_withdraw_steering
