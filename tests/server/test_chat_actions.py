"""AHP 1.1's client-dispatched chat actions over a live server, end to end:
the dispatch reaches the host and the scripted provider, and the host's answer
goes back on the wire with the dispatch's origin."""

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from agenthost.actors import Host
from agenthost.messages.common import ConfirmationOption, ConfirmationOptionKind
from agenthost.messages.state import ClientTool
from agenthost.providers.scripted import (
    AskUser,
    ClientToolCall,
    Reject,
    Say,
    ScriptedProvider,
    Think,
    ToolCall,
)
from tests.server.ahp_client import AhpClient, Server, action_of, fetched_turns, running

OPTIONS = (
    ConfirmationOption(id="once", label="Allow once", kind=ConfirmationOptionKind.APPROVE),
    ConfirmationOption(id="always", label="Allow always", kind=ConfirmationOptionKind.APPROVE),
    ConfirmationOption(id="never", label="Deny", kind=ConfirmationOptionKind.DENY),
)


def run(host: Host, body: Callable[[Server], Awaitable[None]]) -> None:
    async def main() -> None:
        async with running(host) as server:
            await body(server)

    asyncio.run(main())


async def followed_chat(client: AhpClient, client_id: str = "c1") -> str:
    await client.initialize(client_id=client_id)
    created = await client.call("createSession", {"channel": f"ahp-session:/{uuid.uuid4()}"})
    chat: str = created["state"]["defaultChat"]
    await client.call("subscribe", {"channel": chat})
    return chat


def turn(text: str, turn_id: str) -> dict[str, Any]:
    return {"type": "chat/turnStarted", "turnId": turn_id, "message": {"text": text}}


def by_origin(client_seq: int, client_id: str | None = None) -> Callable[[dict[str, Any]], bool]:
    """The envelope answering a dispatch (of `client_id`, where clients' seqs may meet)."""

    def match(n: dict[str, Any]) -> bool:
        origin = n.get("params", {}).get("origin", {})
        return origin.get("clientSeq") == client_seq and client_id in (None, origin.get("clientId"))

    return match


async def tool_call_ready(client: AhpClient, chat: str, text: str) -> dict[str, Any]:
    await client.dispatch(chat, turn(text, "t1"))
    ready: dict[str, Any] = (await client.wait_for(action_of("chat/toolCallReady")))["params"]
    return ready["action"]


def confirm(ready: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "type": "chat/toolCallConfirmed",
        "turnId": ready["turnId"],
        "toolCallId": ready["toolCallId"],
        **fields,
    }


