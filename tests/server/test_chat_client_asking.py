"""`agenthost chat` with AHP 1.1's reasoning, confirmation options and input
requests, against an in-process AHP server: lines in, text out, and the
actions the client dispatches (the server wires their new fields)."""

import asyncio
import json
from typing import Any

from agenthost.actors import Host
from agenthost.messages.common import ConfirmationOption, ConfirmationOptionKind
from agenthost.messages.events import InputRequested, ReasoningDelta, ResponsePartAdded
from agenthost.messages.inputs import ChatInputRequest, InputOption, InputQuestion
from agenthost.messages.inputs import InputQuestionKind as Kind
from agenthost.messages.state import ReasoningPart
from agenthost.messages.wire import to_wire
from agenthost.providers.scripted import (
    AskUser,
    AuthToolCall,
    Reject,
    Say,
    ScriptedProvider,
    Think,
    ToolCall,
)
from agenthost.server.chat_client import ChatClient
from tests.server.ahp_client import Server
from tests.server.test_chat_client import Screen, chat_client, run

ONCE = ConfirmationOption(id="once", label="Allow once", kind=ConfirmationOptionKind.APPROVE)
ALWAYS = ConfirmationOption(id="always", label="Always", kind=ConfirmationOptionKind.APPROVE)
NO = ConfirmationOption(id="no", label="Deny", kind=ConfirmationOptionKind.DENY)


def dispatched(client: ChatClient) -> list[dict[str, Any]]:
    """What the client dispatches from now on (it is still sent)."""
    sent: list[dict[str, Any]] = []
    dispatch = client.dispatch

    async def spy(action: dict[str, Any], channel: str | None = None) -> None:
        sent.append(action)
        await dispatch(action, channel)

    client.dispatch = spy  # type: ignore[method-assign]
    return sent


