"""What Claude Code offers, mapped onto AHP 1.1 (against the stand-in CLI,
through the real SDK): permissions with the CLI's suggestions as options and
an editable input, AskUserQuestion as the host's questions, thinking as
reasoning."""

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("claude_agent_sdk")

from agenthost.actors.input_answers import given, resolve
from agenthost.messages.inputs import InputQuestionKind
from agenthost.messages.provider import (
    HostRequestKind,
    HostRequestOpened,
    Idle,
    ProviderAnswer,
    ReplyReasoning,
    ToolCallCompleted,
)
from agenthost.providers.claude import ClaudeAdapter
from tests.providers.claude.standin import Events, StandIn, run, send

RULE = {
    "type": "addRules",
    "rules": [{"toolName": "Bash", "ruleContent": "npm test"}],
    "behavior": "allow",
    "destination": "session",
}
QUESTIONS = {
    "questions": [
        {
            "question": "Which database?",
            "header": "DB",
            "options": [
                {"label": "SQLite", "description": "a file"},
                {"label": "PostgreSQL", "description": "a server"},
            ],
            "multiSelect": False,
        },
        {
            "question": "Which extras?",
            "header": "Extras",
            "options": [{"label": "cache"}, {"label": "metrics"}],
            "multiSelect": True,
        },
    ]
}


@pytest.fixture
def standin(tmp_path: Path) -> StandIn:
    return StandIn(tmp_path)


async def answering(
    adapter: ClaudeAdapter, events: Events, text: str, **reply: Any
) -> HostRequestOpened:
    """Send `text`, answer its first request with `reply`, and read to the turn's end."""
    await adapter.start()
    task = asyncio.ensure_future(adapter.send(send("t1", text)))
    request = await events.wait_for(HostRequestOpened)
    await adapter.answer(
        ProviderAnswer(session_id="s1", chat_id="c1", request_id=request.request_id, **reply)
    )
    await task
    return request


def test_a_permission_offers_allow_the_clis_suggestions_and_deny_and_is_editable(
    standin: StandIn,
) -> None:
    step = {"tool": "Bash", "input": {"command": "npm test"}, "ask": True, "suggestions": [RULE]}
    standin.script({"go": [step, {"say": ["ok"]}]})
    events = Events()

    async def scenario() -> HostRequestOpened:
        adapter = standin.provider().open_session("s1", "c1", events)
        try:
            return await answering(
                adapter,
                events,
                "go",
                approved=True,
                option="remember-1",
                edited_input='{"command": "npm test -- -q"}',
            )
        finally:
            await adapter.dispose()

    request = run(scenario)
    assert request.kind is HostRequestKind.PERMISSION and request.editable
    assert [(o.id, o.kind) for o in request.options] == [
        ("allow", "approve"),
        ("remember-1", "approve"),
        ("deny", "deny"),
    ]
    assert request.options[1].label == "Allow, and always allow Bash(npm test) (session)"
    [permission] = standin.log("permission")
    answer = permission["answer"]["response"]
    assert answer["behavior"] == "allow"
    assert answer["updatedInput"] == {"command": "npm test -- -q"}
    assert answer["updatedPermissions"] == [
        {
            "type": "addRules",
            "rules": [{"toolName": "Bash", "ruleContent": "npm test"}],
            "behavior": "allow",
            "destination": "session",
        }
    ]


def test_ask_user_question_is_the_hosts_questions_answered_in_the_clis_shape(
    standin: StandIn,
) -> None:
    step = {"tool": "AskUserQuestion", "input": QUESTIONS, "ask": True}
    standin.script({"go": [step, {"say": ["noted"]}]})
    events = Events()
    answers = (("q1", given("PostgreSQL")), ("q2", given(["cache", "metrics"])))

    async def scenario() -> HostRequestOpened:
        adapter = standin.provider().open_session("s1", "c1", events)
        try:
            # The host checks the answers first; here they come as it resolves them.
            await adapter.start()
            task = asyncio.ensure_future(adapter.send(send("t1", "go")))
            request = await events.wait_for(HostRequestOpened)
            resolved = resolve(request.request_id, request.questions, None, answers)
            assert isinstance(resolved, tuple)
            await adapter.answer(
                ProviderAnswer(
                    session_id="s1",
                    chat_id="c1",
                    request_id=request.request_id,
                    approved=True,
                    answers=resolved,
                )
            )
            await task
            return request
        finally:
            await adapter.dispose()

    request = run(scenario)
    assert request.kind is HostRequestKind.USER_INPUT
    first, second = request.questions
    assert (first.kind, first.title, [o.label for o in first.options or ()]) == (
        InputQuestionKind.SINGLE_SELECT,
        "DB",
        ["SQLite", "PostgreSQL"],
    )
    assert second.kind == InputQuestionKind.MULTI_SELECT
    [permission] = standin.log("permission")
    assert permission["answer"]["response"]["updatedInput"]["answers"] == {
        "Which database?": "PostgreSQL",
        "Which extras?": "cache, metrics",
    }
    [completed] = events.of(ToolCallCompleted)
    assert "Which database? -> PostgreSQL" in completed.result


def test_a_declined_question_is_a_deny(standin: StandIn) -> None:
    step = {"tool": "AskUserQuestion", "input": QUESTIONS, "ask": True}
    standin.script({"go": [step, {"say": ["fine"]}]})
    events = Events()

    async def scenario() -> None:
        adapter = standin.provider().open_session("s1", "c1", events)
        try:
            await answering(
                adapter, events, "go", approved=False, error="The user declined to answer."
            )
        finally:
            await adapter.dispose()

    run(scenario)
    [permission] = standin.log("permission")
    assert permission["answer"]["response"] == {
        "behavior": "deny",
        "message": "The user declined to answer.",
    }


def test_a_denied_permission_tells_the_cli_the_users_words(standin: StandIn) -> None:
    step = {"tool": "Bash", "input": {"command": "npm test"}, "ask": True}
    standin.script({"go": [step, {"say": ["ok"]}]})
    events = Events()

    async def scenario() -> None:
        adapter = standin.provider().open_session("s1", "c1", events)
        try:
            await answering(
                adapter, events, "go", approved=False, reason="denied", reason_message="use make"
            )
        finally:
            await adapter.dispose()

    run(scenario)
    [permission] = standin.log("permission")
    assert permission["answer"]["response"] == {"behavior": "deny", "message": "use make"}


@pytest.mark.parametrize("streamed", [True, False])
def test_thinking_is_reasoning_reported_once_whether_or_not_it_streamed(
    standin: StandIn, streamed: bool
) -> None:
    standin.script({"why": [{"think": ["Because ", "so."], "streamed": streamed}, {"say": ["ok"]}]})
    events = Events()

    async def scenario() -> None:
        adapter = standin.provider().open_session("s1", "c1", events)
        await adapter.start()
        try:
            await adapter.send(send("t1", "why"))
            await events.wait_for(Idle)
        finally:
            await adapter.dispose()

    run(scenario)
    thought = "".join(e.text for e in events.of(ReplyReasoning))
    assert thought == "Because so."
    assert {e.turn_id for e in events.of(ReplyReasoning)} == {"t1"}