def approve(ready: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return confirm(ready, approved=True, **fields)


def test_a_tool_call_offers_its_options_and_runs_with_the_chosen_one_and_the_edited_input(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on(
        "edit", ToolCall("edit", '{"path": "a"}', options=OPTIONS, editable=True), Say("ok")
    )

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            ready = await tool_call_ready(client, chat, "edit")
            assert [o["id"] for o in ready["options"]] == ["once", "always", "never"]
            assert ready["options"][2]["kind"] == "deny"
            assert ready["editable"] is True and json.loads(ready["toolInput"]) == {"path": "a"}
            assert "confirmed" not in ready  # it waits for the user
            edited = '{"path": "b"}'
            seq = await client.dispatch(
                chat,
                confirm(ready, approved=True, selectedOptionId="always", editedToolInput=edited),
            )
            confirmed = (await client.wait_for(by_origin(seq)))["params"]
            assert "rejectionReason" not in confirmed and "serverSeq" in confirmed
            assert confirmed["action"]["type"] == "chat/toolCallConfirmed"
            assert confirmed["action"]["selectedOptionId"] == "always"
            assert confirmed["action"]["editedToolInput"] == edited
            assert confirmed["origin"] == {"clientId": "c1", "clientSeq": seq}
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
        answer = provider.answers[-1]
        assert (answer.approved, answer.option, answer.edited_input) == (True, "always", edited)

    run(host, body)


def test_a_deny_option_denies_the_call_and_the_tool_never_runs(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("edit", ToolCall("edit", "{}", options=OPTIONS), Say("ok"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            ready = await tool_call_ready(client, chat, "edit")
            seq = await client.dispatch(
                chat, confirm(ready, approved=False, selectedOptionId="never")
            )
            confirmed = (await client.wait_for(by_origin(seq)))["params"]
            assert confirmed["action"]["approved"] is False
            assert confirmed["action"]["selectedOptionId"] == "never"
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
            types = [a["action"]["type"] for a in client.actions(chat)]
            assert "chat/toolCallComplete" not in types
        assert (provider.answers[-1].approved, provider.answers[-1].option) == (False, "never")

    run(host, body)


def test_a_denials_reason_and_words_reach_the_state_the_wire_and_the_provider(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("edit", ToolCall("edit", "{}", options=OPTIONS), Say("ok"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            ready = await tool_call_ready(client, chat, "edit")
            words = {"markdown": "not **that** file"}
            seq = await client.dispatch(
                chat, confirm(ready, approved=False, reason="skipped", reasonMessage=words)
            )
            confirmed = (await client.wait_for(by_origin(seq)))["params"]["action"]
            assert (confirmed["reason"], confirmed["reasonMessage"]) == ("skipped", words)
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
            snapshot = (await client.call("subscribe", {"channel": chat}))["snapshot"]
            [part] = [
                p
                for p in snapshot["state"]["turns"][-1]["responseParts"]
                if p["kind"] == "toolCall"
            ]
            call = part["toolCall"]
            assert (call["status"], call["reason"], call["reasonMessage"]) == (
                "cancelled",
                "skipped",
                words,
            )
        answer = provider.answers[-1]
        assert (answer.approved, answer.reason, answer.reason_message) == (
            False,
            "skipped",
            "not **that** file",
        )

    run(host, body)


def test_a_denial_without_a_reason_is_denied_and_an_approval_carries_none(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("edit", ToolCall("edit", "{}"), Say("ok"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            ready = await tool_call_ready(client, chat, "edit")
            seq = await client.dispatch(chat, approve(ready, reason="skipped"))
            confirmed = (await client.wait_for(by_origin(seq)))["params"]["action"]
            assert confirmed["approved"] is True and "reason" not in confirmed
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
            await client.dispatch(chat, turn("edit", "t2"))
            again = (await client.wait_for(action_of("chat/toolCallReady", turnId="t2")))["params"]
            seq = await client.dispatch(chat, confirm(again["action"], approved=False))
            denied = (await client.wait_for(by_origin(seq)))["params"]["action"]
            assert denied["reason"] == "denied" and "reasonMessage" not in denied
            await client.wait_for(action_of("chat/turnComplete", turnId="t2"))
        first, second = provider.answers[-2:]
        assert (first.reason, second.reason, second.reason_message) == (None, "denied", None)

    run(host, body)


def test_an_option_the_call_does_not_offer_or_that_contradicts_approved_is_refused(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("edit", ToolCall("edit", "{}", options=OPTIONS), Say("ok"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            ready = await tool_call_ready(client, chat, "edit")
            unknown = await client.dispatch(
                chat, confirm(ready, approved=True, selectedOptionId="x")
            )
            refused = (await client.wait_for(by_origin(unknown)))["params"]
            assert "offers no option 'x'" in refused["rejectionReason"]
            assert "serverSeq" not in refused
            wrong = await client.dispatch(chat, approve(ready, selectedOptionId="never"))
            refused = (await client.wait_for(by_origin(wrong)))["params"]
            assert "does not approve" in refused["rejectionReason"]
            edited = await client.dispatch(
                chat, confirm(ready, approved=True, editedToolInput="{}")
            )
            refused = (await client.wait_for(by_origin(edited)))["params"]
            assert "takes no edited tool input" in refused["rejectionReason"]
            seq = await client.dispatch(
                chat, confirm(ready, approved=True, selectedOptionId="once")
            )
            await client.wait_for(by_origin(seq))
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
        assert [a.option for a in provider.answers] == ["once"]

    run(host, body)


async def client_tool_running(
    host: Host, client: AhpClient, text: str, client_id: str = "browser"
) -> tuple[str, str]:
    """A chat whose turn calls the tool `fetch`, which `client` executes: the chat
    and the call's id, once the call runs."""
    await client.initialize(client_id=client_id)
    uri = f"ahp-session:/{uuid.uuid4()}"
    chat = (await client.call("createSession", {"channel": uri}))["state"]["defaultChat"]
    await client.call("subscribe", {"channel": chat})
    session = await asyncio.to_thread(host.open_session, uri.removeprefix("ahp-session:/"))
    await asyncio.to_thread(session.set_client_tools, client_id, [ClientTool(name="fetch")])
    await client.dispatch(chat, turn(text, "t1"))
    ready = await client.wait_for(action_of("chat/toolCallReady", confirmed="not-needed"))
    return chat, ready["params"]["action"]["toolCallId"]


def completion(call_id: str, text: str, **fields: Any) -> dict[str, Any]:
    result = {"success": True, "content": [{"type": "text", "text": text}]}
    return {
        "type": "chat/toolCallComplete",
        "turnId": "t1",
        "toolCallId": call_id,
        "result": result,
        **fields,
    }


def test_the_tools_client_reports_its_content_and_nobody_else_may(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("fetch it", ClientToolCall("fetch", "{}"), Say("done"))
    content = [{"type": "text", "text": "halfway"}]

    async def body(server: Server) -> None:
        async with server.client() as browser, server.client() as other:
            chat, call_id = await client_tool_running(host, browser, "fetch it")
            await other.initialize(client_id="other")
            await other.call("subscribe", {"channel": chat})
            changed = {
                "type": "chat/toolCallContentChanged",
                "turnId": "t1",
                "toolCallId": call_id,
                "content": content,
            }
            foreign = await other.dispatch(chat, changed)
            refused = (await other.wait_for(by_origin(foreign, "other")))["params"]
            assert "only the client that executes 'fetch'" in refused["rejectionReason"]
            seq = await browser.dispatch(chat, changed)
            accepted = (await browser.wait_for(by_origin(seq, "browser")))["params"]
            assert "rejectionReason" not in accepted and accepted["action"]["content"] == content
            changed_kind = action_of("chat/toolCallContentChanged")
            seen = await other.wait_for(lambda n: changed_kind(n) and "serverSeq" in n["params"])
            assert seen["params"]["origin"] == {"clientId": "browser", "clientSeq": seq}
            snapshot = (await other.call("subscribe", {"channel": chat}))["snapshot"]
            parts = snapshot["state"]["activeTurn"]["responseParts"]
            call = next(p["toolCall"] for p in parts if p["kind"] == "toolCall")
            assert call["status"] == "running" and call["content"] == content
            await browser.dispatch(chat, completion(call_id, "all of it"))
            await browser.wait_for(action_of("chat/turnComplete", turnId="t1"))
        assert provider.answers[-1].result == "all of it"

    run(host, body)


def test_a_result_that_asks_for_confirmation_reaches_the_model_only_once_approved(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("fetch it", ClientToolCall("fetch", "{}"), Say("done"))

    async def body(server: Server) -> None:
        async with server.client() as browser:
            chat, call_id = await client_tool_running(host, browser, "fetch it")
            held = completion(call_id, "secret page", requiresResultConfirmation=True)
            seq = await browser.dispatch(chat, held)
            done = (await browser.wait_for(by_origin(seq)))["params"]
            assert done["action"]["requiresResultConfirmation"] is True
            assert provider.answers == []  # the model waits for the user's word
            snapshot = (await browser.call("subscribe", {"channel": chat}))["snapshot"]
            parts = snapshot["state"]["activeTurn"]["responseParts"]
            call = next(p["toolCall"] for p in parts if p["kind"] == "toolCall")
            assert call["status"] == "pending-result-confirmation"
            again = await browser.dispatch(chat, completion(call_id, "other"))
            refused = (await browser.wait_for(by_origin(again)))["params"]
            assert "waits for the user's confirmation" in refused["rejectionReason"]
            confirmed = {
                "type": "chat/toolCallResultConfirmed",
                "turnId": "t1",
                "toolCallId": call_id,
                "approved": True,
            }
            seq = await browser.dispatch(chat, confirmed)
            answered = (await browser.wait_for(by_origin(seq)))["params"]
            assert "rejectionReason" not in answered and "serverSeq" in answered
            await browser.wait_for(action_of("chat/turnComplete", turnId="t1"))
            completes = [
                a
                for a in browser.actions(chat)
                if a["action"]["type"] == "chat/toolCallComplete" and "serverSeq" in a
            ]
            assert len(completes) == 1  # the provider's own completion is not sent again
            late = await browser.dispatch(chat, confirmed)
            refused = (await browser.wait_for(by_origin(late)))["params"]
            assert "no result waiting for confirmation" in refused["rejectionReason"]
        assert [a.result for a in provider.answers] == ["secret page"]

    run(host, body)


def test_a_denied_result_never_reaches_the_model(host: Host, provider: ScriptedProvider) -> None:
    provider.on("fetch it", ClientToolCall("fetch", "{}"), Say("done"))

    async def body(server: Server) -> None:
        async with server.client() as browser:
            chat, call_id = await client_tool_running(host, browser, "fetch it")
            await browser.dispatch(
                chat, completion(call_id, "secret", requiresResultConfirmation=True)
            )
            await browser.wait_for(action_of("chat/toolCallComplete"))
            denied = {
                "type": "chat/toolCallResultConfirmed",
                "turnId": "t1",
                "toolCallId": call_id,
                "approved": False,
            }
            await browser.dispatch(chat, denied)
            await browser.wait_for(action_of("chat/turnComplete", turnId="t1"))
            turns = await fetched_turns(browser, chat)
            call = next(
                p["toolCall"] for p in turns[-1]["responseParts"] if p["kind"] == "toolCall"
            )
            assert call["status"] == "cancelled" and call["reason"] == "result-denied"
        answer = provider.answers[-1]
        assert answer.result is None and "did not let the tool's result" in (answer.error or "")

    run(host, body)


# -- input requests ----------------------------------------------------------------------
COLOUR = AskUser("Which colour?", choices=("red", "blue"), freeform=False)


async def input_requested(client: AhpClient, chat: str, text: str) -> dict[str, Any]:
    await client.dispatch(chat, turn(text, "t1"))
    asked = await client.wait_for(action_of("chat/inputRequested"))
    request: dict[str, Any] = asked["params"]["action"]["request"]
    return request


def selected(option_id: str, state: str = "submitted") -> dict[str, Any]:
    return {"state": state, "value": {"kind": "selected", "value": option_id}}


def test_a_question_goes_out_as_an_input_request_and_never_as_the_extension(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("ask", COLOUR, Say("ok"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            request = await input_requested(client, chat, "ask")
            question = request["questions"][0]
            assert question["kind"] == "single-select" and question["message"] == "Which colour?"
            assert [o["label"] for o in question["options"]] == ["red", "blue"]
            completed = {
                "type": "chat/inputCompleted",
                "requestId": request["id"],
                "response": "accept",
                "answers": {question["id"]: selected("c2")},
            }
            seq = await client.dispatch(chat, completed)
            done = (await client.wait_for(by_origin(seq)))["params"]
            assert "rejectionReason" not in done and done["action"]["response"] == "accept"
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
            types = {a["action"]["type"] for a in client.actions(chat)}
            assert not types & {"x-chat/requestOpened", "x-chat/requestClosed"}
        assert provider.model_inputs[-1] == "blue"

    run(host, body)


def test_a_draft_answer_is_synced_to_other_clients_and_counts_when_the_request_is_accepted(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("ask", COLOUR, Say("ok"))

    async def body(server: Server) -> None:
        async with server.client() as one, server.client() as two:
            chat = await followed_chat(one, "one")
            await two.initialize(client_id="two")
            await two.call("subscribe", {"channel": chat})
            request = await input_requested(one, chat, "ask")
            question_id = request["questions"][0]["id"]
            changed = {
                "type": "chat/inputAnswerChanged",
                "requestId": request["id"],
                "questionId": question_id,
                "answer": selected("c1", "draft"),
            }
            seq = await one.dispatch(chat, changed)
            synced = (await two.wait_for(by_origin(seq, "one")))["params"]
            assert synced["origin"]["clientId"] == "one"
            assert synced["action"]["answer"]["state"] == "draft"
            snapshot = (await two.call("subscribe", {"channel": chat}))["snapshot"]
            [held] = snapshot["state"]["inputRequests"]
            assert held["answers"] == {question_id: selected("c1", "draft")}
            cleared = {k: v for k, v in changed.items() if k != "answer"}
            seq = await two.dispatch(chat, cleared)
            await one.wait_for(by_origin(seq, "two"))
            snapshot = (await one.call("subscribe", {"channel": chat}))["snapshot"]
            assert "answers" not in snapshot["state"]["inputRequests"][0]
            stranger = await one.dispatch(chat, {**changed, "questionId": "nope"})
            refused = (await one.wait_for(by_origin(stranger, "one")))["params"]
            assert "asks no question 'nope'" in refused["rejectionReason"]
            await two.dispatch(chat, {**changed, "answer": selected("c2")})
            accept = {
                "type": "chat/inputCompleted",
                "requestId": request["id"],
                "response": "accept",
            }
            seq = await one.dispatch(chat, accept)
            done = (await one.wait_for(by_origin(seq, "one")))["params"]
            assert "rejectionReason" not in done
            assert done["action"]["answers"][question_id]["value"]["value"] == "c2"
            await one.wait_for(action_of("chat/turnComplete", turnId="t1"))
            late = await one.dispatch(chat, changed)
            refused = (await one.wait_for(by_origin(late, "one")))["params"]
            assert "is not open" in refused["rejectionReason"]
        assert provider.model_inputs[-1] == "blue"

    run(host, body)


async def nth_input_request(client: AhpClient, count: int) -> dict[str, Any]:
    asked = action_of("chat/inputRequested")
    await client.wait_until(lambda: sum(map(asked, client.notifications)) == count)
    return [n for n in client.notifications if asked(n)][-1]


def test_a_declined_or_cancelled_request_tells_the_provider_which(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("ask", COLOUR, Say("ok"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            for count, (turn_id, response) in enumerate((("t1", "decline"), ("t2", "cancel")), 1):
                await client.dispatch(chat, turn("ask", turn_id))
                requested = await nth_input_request(client, count)
                request_id = requested["params"]["action"]["request"]["id"]
                seq = await client.dispatch(
                    chat,
                    {"type": "chat/inputCompleted", "requestId": request_id, "response": response},
                )
                done = (await client.wait_for(by_origin(seq)))["params"]
                assert done["action"]["response"] == response and "serverSeq" in done
                await client.wait_for(action_of("chat/turnComplete", turnId=turn_id))
        errors = [a.error for a in provider.answers]
        assert errors == [
            "The user declined to answer.",
            "The user dismissed the question without answering.",
        ]

    run(host, body)


# -- reasoning ---------------------------------------------------------------------------
def test_streamed_reasoning_goes_out_as_chat_reasoning_in_a_part_of_its_own(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("think", Think("first "), Think("then"), Say("answer"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            await client.dispatch(chat, turn("think", "t1"))
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
            actions = [a["action"] for a in client.actions(chat)]
            [part] = [a["part"] for a in actions if a["type"] == "chat/responsePart"][:1]
            assert part["kind"] == "reasoning"
            reasoning = [a for a in actions if a["type"] == "chat/reasoning"]
            assert "".join(a["content"] for a in reasoning) == "first then"
            assert {a["partId"] for a in reasoning} == {part["id"]}
            deltas = [a for a in actions if a["type"] == "chat/delta"]
            assert deltas and part["id"] not in {a["partId"] for a in deltas}
            [ended] = await fetched_turns(client, chat)
            kinds = [(p["kind"], p.get("content")) for p in ended["responseParts"]]
            assert kinds == [("reasoning", "first then"), ("markdown", "answer")]

    run(host, body)


# -- resume ------------------------------------------------------------------------------
def resume(turn_id: str) -> dict[str, Any]:
    return {"type": "chat/turnResume", "turnId": turn_id}


def test_a_turn_stopped_at_a_resumable_error_runs_again_on_the_provider(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("go", Say("half "), Reject("overloaded, try again", resumable=True))

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            await client.dispatch(chat, turn("go", "t1"))
            failed = await client.wait_for(action_of("chat/error", turnId="t1"))
            assert failed["params"]["action"]["error"]["resumable"] is True
            provider.on("go", Say("and the rest"))  # the backend is back
            seq = await client.dispatch(chat, resume("t1"))
            resumed = (await client.wait_for(by_origin(seq)))["params"]
            assert (
                "rejectionReason" not in resumed and resumed["action"]["type"] == "chat/turnResume"
            )
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
            [ended] = await fetched_turns(client, chat)
            assert ended["id"] == "t1" and ended["state"] == "complete"
            markdown = [p for p in ended["responseParts"] if p["kind"] == "markdown"]
            assert [p["content"] for p in markdown] == ["half ", "and the rest"]
            assert len({p["id"] for p in ended["responseParts"]}) == len(ended["responseParts"])
        assert provider.prompts.count("go") == 2

    run(host, body)


def test_a_resume_is_refused_saying_why(host: Host, provider: ScriptedProvider) -> None:
    provider.on("fail", Reject("broken for good"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            chat = await followed_chat(client)
            await client.dispatch(chat, turn("hello", "t1"))
            await client.wait_for(action_of("chat/turnComplete", turnId="t1"))
            reasons = []
            await client.dispatch(chat, turn("fail", "t2"))
            await client.wait_for(action_of("chat/error", turnId="t2"))
            for turn_id in ("t2", "t1", "t9"):
                seq = await client.dispatch(chat, resume(turn_id))
                reasons.append((await client.wait_for(by_origin(seq)))["params"]["rejectionReason"])
            assert reasons == [
                "cannot resume: turn t2 did not stop at a resumable error (error)",
                "cannot resume: turn t1 is not the latest turn",
                "cannot resume: no turn t9",
            ]
        assert provider.prompts.count("fail") == 1

    run(host, body)


# -- a chat's read and archived flags ----------------------------------------------------
READ, ARCHIVED = 32, 64


def test_a_chat_is_marked_unread_and_archived_and_every_client_of_1_x_hears_it(
    host: Host,
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as one, server.client() as two, server.client() as old:
            chat = await followed_chat(one, "one")
            await two.initialize(client_id="two")
            await two.call("subscribe", {"channel": chat})
            await old.call(
                "initialize",
                {"channel": "ahp-root://", "protocolVersions": ["0.5.0"], "clientId": "old"},
            )
            await old.call("subscribe", {"channel": chat})
            unread = await one.dispatch(chat, {"type": "chat/isReadChanged", "isRead": False})
            seen = (await two.wait_for(by_origin(unread, "one")))["params"]
            assert seen["action"] == {"type": "chat/isReadChanged", "isRead": False}
            assert seen["origin"] == {"clientId": "one", "clientSeq": unread}
            archived = await one.dispatch(
                chat, {"type": "chat/isArchivedChanged", "isArchived": True}
            )
            await two.wait_for(by_origin(archived, "one"))
            status = (await two.call("subscribe", {"channel": chat}))["snapshot"]["state"]["status"]
            assert status & READ == 0 and status & ARCHIVED == ARCHIVED
            await one.dispatch(chat, turn("hello", "t1"))  # after the flags, in order
            await old.wait_for(action_of("chat/turnComplete", turnId="t1"))
            kinds = {a["action"]["type"] for a in old.actions(chat)}
            assert not kinds & {"chat/isReadChanged", "chat/isArchivedChanged"}  # from 0.9.0 on
            read = await two.dispatch(chat, {"type": "chat/isReadChanged", "isRead": True})
            await one.wait_for(by_origin(read, "two"))
            status = (await one.call("subscribe", {"channel": chat}))["snapshot"]["state"]["status"]
            assert status & READ == READ

    run(host, body)


# -- windowed delivery -------------------------------------------------------------------
def test_a_windowed_subscriber_gets_a_question_as_an_input_request_only(
    host: Host, provider: ScriptedProvider
) -> None:
    from tests.server.test_windows import actions_in, receive, settled

    provider.on("ask", COLOUR, Say("ok"))

    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            uri = f"ahp-session:/{uuid.uuid4()}"
            chat = (await client.call("createSession", {"channel": uri}))["state"]["defaultChat"]
            await client.call("subscribe", {"channel": chat, "flowControl": receive()})
            await client.wait_for(lambda n: n.get("method") == "channel/ready")
            await client.dispatch(chat, turn("ask", "t1"))
            await client.wait_until(
                lambda: any(
                    a["action"]["type"] == "chat/inputRequested" for a in actions_in(client, chat)
                )
            )
            await settled(client)
            types = [a["action"]["type"] for a in actions_in(client, chat)]
            assert "chat/inputRequested" in types and "x-chat/requestOpened" not in types

    run(host, body)