def test_reasoning_streams_collapsed_and_thinking_shows_it(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("why", Think("Because it is."), Say("yes"), Think(" Really."))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            await client.create_session()
            await client.handle_line("why")
            await screen.shows(
                "you: why\n[thinking: 14 chars; /thinking shows it]\nassistant: yes\n"
                "[thinking: 8 chars; /thinking shows it]\n[turn complete]\n"
            )
            assert "Because" not in screen.text  # collapsed
            await client.handle_line("/thinking")
            await screen.shows("[thinking] Because it is.\n\n Really.\n")

    run(host, body)


def test_a_permission_lists_its_options_and_approve_takes_one(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("rm", ToolCall("rm", '{"p": 1}', options=(ONCE, ALWAYS, NO)), Say("done"))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            sent = dispatched(client)
            await client.create_session()
            await client.handle_line("rm")
            await screen.shows(
                '[permission] rm {"p": 1} (/approve OPTION or /deny: 1. Allow once,'
                " 2. Always, 3. Deny)\n"
            )
            assert screen.text.count("[permission]") == 1  # its AHP and x- forms: one prompt
            await client.handle_line("/approve sometimes")
            await screen.shows("[error] no option 'sometimes' (it offers: once, always, no)\n")
            await client.handle_line("/approve 2")
            await screen.shows("[turn complete]\n")
            confirmed = [a for a in sent if a["type"] == "chat/toolCallConfirmed"]
            assert [(a["approved"], a["selectedOptionId"]) for a in confirmed] == [(True, "always")]
            assert client.view.requests == []

    run(host, body)


def test_an_editable_call_is_approved_with_the_input_the_user_gave(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("write", ToolCall("write", '{"path": "a"}', editable=True), Say("done"))
    provider.on("read", ToolCall("read", "{}"), Say("read"))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            sent = dispatched(client)
            await client.create_session()
            await client.handle_line("write")
            await screen.shows(
                '[permission] write {"path": "a"}'
                " (/approve or /deny; /edit JSON changes its input)\n"
            )
            await client.handle_line("/edit not json")
            await screen.shows("[error] /edit JSON: the tool's input as a JSON object")
            await client.handle_line('/edit {"path": "b"}')
            await screen.shows("[turn complete]\n")
            [confirmed] = [a for a in sent if a["type"] == "chat/toolCallConfirmed"]
            assert (confirmed["approved"], confirmed["editedToolInput"]) == (True, '{"path": "b"}')
            assert provider.answers[-1].edited_input == '{"path": "b"}'
            await client.handle_line("read")
            await screen.shows("[permission] read")
            await client.handle_line('/edit {"x": 1}')
            await screen.shows("[error] this tool call takes no edited input: /approve or /deny\n")

    run(host, body)


def test_a_turn_stopped_at_a_resumable_error_is_resumed(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("busy", Say("so far"), Reject("overloaded", resumable=True))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            await client.create_session()
            await client.handle_line("/resume")
            await screen.shows("[error] no turn stopped at a resumable error\n")
            await client.handle_line("busy")
            await screen.shows("[turn error: overloaded; /resume runs it again]\n")
            provider.on("busy", Say(" and the rest"))
            await client.handle_line("/resume")
            await screen.shows("[resumed]\nassistant:  and the rest\n[turn complete]\n")
            assert client.view.resumable is None
        assert provider.prompts.count("busy") == 2

    run(host, body)


def test_a_deny_option_denies(host: Host, provider: ScriptedProvider) -> None:
    provider.on("rm", ToolCall("rm", options=(ONCE, NO)), Say("left"))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            sent = dispatched(client)
            await client.create_session()
            await client.handle_line("rm")
            await screen.shows("[permission] rm")
            await client.handle_line("/approve Deny")
            await screen.shows("[turn complete]\n")
            [confirmed] = [a for a in sent if a["type"] == "chat/toolCallConfirmed"]
            assert (confirmed["approved"], confirmed["selectedOptionId"]) == (False, "no")
            assert [a.approved for a in provider.answers] == [False]

    run(host, body)


def test_a_question_lists_its_choices_and_is_answered_by_number(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("ask", AskUser("Which file?", choices=("main.py", "util.py")), Say("ok"))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            sent = dispatched(client)
            await client.create_session()
            await client.handle_line("ask")
            await screen.shows(
                "[user_input] Which file? (/answer a choice or text: 1. main.py, 2. util.py)\n"
            )
            assert screen.text.count("[user_input]") == 1
            await client.handle_line("/answer 2")
            await screen.shows("[turn complete]\n")
            [completed] = [a for a in sent if a["type"] == "chat/inputCompleted"]
            assert completed["response"] == "accept"
            assert completed["answers"] == {
                "answer": {"state": "submitted", "value": {"kind": "selected", "value": "c2"}}
            }
            assert provider.model_inputs[-1] == "util.py"

    run(host, body)


def test_a_question_is_declined(host: Host, provider: ScriptedProvider) -> None:
    provider.on("ask", AskUser("Which file?"), Say("ok"))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            sent = dispatched(client)
            await client.create_session()
            await client.handle_line("ask")
            await screen.shows("[user_input] Which file? (/answer text)\n")
            await client.handle_line("/decline")
            [declined] = [a for a in sent if a["type"] == "chat/inputCompleted"]
            assert declined["response"] == "decline"

    run(host, body)


def test_the_ahp_forms_alone_are_prompts_too() -> None:
    """A server that sends only AHP's actions (no x-chat/requestOpened): the
    typed events as the wire carries them."""

    async def main() -> None:
        screen = Screen()
        client = _offline(screen)
        question = InputQuestion(
            id="db",
            kind=Kind.SINGLE_SELECT,
            message="Which one?",
            options=(InputOption(id="a", label="SQLite"), InputOption(id="b", label="Postgres")),
            allow_freeform_input=False,
        )
        name = InputQuestion(id="name", kind=Kind.TEXT, message="Its name?")
        for event in (
            ResponsePartAdded(turn_id="t", part=ReasoningPart(id="r")),
            ReasoningDelta(turn_id="t", part_id="r", content="hmm"),
            InputRequested(request=ChatInputRequest(id="q", questions=(question, name))),
        ):
            client._on_action({"channel": "chat", "action": _wire(event)})
        await screen.shows("[thinking: 3 chars; /thinking shows it]\n")
        await screen.shows(
            "[user_input] Which one? (/answer one answer each, separated by ';': Which one?:"
            " a choice: 1. SQLite, 2. Postgres; Its name?: text)\n"
        )
        sent = dispatched(client)
        client.ws = _Sink()  # type: ignore[assignment]
        await client.handle_line("/answer Postgres; shop")
        assert sent[0]["answers"] == {
            "db": {"state": "submitted", "value": {"kind": "selected", "value": "b"}},
            "name": {"state": "submitted", "value": {"kind": "text", "value": "shop"}},
        }

    asyncio.run(asyncio.wait_for(main(), 10))


class _Sink:
    async def send_json(self, data: Any) -> None:
        return None


def _offline(screen: Screen) -> ChatClient:
    """A client whose chat is open and whose turn "t" runs, reading nothing."""
    client = ChatClient.__new__(ChatClient)
    ChatClient.__init__(client, _Idle(), screen.write)  # type: ignore[arg-type]
    client.chat = "chat"
    client.view.active_turn = "t"
    return client


class _Idle:
    """A WebSocket that never brings anything."""

    def __aiter__(self) -> "_Idle":
        return self

    async def __anext__(self) -> Any:
        await asyncio.Event().wait()


def _wire(event: Any) -> dict[str, Any]:
    return {"type": event.wire_type, **json.loads(json.dumps(to_wire(event)))}


def test_a_tool_call_waiting_for_authorization_names_its_resource_and_authorize_gives_the_token(
    host: Host, provider: ScriptedProvider
) -> None:
    secret = "repo-token-41b8"
    search = AuthToolCall(
        "search", "https://mcp.example.com", scopes=("repo:read",), accepts=secret
    )
    provider.on("find", search, Say("found"))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            await client.create_session()
            await client.handle_line("/authorize early")
            await screen.shows("[error] nothing waits for a token\n")
            await client.handle_line("find")
            await screen.shows(
                "[authentication] a tool call needs authorization for https://mcp.example.com"
                " (/authorize TOKEN: a token for https://mcp.example.com with scopes repo:read)\n"
            )
            assert screen.text.count("[authentication]") == 1  # its AHP and x- forms: one prompt
            await client.handle_line("/authorize")
            await screen.shows("[error] /authorize TOKEN\n")
            await client.handle_line(f"/authorize {secret}")
            await screen.shows("[turn complete]\n")
            assert client.view.requests == []
            assert secret not in screen.text
        assert [a.token is not None for a in provider.answers] == [True]

    run(host, body)


def test_another_clients_draft_answer_is_shown_and_its_own_is_not(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("ask", AskUser("Which file?"), Say("ok"))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen), server.client() as other:
            await client.create_session()
            await client.handle_line("ask")
            await screen.shows("[user_input] Which file? (/answer text)\n")
            assert client.chat is not None and client.view.requests
            request_id = client.view.requests[0].id
            await other.initialize(client_id="tablet")
            await other.call("subscribe", {"channel": client.chat})
            draft = {"state": "draft", "value": {"kind": "text", "value": "main.py"}}
            change = {"type": "chat/inputAnswerChanged", "requestId": request_id}
            await other.dispatch(client.chat, {**change, "questionId": "answer", "answer": draft})
            await screen.shows("[another client's draft] Which file?: main.py\n")
            await other.dispatch(client.chat, {**change, "questionId": "answer"})
            await screen.shows("[another client cleared its draft] Which file?\n")
            await client.dispatch({**change, "questionId": "answer", "answer": draft})
            await client.handle_line("/answer util.py")
            await screen.shows("[turn complete]\n")
            assert screen.text.count("[another client") == 2  # its own draft: no line
            assert provider.model_inputs[-1] == "util.py"

    run(host, body)
