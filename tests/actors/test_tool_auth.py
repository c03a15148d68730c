"""Tool calls that wait for authentication, through the host with the scripted
provider: an MCP server's call blocked on a token for a protected resource
(chat/toolCallAuthRequired, the session's toolAuthentication entry), the
token a client gives for it (Chat.authenticate) reaching the provider and
nowhere else, the call running again (chat/toolCallAuthResolved); a wrong
resource, a token the resource refuses, a cancel and a crash while it waits."""

import logging
from pathlib import Path

import pytest
import structlog

from agenthost.actors import Chat, Host, Session, Subscription
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.messages.common import AuthRequiredReason, ContributorKind
from agenthost.messages.events import (
    RequestOpened,
    ToolCallAuthRequired,
    ToolCallAuthResolved,
)
from agenthost.messages.state import (
    ChatStatus,
    RequestKind,
    SessionInputKind,
    ToolCallPart,
    ToolCallStatus,
)
from agenthost.providers.scripted import (
    REDACTED,
    AuthToolCall,
    Say,
    ScriptedProvider,
)
from tests.fakes.events import events_until

WAIT_S = 10.0
REPO = "https://mcp.example.com"
TOKEN = "tok-3f9a-secret"


def _search(**options: object) -> AuthToolCall:
    return AuthToolCall("search", REPO, server="github", scopes=("repo:read",), **options)  # type: ignore[arg-type]


def _waiting(sub: Subscription) -> ToolCallAuthRequired:
    event = events_until(sub, lambda e: isinstance(e, ToolCallAuthRequired))[-1]
    assert isinstance(event, ToolCallAuthRequired)
    return event


def _call(chat: Chat, *, ended: bool = False) -> object:
    state = chat.state()
    turn = state.turns[-1] if ended else state.active_turn
    assert turn is not None
    [call] = [p.tool_call for p in turn.response_parts if isinstance(p, ToolCallPart)]
    return call


def _chat(host: Host) -> tuple[Session, Chat]:
    session = host.create_session()
    return session, session.chat()


def test_an_mcp_tool_call_waits_for_a_token_and_runs_once_the_client_gives_it(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("find", _search(), Say("found"))
    session, chat = _chat(host)
    sub = chat.subscribe()
    turn = chat.send("find")
    waiting = _waiting(sub)
    assert waiting.auth.resource.resource == REPO
    assert waiting.auth.required_scopes == ("repo:read",)
    assert waiting.auth.reason == AuthRequiredReason.REQUIRED
    call = _call(chat)
    assert call.status is ToolCallStatus.AUTH_REQUIRED  # type: ignore[attr-defined]
    assert call.contributor.kind == ContributorKind.MCP  # type: ignore[attr-defined]
    assert call.contributor.customization_id == "github"  # type: ignore[attr-defined]
    assert int(chat.state().status) & int(ChatStatus.INPUT_NEEDED) == int(ChatStatus.INPUT_NEEDED)
    [entry] = session.state().input_requests
    assert entry.kind == SessionInputKind.TOOL_AUTHENTICATION
    assert entry.tool_call is not None and entry.tool_call.auth == waiting.auth

    chat.authenticate(REPO, TOKEN)

    assert turn.result(timeout=WAIT_S).text == "found"
    events = events_until(sub, lambda e: isinstance(e, ToolCallAuthResolved))
    assert [e.tool_call_id for e in events if isinstance(e, ToolCallAuthResolved)] == [
        waiting.tool_call_id
    ]
    call = _call(chat, ended=True)
    assert (call.status, call.success) == (ToolCallStatus.COMPLETED, True)  # type: ignore[attr-defined]
    assert session.state().input_requests == ()


def test_the_token_reaches_the_provider_and_no_record_log_line_or_store_row_holds_it(
    host: Host, provider: ScriptedProvider, db_path: Path
) -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    provider.on("find", _search(accepts=TOKEN), Say("found"))
    _, chat = _chat(host)
    sub = chat.subscribe()
    turn = chat.send("find")
    _waiting(sub)
    with structlog.testing.capture_logs() as logs:  # every line, debug included
        chat.authenticate(REPO, TOKEN)
        assert turn.result(timeout=WAIT_S).text == "found"  # only TOKEN runs the call
    assert TOKEN not in repr(logs)
    assert any(line["event"] == "tool_auth_resolved" for line in logs)
    [answer] = provider.answers
    assert answer.token == REDACTED
    assert TOKEN not in repr(chat.state())
    host.stop()  # every write committed
    stored = b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))
    assert b"found" in stored and TOKEN.encode() not in stored


