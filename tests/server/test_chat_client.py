"""`agenthost chat`'s logic against an in-process AHP server: lines in, text out.

The client is fed lines as a user would type them; the test waits (with a
timeout) until the text it expects has been printed, never for a time.
"""

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from agenthost.actors import Host
from agenthost.providers.scripted import AskUser, Gate, Reject, Say, ScriptedProvider, ToolCall
from agenthost.server.chat_client import ChatClient
from agenthost.server.chat_terminal import ChatAddress, Terminal, chat_address, run_chat
from tests.server.ahp_client import (
    OTHER_TOKEN,
    TOKEN,
    WAIT_S,
    AhpClient,
    Server,
    action_of,
    running,
)


class Screen:
    """What the client printed; `shows` waits for text after what was already seen."""

    def __init__(self) -> None:
        self.text = ""
        self.seen = 0
        self._changed = asyncio.Event()

    def write(self, text: str) -> None:
        self.text += text
        self._changed.set()

    async def shows(self, needle: str) -> str:
        """Wait until `needle` is printed after the last match; return what came between."""

        async def found() -> str:
            while (at := self.text.find(needle, self.seen)) < 0:
                self._changed.clear()
                await self._changed.wait()
            between = self.text[self.seen : at]
            self.seen = at + len(needle)
            return between

        try:
            return await asyncio.wait_for(found(), WAIT_S)
        except TimeoutError:
            raise AssertionError(
                f"{needle!r} never printed after:\n{self.text[self.seen :]}"
            ) from None


@asynccontextmanager
async def chat_client(
    server: Server, token: str = TOKEN
) -> AsyncIterator[tuple[ChatClient, Screen]]:
    screen = Screen()
    ws = await server.http.ws_connect(
        server.url.replace("http", "ws", 1) + "ahp", headers={"Authorization": f"Bearer {token}"}
    )
    client = ChatClient(ws, screen.write)
    try:
        assert await client.initialize() == "1.1.0"
        yield client, screen
    finally:
        await client.close()


def run(host: Host, body: Callable[[Server], Awaitable[None]]) -> None:
    async def main() -> None:
        async with running(host) as server:
            await body(server)

    asyncio.run(main())


