"""What codex offers, mapped onto AHP 1.1 (against the stand-in CLI, through
the real SDK): approvals with codex's decisions as options, request_user_input
as the host's questions, reasoning items as reasoning."""

import asyncio
import json
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agenthost.actors.input_answers import given, resolve
from agenthost.messages.inputs import InputQuestionKind
from agenthost.messages.provider import (
    HostRequestKind,
    HostRequestOpened,
    Idle,
    ProviderAnswer,
    ReplyDelta,
    ReplyReasoning,
    ToolCallCompleted,
)
from tests.providers.codex.harness import Standin
from tests.providers.codex.test_codex import CHAT, SESSION, adapter_of, send

T = TypeVar("T")

QUESTIONS = [
    {
        "id": "db",
        "header": "Database",
        "question": "Which one?",
        "options": [
            {"label": "SQLite", "description": "a file"},
            {"label": "PostgreSQL", "description": "a server"},
        ],
        "isOther": True,
    },
    {"id": "name", "header": "Name", "question": "What name?", "options": None},
]


@pytest.fixture
def standin(tmp_path: Path) -> Standin:
    return Standin(tmp_path)


def run(scenario: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(scenario, 60))


def reply(request: HostRequestOpened, **answer: Any) -> ProviderAnswer:
    return ProviderAnswer(session_id=SESSION, chat_id=CHAT, request_id=request.request_id, **answer)


@pytest.mark.parametrize(
    ("option", "decision", "ran"),
    [
        ("accept", "accept", True),
        ("acceptForSession", "acceptForSession", True),
        ("decline", "decline", False),
    ],
)
def test_an_approval_offers_codexs_decisions_and_the_chosen_one_is_codexs_answer(
    standin: Standin, option: str, decision: str, ran: bool
) -> None:
    standin.on("run ls", {"approval": "ls -la"}, {"say": "done"})

    async def scenario() -> HostRequestOpened:
        async with adapter_of(standin.provider()) as (adapter, events):
            await adapter.send(send("t1", "run ls"))
            request = await events.wait_kind(HostRequestOpened)
            approved = option != "decline"
            await adapter.answer(reply(request, approved=approved, option=option))
            await events.wait_kind(Idle)
            [completed] = events.of(ToolCallCompleted)
            assert completed.success is ran
            return request

    request = run(scenario())
    assert [(o.id, o.kind) for o in request.options] == [
        ("accept", "approve"),
        ("acceptForSession", "approve"),
        ("decline", "deny"),
        ("cancel", "deny"),
    ]
    assert standin.approvals() == [decision]


def test_an_execpolicy_amendment_codex_proposes_is_an_option_of_its_own(standin: Standin) -> None:
    standin.on("test", {"approval": "npm test", "amendment": ["npm", "test"]}, {"say": "ok"})

    async def scenario() -> HostRequestOpened:
        async with adapter_of(standin.provider()) as (adapter, events):
            await adapter.send(send("t1", "test"))
            request = await events.wait_kind(HostRequestOpened)
            await adapter.answer(
                reply(request, approved=True, option="acceptWithExecpolicyAmendment")
            )
            await events.wait_kind(Idle)
            return request

    request = run(scenario())
    amend = [o for o in request.options if o.id == "acceptWithExecpolicyAmendment"]
    assert [o.label for o in amend] == ["Always allow commands like: npm test"]
    assert standin.approvals() == [
        {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["npm", "test"]}}
    ]


def test_a_file_change_approval_offers_the_file_decisions(standin: Standin) -> None:
    standin.on("write", {"file_approval": "notes.txt"}, {"say": "ok"})

    async def scenario() -> HostRequestOpened:
        async with adapter_of(standin.provider()) as (adapter, events):
            await adapter.send(send("t1", "write"))
            request = await events.wait_kind(HostRequestOpened)
            await adapter.answer(reply(request, approved=True, option="accept"))
            await events.wait_kind(Idle)
            return request

    request = run(scenario())
    assert request.tool_name == "apply_patch"
    assert [o.id for o in request.options] == ["accept", "acceptForSession", "decline", "cancel"]
    assert standin.approvals() == ["accept"]


def test_request_user_input_is_the_hosts_questions_answered_with_the_labels(
    standin: Standin,
) -> None:
    standin.on("setup", {"ask": QUESTIONS})

    async def scenario() -> HostRequestOpened:
        async with adapter_of(standin.provider()) as (adapter, events):
            await adapter.send(send("t1", "setup"))
            request = await events.wait_kind(HostRequestOpened)
            answers = resolve(
                request.request_id,
                request.questions,
                None,
                (("db", given("PostgreSQL")), ("name", given("shop"))),
            )
            assert isinstance(answers, tuple)
            await adapter.answer(reply(request, approved=True, answers=answers))
            await events.wait_kind(Idle)
            assert [d.text for d in events.of(ReplyDelta)] == ["db=PostgreSQL; name=shop"]
            return request

    request = run(scenario())
    assert request.kind is HostRequestKind.USER_INPUT
    db, name = request.questions
    assert (db.kind, db.title, db.allow_freeform_input) == (
        InputQuestionKind.SINGLE_SELECT,
        "Database",
        True,
    )
    assert [o.label for o in db.options or ()] == ["SQLite", "PostgreSQL"]
    assert name.kind == InputQuestionKind.TEXT
    assert standin.inputs() == [{"db": {"answers": ["PostgreSQL"]}, "name": {"answers": ["shop"]}}]


def test_a_declined_question_gives_codex_no_answers(standin: Standin) -> None:
    standin.on("setup", {"ask": QUESTIONS})

    async def scenario() -> None:
        async with adapter_of(standin.provider()) as (adapter, events):
            await adapter.send(send("t1", "setup"))
            request = await events.wait_kind(HostRequestOpened)
            await adapter.answer(reply(request, approved=False, error="declined"))
            await events.wait_kind(Idle)

    run(scenario())
    assert standin.inputs() == [{}]


@pytest.mark.parametrize(("summary", "streamed"), [(True, True), (False, True), (True, False)])
def test_a_reasoning_item_is_reasoning_once_streamed_or_not(
    standin: Standin, summary: bool, streamed: bool
) -> None:
    step = {"reason": "Think first.", "summary": summary, "streamed": streamed}
    standin.on("why", step, {"say": "so"})

    async def scenario() -> None:
        async with adapter_of(standin.provider()) as (adapter, events):
            await adapter.send(send("t1", "why"))
            await events.wait_kind(Idle)
            assert [(e.turn_id, e.text) for e in events.of(ReplyReasoning)] == [
                ("t1", "Think first.")
            ]

    run(scenario())
    assert json.loads(json.dumps(standin.received("turn/start")))  # one turn started