def test_a_token_the_resource_refuses_is_challenged_again_and_the_call_waits_once_more(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("find", _search(accepts=TOKEN), Say("found"))
    _, chat = _chat(host)
    sub = chat.subscribe()
    turn = chat.send("find")
    first = _waiting(sub)
    chat.authenticate(REPO, "not-the-token")
    second = _waiting(sub)
    assert second.tool_call_id == first.tool_call_id
    assert _call(chat).status is ToolCallStatus.AUTH_REQUIRED  # type: ignore[attr-defined]
    assert not turn.done()
    chat.authenticate(REPO, TOKEN)
    assert turn.result(timeout=WAIT_S).text == "found"


def test_a_token_for_a_resource_nothing_waits_on_is_refused_and_reaches_no_call(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("find", _search(), Say("found"))
    _, chat = _chat(host)
    sub = chat.subscribe()
    turn = chat.send("find")
    _waiting(sub)
    with pytest.raises(AgentHostError) as refused:
        chat.authenticate("https://elsewhere.example.com", TOKEN)
    assert refused.value.code is ErrorCode.NOT_FOUND
    with pytest.raises(AgentHostError) as empty:
        chat.authenticate(REPO, "")
    assert empty.value.code is ErrorCode.INVALID_ARGUMENT
    assert provider.answers == []
    assert _call(chat).status is ToolCallStatus.AUTH_REQUIRED  # type: ignore[attr-defined]
    chat.authenticate(REPO, TOKEN)
    assert turn.result(timeout=WAIT_S).state is OutcomeState.COMPLETE


def test_an_answer_to_the_authentication_request_by_its_id_is_refused(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("find", _search(), Say("found"))
    _, chat = _chat(host)
    sub = chat.subscribe()
    chat.send("find")
    opened = events_until(sub, lambda e: isinstance(e, RequestOpened))[-1]
    assert isinstance(opened, RequestOpened)
    assert opened.request.kind is RequestKind.AUTHENTICATION
    with pytest.raises(AgentHostError) as refused:
        chat.answer(opened.request.request_id, approved=True)
    assert refused.value.code is ErrorCode.INVALID_ARGUMENT
    assert REPO in refused.value.message


def test_cancelling_while_a_call_waits_for_a_token_ends_the_turn_once_and_the_call(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("find", _search(), Say("found"))
    session, chat = _chat(host)
    sub = chat.subscribe()
    turn = chat.send("find")
    _waiting(sub)
    assert chat.cancel() is True
    assert turn.result(timeout=WAIT_S).state is OutcomeState.CANCELLED
    call = _call(chat, ended=True)
    assert call.status is ToolCallStatus.CANCELLED  # type: ignore[attr-defined]
    assert session.state().input_requests == ()
    with pytest.raises(AgentHostError) as late:
        chat.authenticate(REPO, TOKEN)
    assert late.value.code is ErrorCode.NOT_FOUND


def test_a_crash_while_a_call_waits_for_a_token_abandons_the_turn_and_clears_the_wait(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("find", _search(crash_gate="die"), Say("found"))
    session, chat = _chat(host)
    sub = chat.subscribe()
    turn = chat.send("find")
    _waiting(sub)
    provider.open("die")
    outcome = turn.result(timeout=WAIT_S)
    assert outcome.state is OutcomeState.ERROR
    assert outcome.error is not None and outcome.error.code is ErrorCode.EXECUTION_ABANDONED
    call = _call(chat, ended=True)
    assert call.status is ToolCallStatus.CANCELLED  # type: ignore[attr-defined]
    assert session.state().input_requests == ()
    with pytest.raises(AgentHostError) as late:
        chat.authenticate(REPO, TOKEN)
    assert late.value.code is ErrorCode.NOT_FOUND