def test_chat_streams_the_reply_and_queues_steers_and_removes(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("long", Say("first half"), Gate("g"), Say(" second half"))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            await client.create_session()
            await screen.shows("[session ")
            await client.handle_line("hello")
            await screen.shows("you: hello\nassistant: echo: hello\n[turn complete]\n")

            await client.handle_line("long")
            await asyncio.to_thread(provider.wait_reached, "g", 10)
            # streamed: printed while the provider still holds the turn open
            await screen.shows("you: long\nassistant: first half")
            await client.handle_line("later")  # a turn runs: queued
            await screen.shows("[queued] later\n")
            await client.handle_line("/steer faster")
            await screen.shows("[steering] faster\n")
            await client.handle_line("/queue")
            await screen.shows("1. [steering] faster\n2. [queued] later\n")
            await client.handle_line("/remove 2")
            await screen.shows("[removed] later\n")
            await client.handle_line("/queue")
            listed = await screen.shows("[steering] faster\n")
            assert listed.endswith("1. ") and "later" not in screen.text[screen.seen :]

            await asyncio.to_thread(provider.open, "g")
            await screen.shows("[turn complete]\n")  # the long turn
            # the steering, as its own turn here (the copilot shape)
            await screen.shows("[steering taken: it runs as the next turn] faster\nyou: faster\n")
            await screen.shows("[turn complete]\n")
            assert "later" not in provider.prompts
            assert client.view.pending == []

    run(host, body)


def test_chat_cancels_the_running_turn(host: Host, provider: ScriptedProvider) -> None:
    provider.on("long", Say("a"), Gate("g"), Say("b"))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            await client.create_session()
            await client.handle_line("/cancel")
            await screen.shows("[error] no turn is running\n")
            await client.handle_line("long")
            await asyncio.to_thread(provider.wait_reached, "g", 10)
            await screen.shows("assistant: a")
            await client.handle_line("/cancel")
            await screen.shows("[turn cancelled]\n")
            assert client.view.active_turn is None

    run(host, body)


def test_chat_says_why_a_turn_failed(host: Host, provider: ScriptedProvider) -> None:
    provider.on("boom", Say("partial"), Reject("the model is unavailable"))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            await client.create_session()
            await client.handle_line("boom")
            await screen.shows("assistant: partial\n[turn error: ")
            await screen.shows("the model is unavailable")
            assert client.view.active_turn is None

    run(host, body)


def test_chat_lists_and_opens_sessions(host: Host) -> None:
    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            first = (await client.create_session()).removeprefix("ahp-session:/")
            await client.handle_line("in the first")
            await screen.shows("[turn complete]\n")
            second = (await client.create_session()).removeprefix("ahp-session:/")
            mark = len(screen.text)
            await client.handle_line("/sessions")  # printed by the time it returns
            listed = screen.text[mark:].splitlines()
            assert sorted(line[: 2 + len(first)] for line in listed) == [
                f"  {first}",
                f"* {second}",
            ]
            assert f"* {second}  idle  0 turns  (untitled)" in listed
            await client.handle_line(f"/open {first[:8]}")
            await screen.shows(f"[session {first} (in the first): 1 turn, nothing pending]\n")
            assert client.session == f"ahp-session:/{first}"
            await client.handle_line("/open no-such-session")
            await screen.shows(
                "[error] /open no-such-session: no session of yours has this id or starts with"
                " it (/sessions lists them)\n"
            )
        async with chat_client(server, OTHER_TOKEN) as (client, screen):
            await client.handle_line(f"/open {first}")  # another identity: not found
            await screen.shows(f"[error] /open {first}: no session of yours has this id")
            assert client.session is None

    run(host, body)


def test_chat_shows_why_a_steering_removal_was_refused(
    start_host: Callable[..., Host],
) -> None:
    provider = ScriptedProvider(shape="claude")  # cannot withdraw steering it holds
    provider.on("long", Say("a"), Gate("g"), Say("b"))
    host = start_host(provider)

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            await client.create_session()
            await client.handle_line("long")
            await asyncio.to_thread(provider.wait_reached, "g", 10)
            await screen.shows("you: long\nassistant: a")  # the client saw the turn start
            await client.handle_line("/steer stop")
            await screen.shows("[steering] stop\n")
            await asyncio.to_thread(provider.wait_steered, 1, 10)
            await client.handle_line("/remove 1")
            await screen.shows("[refused] chat/pendingMessageRemoved: ")
            assert [p.text for p in client.view.pending] == ["stop"]
            await asyncio.to_thread(provider.open, "g")
            # the claude shape folds it into the running turn, and says so
            await screen.shows("[steering folded into the running turn] stop\n")
            await screen.shows("[turn complete]\n")
            assert client.view.pending == []

    run(host, body)


def test_chat_answers_a_permission_prompt(host: Host, provider: ScriptedProvider) -> None:
    provider.on("tool", ToolCall("shell", '{"cmd": "ls"}'), Say("ran it"))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            await client.create_session()
            await client.handle_line("tool")
            await screen.shows('[permission] shell {"cmd": "ls"} (/approve or /deny)\n')
            await client.handle_line("/approve")
            await screen.shows("ran it\n[turn complete]\n")
            assert [a.approved for a in provider.answers] == [True]

    run(host, body)


def test_chat_answers_the_model_s_question(host: Host, provider: ScriptedProvider) -> None:
    provider.on("ask", AskUser("which file?"), Say("thanks"))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            await client.create_session()
            await client.handle_line("ask")
            await screen.shows("[user_input] which file? (/answer text)\n")
            await client.handle_line("/answer notes.txt")
            await screen.shows("thanks\n[turn complete]\n")
            assert [a.answer for a in provider.answers] == ["notes.txt"]

    run(host, body)


def test_chat_explains_mistakes_without_sending_anything(host: Host) -> None:
    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            await client.handle_line("hello")
            await screen.shows("[error] no session is open: /new or /open ID\n")
            await client.handle_line("/new")
            await screen.shows("[session ")
            for line, answer in (
                ("/remove 3", "[error] nothing is pending to remove\n"),
                ("/steer now", "[error] no turn is running: type the text to send it\n"),
                ("/approve", "[error] no permission prompt is open\n"),
                ("/open", "[error] /open ID: give a session's id or the start of it"),
            ):
                await client.handle_line(line)
                await screen.shows(answer)
            assert await client.handle_line("/quit") is False

    run(host, body)


def test_rename_and_any_other_slash_command_go_to_the_host(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("long", Say("a"), Gate("g"), Say("b"))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            await client.handle_line("/help")
            await screen.shows("/rename title name this session (the host's command)\n")
            await client.create_session()
            await client.handle_line("/rename Q3 report")
            await screen.shows("[renamed: Q3 report]\n")
            (listed,) = host.list_sessions()  # the store's listing may lag: ask the session
            assert host.open_session(listed.id).summary().title == "Q3 report"
            await client.handle_line("long")
            await asyncio.to_thread(provider.wait_reached, "g", 10)
            await client.handle_line("/rename while it runs")  # the host queues it, as a send
            await screen.shows("[queued] /rename while it runs\n")
            await asyncio.to_thread(provider.open, "g")
            await screen.shows("[turn complete]\n")
            # its turn came: handled by the host, with no turn for it
            await screen.shows("[taken from the queue] /rename while it runs\n")
            await screen.shows("[renamed: while it runs]\n")
            assert client.view.pending == [] and client.view.active_turn is None
            await client.handle_line("/frobnicate")  # not the host's either: the model's
            await screen.shows("you: /frobnicate\nassistant: echo: /frobnicate\n")
            assert "/rename Q3 report" not in provider.prompts

    run(host, body)


def test_customize_lists_the_sessions_customizations_and_turns_one_off_for_it(
    host: Host, provider: ScriptedProvider
) -> None:
    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            await client.create_session()
            await client.handle_line("/customize")
            await screen.shows("on   local_command")
            await screen.shows(
                "on   turn_admission        Starts no turn in an archived session or a"
                " read-only chat. (always on: it enforces archived sessions and read-only chats)\n"
            )
            await client.handle_line("/customize turn_admission off")
            await screen.shows("[error] turn_admission stays on: it enforces archived sessions")
            await client.handle_line("/customize nope off")
            await screen.shows("[error] no customization 'nope' in this session")
            await client.handle_line("/customize local_command maybe")
            await screen.shows("[error] /customize NAME on|off")
            await client.handle_line("/customize local_command off")
            await screen.shows("[customization] local_command off\n")
            (listed,) = host.list_sessions()
            [plugin] = host.open_session(listed.id).state().customizations or ()
            hooks = {c.id: c.enabled for c in getattr(plugin, "children", ())}
            assert hooks["local_command"] is False and hooks["mark_unread"] is True
            await client.handle_line("/rename Q3")  # no longer the host's: the model gets it
            await screen.shows("you: /rename Q3\nassistant: echo: /rename Q3\n")
            await client.handle_line("/customize")
            await screen.shows("off  local_command")
            [admission] = [h for h in client.hooks if h.id == "turn_admission"]
            admission.required = ""  # as if the listing had not said so: the host refuses
            await client.handle_line("/customize turn_admission off")
            await screen.shows(
                "[refused] session/customizationToggled: 'turn_admission' cannot be turned off"
            )

    run(host, body)


def test_the_open_session_is_marked_read_when_opened_and_while_viewed(
    host: Host, provider: ScriptedProvider
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as watcher:  # the same user, in another window
            await watcher.initialize("watcher", initialSubscriptions=["ahp-root://"])
            uri = f"ahp-session:/{uuid.uuid4()}"  # a turn that ends with nobody looking
            await watcher.call("createSession", {"channel": uri})
            subscribed = await watcher.call("subscribe", {"channel": uri})
            chat = subscribed["snapshot"]["state"]["defaultChat"]
            await watcher.call("subscribe", {"channel": chat})
            started = {"type": "chat/turnStarted", "turnId": "t1", "message": {"text": "first"}}
            await watcher.dispatch(chat, started)
            await watcher.wait_for(action_of("chat/turnComplete", turnId="t1"))
            await watcher.wait_until(lambda: summaries(watcher, uri)[-1:] == [False])
            assert host.list_sessions()[0].unread

            async with chat_client(server) as (client, screen):
                await client.handle_line(f"/open {uri.removeprefix('ahp-session:/')}")
                await screen.shows("[session ")
                await watcher.wait_until(lambda: summaries(watcher, uri)[-1:] == [True])
                seen = len(summaries(watcher, uri))
                await client.handle_line("second")  # a turn that ends while it is viewed
                await screen.shows("[turn complete]\n")
                await watcher.wait_until(
                    lambda: False in (later := summaries(watcher, uri)[seen:]) and later[-1] is True
                )
                mark = len(screen.text)
                await client.handle_line("/sessions")
                assert "idle  2 turns" in screen.text[mark:]  # not "idle, unread"
            assert not host.list_sessions()[0].unread

    run(host, body)


def summaries(client: AhpClient, uri: str) -> list[bool]:
    """Whether the session was read, in each summary of it the client was sent."""
    read = []
    for n in client.notifications:
        params = n.get("params") or {}
        if n.get("method") == "root/sessionAdded" and params["summary"]["resource"] == uri:
            read.append(bool(params["summary"]["status"] & 32))
        elif (
            n.get("method") == "root/sessionSummaryChanged"
            and params["session"] == uri
            and "status" in params["changes"]  # only what changed
        ):
            read.append(bool(params["changes"]["status"] & 32))
    return read


def test_run_chat_refuses_an_open_that_matches_no_single_session_in_one_line(
    host: Host, capsys: pytest.CaptureFixture[str]
) -> None:
    async def body(server: Server) -> None:
        url = server.url.replace("http", "ws", 1) + "ahp"
        assert await run_chat(url, TOKEN, "zzzz") == 1

    run(host, body)
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "agenthost: --open zzzz: no session of yours has this id or starts with it"
        " (/sessions lists them)\n"
    )


@pytest.mark.parametrize(
    ("given", "url", "token"),
    [
        ("ws://127.0.0.1:8765/ahp", "ws://127.0.0.1:8765/ahp", None),
        ("wss://example.com/ahp", "wss://example.com/ahp", None),
        ("http://127.0.0.1:8765/", "ws://127.0.0.1:8765/ahp", None),
        ("https://example.com", "wss://example.com/ahp", None),
        ("http://127.0.0.1:8765/#token=abc-123", "ws://127.0.0.1:8765/ahp", "abc-123"),
        ("http://127.0.0.1:8765/ahp", "ws://127.0.0.1:8765/ahp", None),
    ],
)
def test_chat_takes_a_websocket_url_or_the_page_url_serve_printed(
    given: str, url: str, token: str | None
) -> None:
    assert chat_address(given) == ChatAddress(url=url, token=token)
    assert chat_address(given).token == token  # (not compared by ==: kept out of repr)


@pytest.mark.parametrize("given", ["ftp://127.0.0.1/ahp", "127.0.0.1:8765", "ws://"])
def test_chat_refuses_a_url_that_is_no_websocket_url(given: str) -> None:
    with pytest.raises(ValueError, match="give ws://HOST:PORT/ahp"):
        chat_address(given)


def test_run_chat_reports_a_refused_token(host: Host, capsys: pytest.CaptureFixture[str]) -> None:
    async def body(server: Server) -> None:
        url = server.url.replace("http", "ws", 1) + "ahp"
        assert await run_chat(url, "not-a-valid-token-at-all", None) == 1

    run(host, body)
    out, err = capsys.readouterr()
    assert err == "agenthost: chat: the server refused the connection (401: check the token)\n"
    assert "not-a-valid-token" not in out + err


def test_chat_says_a_steering_message_was_withdrawn(host: Host, provider: ScriptedProvider) -> None:
    provider.on("long", Say("a"), Gate("g"), Say("b"))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            await client.create_session()
            await client.handle_line("long")
            await asyncio.to_thread(provider.wait_reached, "g", 10)
            await screen.shows("assistant: a")
            await client.handle_line("/steer never mind")
            await screen.shows("[steering] never mind\n")
            await asyncio.to_thread(provider.wait_steered, 1, 10)
            await client.handle_line("/remove 1")  # the model has not read it yet
            await screen.shows("[steering withdrawn: the model never saw it] never mind\n")
            await asyncio.to_thread(provider.open, "g")
            await screen.shows("[turn complete]\n")
            assert "never mind" not in provider.prompts

    run(host, body)


def test_open_shows_the_sessions_history(host: Host, provider: ScriptedProvider) -> None:
    provider.on("boom", Say("partial"), Reject("the model is unavailable"))
    provider.on("long", Say("so far"), Gate("g"), Say(" and the rest"))

    async def body(server: Server) -> None:
        async with chat_client(server) as (client, screen):
            uri = await client.create_session()
            for line, end in (("hello", "[turn complete]"), ("boom", "[turn error")):
                await client.handle_line(line)
                await screen.shows(end)
            await client.handle_line("long")
            await asyncio.to_thread(provider.wait_reached, "g", 10)
            await screen.shows("assistant: so far")
            await client.handle_line("queued one")
            await screen.shows("[queued] queued one\n")
        async with chat_client(server) as (client, screen):  # another terminal
            await client.handle_line(f"/open {uri.removeprefix('ahp-session:/')}")
            history = await screen.shows("assistant: so far")
            assert history.endswith(
                "(hello): 2 turns, 1 pending, a turn is running]\n"
                "you: hello\nassistant: echo: hello\n"
                "you: boom\nassistant: partial\n[turn error: the model is unavailable]\n"
                "1. [queued] queued one\n"
                "you: long\n"
            )
            await asyncio.to_thread(provider.open, "g")
            await screen.shows(" and the rest\n[turn complete]\n")  # it streams on

    run(host, body)


def test_the_terminal_keeps_the_streaming_line_above_the_input_line() -> None:
    printed: list[str] = []
    terminal = Terminal(printed.append)
    terminal.write("you: hi\nassistant: echo")
    assert printed == ["you: hi"]
    assert terminal.prompt() == "assistant: echo\n> "  # the partial line, above the input
    terminal.write(": hi\n[turn complete]\n")
    assert printed == ["you: hi", "assistant: echo: hi\n[turn complete]"]
    assert terminal.prompt() == "> "


def test_run_chat_reads_a_terminal_through_prompt_toolkit(
    host: Host, provider: ScriptedProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    provider.on("typed at the prompt", Gate("g"))

    async def body(server: Server) -> None:
        url = server.url.replace("http", "ws", 1) + "ahp"
        with create_pipe_input() as keys:
            keys.send_text("typed at the prompt\r/quit\r")
            chat = run_chat(url, TOKEN, None, interactive=True, input=keys, output=DummyOutput())
            assert await asyncio.wait_for(chat, WAIT_S) == 0
        await asyncio.to_thread(provider.wait_reached, "g", 10)  # the line became a turn
        provider.open("g")

    run(host, body)
    assert "[connected: AHP 1.1.0; /help lists the commands]\n" in capsys.readouterr().out
