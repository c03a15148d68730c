"""The web page driven in a real headless Chromium (Debian's, through python playwright).

The server runs in-process on a thread of its own (its own event loop) with
the scripted provider; Gate steps hold a turn open while the page acts. One
browser serves the module, each test gets a fresh context; every wait is one
of playwright's auto-waiting expectations, bounded by a timeout. Each test
fails on a console error it did not expect, and leaves screenshots in its
tmp_path.
"""

import asyncio
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog

from agenthost.actors import Host
from agenthost.messages.common import ConfirmationOption, ConfirmationOptionKind
from agenthost.providers.scripted import (
    AskUser,
    AuthToolCall,
    Gate,
    Reject,
    Say,
    ScriptedProvider,
    Think,
    ToolCall,
)
from agenthost.server.auth import bearer_protocol
from agenthost.server.serve import ServeConfig, serve
from agenthost.server.web_routes import RENDER_BYTES
from tests.server.ahp_client import TOKEN, TOKENS, WAIT_S

try:
    from playwright import sync_api as playwright_api
except ImportError:  # pragma: no cover - depends on the environment
    playwright_api = None
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_browser = pytest.mark.skipif(
    playwright_api is None or CHROMIUM is None,
    reason=(
        "python playwright is not installed (pip install playwright)"
        if playwright_api is None
        else "Debian's chromium is not installed (apt-get install chromium)"
    ),
)
WAIT_MS = 30_000  # generous: the shared CI machine can be very loaded
if playwright_api is not None:
    expect = playwright_api.expect
    expect.set_options(timeout=WAIT_MS)

Page = Any  # playwright's Page


class LiveServer:
    """`agenthost serve`'s server for one host, on a thread with its own loop;
    stopped and started again on the same port, it is a server restart."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.port = 0
        self.url = ""
        self._stop: Callable[[], None] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        ready = threading.Event()

        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            self._stop = lambda: loop.call_soon_threadsafe(stop.set)

            def on_ready(url: str) -> None:
                self.url = url
                ready.set()

            config = ServeConfig(port=self.port, drain_s=2.0)
            await serve(self.host, TOKENS, config, ready=on_ready, stop=stop)

        self._thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
        self._thread.start()
        assert ready.wait(WAIT_S), "the server did not start"
        self.port = int(self.url.rsplit(":", 1)[1].strip("/"))
        return self.url

    def stop(self) -> None:
        if self._stop is not None and self._thread is not None:
            self._stop()
            self._thread.join(WAIT_S)
            self._stop = None


@pytest.fixture
def server(host: Host) -> Iterator[LiveServer]:
    live = LiveServer(host)
    live.start()
    yield live
    live.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if playwright_api is None or CHROMIUM is None:
        pytest.skip("no browser")
    pw = playwright_api.sync_playwright().start()
    launched = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
    yield launched
    launched.close()
    pw.stop()


class Console:
    """The page's console errors and uncaught exceptions; `allow` names the expected."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.allowed: list[str] = []

    def allow(self, pattern: str) -> None:
        self.allowed.append(pattern)

    def unexpected(self) -> list[str]:
        return [e for e in self.errors if not any(re.search(p, e) for p in self.allowed)]


@pytest.fixture
def console() -> Console:
    return Console()


@pytest.fixture
def open_page(browser: Any, console: Console, tmp_path: Path) -> Iterator[Callable[..., Page]]:
    """Open the page (signed in through the URL's #token= unless token=None)."""
    contexts: list[Any] = []
    sockets: list[str] = []  # the URLs the page opened WebSockets to

    def open_(
        server: LiveServer,
        token: str | None = TOKEN,
        width: int = 1280,
        height: int = 800,
        sockets_to: Callable[[Any], None] | None = None,
    ) -> Page:
        context = browser.new_context(viewport={"width": width, "height": height})
        context.grant_permissions(["clipboard-read", "clipboard-write"])
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        page.on("console", lambda m: console.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: console.errors.append(f"uncaught: {e}"))
        page.on("websocket", lambda ws: sockets.append(ws.url))
        if sockets_to is not None:  # the test stands between the page and the server
            page.route_web_socket(re.compile(r"/ahp$"), sockets_to)
        if token is None:
            page.goto(server.url)
        else:
            page.goto(f"{server.url}#token={token}")
            expect(page.locator("#link")).to_have_text("Connected")
            assert token not in page.url  # the fragment is cleared once used
        return page

    yield open_
    for context in contexts:
        context.close()
    assert console.unexpected() == [], "console errors"
    assert sockets and not [url for url in sockets if "token" in url or TOKEN in url]


def shot(page: Page, tmp_path: Path, name: str) -> None:
    page.screenshot(path=str(tmp_path / f"{name}.png"))


def new_session(page: Page, count: int = 1) -> None:
    page.get_by_role("button", name="New session", exact=True).click()
    expect(page.locator("#sessions li")).to_have_count(count)
    expect(page.locator("#chat-status")).to_have_text("Idle")


def send(page: Page, text: str) -> None:
    page.get_by_role("textbox", name="Message").fill(text)
    page.get_by_role("textbox", name="Message").press("Enter")


def turn(page: Page, text: str) -> Any:
    return page.locator("article.turn").filter(has=page.locator(".msg.user", has_text=text))


def done(page: Page, text: str, state: str = "complete") -> Any:
    found = turn(page, text)
    expect(found).to_have_attribute("data-state", state)
    return found


# -- without a browser ---------------------------------------------------------------------------
def test_the_page_its_files_and_its_icon_are_served_without_a_token(server: LiveServer) -> None:
    async def main() -> None:
        async with aiohttp.ClientSession() as http:
            for path, kind, marker in (
                ("", "text/html", 'id="composer"'),
                ("static/app.js", "javascript", "const wire"),
                ("static/style.css", "text/css", ".composer"),
                ("favicon.ico", "image/svg+xml", "<svg"),
                ("static/favicon.svg", "image/svg+xml", "<svg"),
            ):
                async with http.get(server.url + path) as response:
                    assert response.status == 200, path
                    assert kind in response.content_type, path
                    assert marker in await response.text(), path

    asyncio.run(main())


def test_render_sanitizes_markdown_and_wants_the_token_and_a_bounded_body(
    server: LiveServer,
) -> None:
    payload = (
        "**bold** <script>alert(1)</script> <img src=x onerror=alert(2)>"
        " [x](javascript:alert(3)) [ok](https://example.com)\n\n```python\nprint(1)\n```"
    )

    async def main() -> None:
        async with aiohttp.ClientSession() as http:
            url = server.url + "render"
            auth = {"Authorization": f"Bearer {TOKEN}"}
            async with http.post(url, json={"texts": ["hi"]}) as refused:
                assert refused.status == 401
            async with http.post(url, json={"texts": [payload]}, headers=auth) as rendered:
                assert rendered.status == 200
                (html,) = (await rendered.json())["html"]
            async with http.post(url, json={"texts": "no"}, headers=auth) as malformed:
                assert malformed.status == 400
            too_big = {"texts": ["x" * (RENDER_BYTES // 2 + 1)] * 2}
            async with http.post(url, json=too_big, headers=auth) as large:
                assert large.status == 413
        assert "<strong>bold</strong>" in html
        assert '<code class="language-python">print(1)' in html
        # the tags come out as text, and the javascript: link as its source
        assert "<script" not in html and "<img" not in html and 'href="javascript' not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert 'href="https://example.com"' in html and 'rel="noopener noreferrer nofollow"' in html

    asyncio.run(main())


def test_the_websocket_takes_the_token_as_a_subprotocol_and_never_logs_it(
    server: LiveServer,
) -> None:
    async def main() -> None:
        url = server.url.replace("http", "ws", 1) + "ahp"
        async with aiohttp.ClientSession() as http:
            offered = ("agenthost", bearer_protocol(TOKEN))
            async with http.ws_connect(url, protocols=offered) as ws:
                assert ws.protocol == "agenthost"  # selected: the token is not echoed back
                await ws.send_json({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}})
                assert (await ws.receive_json())["id"] == 1
            wrong = ("agenthost", bearer_protocol("x" * 32))
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(url, protocols=wrong)
            assert refused.value.status == 401

    with structlog.testing.capture_logs() as logs:
        asyncio.run(main())
    assert TOKEN not in repr(logs) and bearer_protocol(TOKEN) not in repr(logs)


# -- in the browser ------------------------------------------------------------------------------
@needs_browser
def test_a_reply_streams_and_renders_as_markdown_and_a_script_in_it_never_runs(
    server: LiveServer, provider: ScriptedProvider, open_page: Callable[..., Page], tmp_path: Path
) -> None:
    provider.on("long", Say("first *half*"), Gate("g"), Say(" second half"))
    provider.on(
        "show me",
        Say("Here is **bold**, `inline` and a [link](https://example.com):\n\n"),
        Say("```python\nprint('hello')\n```\n\n"),
        Say('<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'),
        Say("[click](javascript:window.pwned=3) ![a chart](https://example.com/chart.png)"),
    )
    page = open_page(server)
    new_session(page)
    send(page, "long")
    provider.wait_reached("g", 10)
    # streamed: the first half shows, rendered, while the turn is still held open
    expect(page.locator("#active-turn .reply em")).to_have_text("half")
    expect(page.locator("#chat-status")).to_have_text("Working…")
    expect(page.locator("#sessions li .status")).to_have_text("working")
    provider.open("g")
    expect(done(page, "long").locator(".reply")).to_have_text("first half second half")

    box = page.get_by_role("textbox", name="Message")
    box.fill("line one")
    box.press("Shift+Enter")  # a new line, not a send
    box.press_sequentially("line two")
    expect(page.locator("article.turn")).to_have_count(1)
    box.press("Enter")
    expect(done(page, "line two").locator(".msg.user")).to_have_text("line one\nline two")

    send(page, "show me")
    reply = done(page, "show me").locator(".reply")
    expect(reply.locator("strong")).to_have_text("bold")
    expect(reply.locator(".codeblock .code-head")).to_contain_text("python")
    reply.get_by_role("button", name="Copy").click()
    expect(reply.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == "print('hello')\n"
    expect(reply).to_contain_text("<script>window.pwned = 1</script>")  # shown, as text
    assert reply.locator("script, img").count() == 0
    assert page.evaluate("window.pwned") is None
    expect(reply.get_by_role("link", name="link")).to_have_attribute("target", "_blank")
    assert reply.get_by_role("link", name="click").count() == 0  # no javascript: link
    # an image is a link to it named by its alt text: nothing loads from elsewhere
    chart = reply.get_by_role("link", name="a chart")
    expect(chart).to_have_attribute("href", "https://example.com/chart.png")
    expect(chart).to_have_class("image")
    assert reply.locator("p:empty").count() == 0
    expect(page.locator("#sessions li .title")).to_have_text("long")  # named by its first message
    shot(page, tmp_path, "conversation")


@needs_browser
def test_a_streaming_reply_flows_on_inside_its_last_paragraph_with_the_cursor_inline(
    server: LiveServer, provider: ScriptedProvider, open_page: Callable[..., Page], tmp_path: Path
) -> None:
    provider.on(
        "stream", Say("The first *half* of a wo"), Gate("g"), Say("rd, and more"), Gate("h")
    )
    page = open_page(server)
    new_session(page)
    send(page, "stream")
    provider.wait_reached("g", 10)
    paragraph = page.locator("#active-turn .reply .md > p")
    expect(paragraph.locator("em")).to_have_text("half")  # rendered as far as it came
    held: list[Any] = []
    holding = [True]

    def hold(route: Any) -> None:  # what comes next stays unrendered for now
        if holding[0]:
            held.append(route)
        else:
            route.continue_()

    page.route("**/render", hold)
    provider.open("g")
    provider.wait_reached("h", 10)
    # the text not rendered yet goes on in the rendered paragraph, the cursor after it
    expect(paragraph.locator(".tail")).to_have_text("rd, and more")
    expect(paragraph).to_have_text("The first half of a word, and more")
    expect(paragraph.locator(".tail + .cursor")).to_have_count(1)
    assert page.locator("#active-turn .md > :is(.tail, .cursor)").count() == 0
    tops = page.evaluate(
        """() => [...document.querySelectorAll("#active-turn .md > p :is(em, .tail, .cursor)")]
             .map((node) => Math.round(node.getClientRects()[0].top))"""
    )
    assert len(set(tops)) == 1, f"the cut word or the cursor broke the line: {tops}"
    shot(page, tmp_path, "streaming")
    holding[0] = False
    for route in held:
        route.continue_()
    provider.open("h")
    expect(done(page, "stream").locator(".reply p")).to_have_text(
        "The first half of a word, and more"
    )
    expect(page.locator(".cursor, .tail")).to_have_count(0)


@needs_browser
def test_the_page_steers_queues_and_removes_from_the_queue(
    server: LiveServer, provider: ScriptedProvider, open_page: Callable[..., Page], tmp_path: Path
) -> None:
    provider.on("long", Say("first half"), Gate("g"), Say(" second half"))
    page = open_page(server)
    new_session(page)
    send(page, "long")
    provider.wait_reached("g", 10)
    box = page.get_by_role("textbox", name="Message")
    box.fill("faster")
    box.press("Control+Enter")  # steers
    steering = page.locator('#queue li[data-kind="steering"]')
    expect(steering).to_contain_text("faster")
    send(page, "later")  # while a turn runs: queued, not a second turn
    queued = page.locator('#queue li[data-kind="queued"]', has_text="later")
    expect(queued).to_have_count(1)
    send(page, "keep me")
    expect(page.locator('#queue li[data-kind="queued"]')).to_have_count(2)
    queued.get_by_role("button", name="Remove from queue").click()
    expect(queued).to_have_count(0)
    expect(page.locator('#queue li[data-kind="queued"]')).to_contain_text("keep me")
    expect(page.locator("#notice")).to_be_empty()

    provider.open("g")
    expect(done(page, "long").locator(".reply")).to_contain_text("first half")
    # what was pending runs after it (the steering as the scripted copilot
    # shape runs it: a turn of its own), and the removed "later" never does
    done(page, "faster")
    done(page, "keep me")
    expect(turn(page, "later")).to_have_count(0)
    expect(page.locator("#queue li")).to_have_count(0)
    assert "later" not in provider.prompts
    # the steering's turn says it was steering; a message sent as such does not
    expect(turn(page, "faster").locator(".msg.user .origin")).to_have_text("Steering")
    expect(turn(page, "long").locator(".origin")).to_have_count(0)
    page.reload()  # from the store too
    expect(done(page, "faster").locator(".msg.user .origin")).to_have_text("Steering")
    expect(turn(page, "keep me").locator(".origin")).to_have_count(0)
    shot(page, tmp_path, "steering-turn")


@needs_browser
def test_a_permission_prompt_and_a_question_are_cards_the_user_answers(
    server: LiveServer, provider: ScriptedProvider, open_page: Callable[..., Page], tmp_path: Path
) -> None:
    provider.on("tool", ToolCall("shell", '{"cmd": "ls"}'), AskUser("Which file?"), Say("ran it"))
    page = open_page(server)
    new_session(page)
    send(page, "tool")
    card = page.locator("#active-turn .card.tool", has_text="shell")
    expect(card.locator(".badge")).to_have_text("needs approval")
    expect(card.locator("pre")).to_have_text('{"cmd": "ls"}')
    expect(page.locator("#chat-status")).to_have_text("Waiting for you")
    shot(page, tmp_path, "permission")
    card.get_by_role("button", name="Approve").click()
    question = page.locator("#active-turn .card.request", has_text="Which file?")
    question.get_by_role("textbox").fill("main.py")
    question.get_by_role("textbox").press("Enter")
    finished = done(page, "tool")
    expect(finished.locator(".reply")).to_contain_text("ran it")
    expect(finished.locator(".card.tool .badge")).to_have_text("done")
    assert [a.approved for a in provider.answers][:1] == [True]


OPTIONS = (
    ConfirmationOption(id="once", label="Allow once", kind=ConfirmationOptionKind.APPROVE),
    ConfirmationOption(
        id="always", label="Allow in this session", kind=ConfirmationOptionKind.APPROVE
    ),
    ConfirmationOption(id="never", label="Never", kind=ConfirmationOptionKind.DENY),
)


@needs_browser
def test_a_tool_call_offers_its_options_and_runs_with_the_input_the_user_edited(
    server: LiveServer, provider: ScriptedProvider, open_page: Callable[..., Page], tmp_path: Path
) -> None:
    edit = ToolCall("write", '{"path": "a.txt"}', options=OPTIONS, editable=True)
    provider.on("write it", Think("I should write **a file**."), edit, Say("wrote it"))
    provider.on("again", ToolCall("write", "{}", options=OPTIONS), Say("never mind"))
    page = open_page(server)
    new_session(page)
    send(page, "write it")
    card = page.locator("#active-turn .card.tool", has_text="write")
    expect(card.get_by_role("button")).to_have_text(
        ["Allow once", "Allow in this session", "Never"]
    )
    reasoning = page.locator("#active-turn details.reasoning")
    expect(reasoning).not_to_have_attribute("open", "")  # collapsed until opened
    expect(reasoning.locator("summary")).to_have_text("Thinking")
    page.reload()  # the call waits on: its options come back from the snapshot
    expect(page.locator("#link")).to_have_text("Connected")
    expect(card.get_by_role("button")).to_have_text(
        ["Allow once", "Allow in this session", "Never"]
    )
    field = card.get_by_role("textbox", name="Input for write")
    expect(field).to_have_value('{"path": "a.txt"}')
    field.fill('{"path": "b.txt"}')
    shot(page, tmp_path, "tool-options")
    card.get_by_role("button", name="Allow in this session").click()
    finished = done(page, "write it")
    expect(finished.locator(".card.tool .badge")).to_have_text("done")
    expect(finished.locator(".card.tool .chosen")).to_have_text("Chosen: Allow in this session")
    expect(finished.locator(".card.tool pre")).to_have_text('{"path": "b.txt"}')
    answer = provider.answers[-1]
    assert (answer.option, answer.edited_input) == ("always", '{"path": "b.txt"}')
    finished.locator("details.reasoning summary").click()
    expect(finished.locator("details.reasoning p")).to_have_text("I should write **a file**.")
    shot(page, tmp_path, "tool-done")
    send(page, "again")
    page.locator("#active-turn .card.tool").get_by_role("button", name="Never").click()
    denied = done(page, "again")
    expect(denied.locator(".card.tool .badge")).to_have_text("denied")
    assert (provider.answers[-1].approved, provider.answers[-1].option) == (False, "never")


@needs_browser
def test_a_tool_call_waiting_for_authorization_names_its_resource_and_takes_a_token(
    server: LiveServer, provider: ScriptedProvider, open_page: Callable[..., Page], tmp_path: Path
) -> None:
    secret = "repo-token-7d2f"
    search = AuthToolCall(
        "search", "https://mcp.example.com", scopes=("repo:read",), accepts=secret
    )
    provider.on("find", search, Say("found it"))
    page = open_page(server)
    new_session(page)
    send(page, "find")
    card = page.locator("#active-turn .card.tool", has_text="search")
    expect(card.locator(".badge")).to_have_text("needs authorization")
    expect(card).to_contain_text("https://mcp.example.com (scopes: repo:read)")
    expect(page.locator("#chat-status")).to_have_text("Waiting for you")
    page.reload()  # the call waits on: the snapshot shows it again
    expect(page.locator("#link")).to_have_text("Connected")
    field = card.get_by_label("Token for https://mcp.example.com")
    field.fill("a-wrong-token")
    card.get_by_role("button", name="Authorize").click()
    expect(field).to_have_value("")  # sent, and not kept in the page
    expect(card.locator(".badge")).to_have_text("needs authorization")  # challenged again
    shot(page, tmp_path, "tool-auth")
    field.fill(secret)
    field.press("Enter")
    finished = done(page, "find")
    expect(finished.locator(".reply")).to_contain_text("found it")
    expect(finished.locator(".card.tool .badge")).to_have_text("done")
    assert [a.token is not None for a in provider.answers] == [True, True]
    assert secret not in page.evaluate("JSON.stringify(sessionStorage)")


@needs_browser
def test_an_input_request_is_a_form_of_its_questions(
    server: LiveServer, provider: ScriptedProvider, open_page: Callable[..., Page], tmp_path: Path
) -> None:
    colour = AskUser("Which colours?", choices=("red", "green", "blue"), several=True)
    provider.on("pick", colour, Say("picked"))
    provider.on("pick again", AskUser("One colour?", choices=("red", "blue")), Say("fine"))
    page = open_page(server)
    new_session(page)
    send(page, "pick")
    form = page.locator("#active-turn form.card.input", has_text="Which colours?")
    expect(form.get_by_role("checkbox")).to_have_count(3)
    page.reload()  # the request waits on: the form comes back from the snapshot
    expect(page.locator("#link")).to_have_text("Connected")
    expect(form.get_by_role("checkbox")).to_have_count(3)
    form.get_by_role("checkbox", name="red").check()
    form.get_by_role("checkbox", name="blue").check()
    form.get_by_role("textbox", name="Other answer: Which colours?").fill("teal")
    expect(page.locator("#chat-status")).to_have_text("Waiting for you")
    shot(page, tmp_path, "input-form")
    form.get_by_role("button", name="Answer").click()
    done(page, "pick")
    assert provider.model_inputs[-1] == "red, blue, teal"
    send(page, "pick again")
    form = page.locator("#active-turn form.card.input", has_text="One colour?")
    expect(form.get_by_role("radio")).to_have_count(2)
    form.get_by_role("button", name="Decline").click()
    done(page, "pick again")
    assert provider.answers[-1].error == "The user declined to answer."


@needs_browser
def test_a_draft_answer_is_synced_and_shown_to_the_other_client_beside_its_own(
    server: LiveServer, provider: ScriptedProvider, open_page: Callable[..., Page], tmp_path: Path
) -> None:
    provider.on("ask", AskUser("Which file?"), Say("thanks"))
    mine = open_page(server)
    new_session(mine)
    send(mine, "ask")
    form = mine.locator("#active-turn form.card.input", has_text="Which file?")
    expect(form.get_by_role("textbox")).to_have_count(1)
    theirs = open_page(server)  # another browser: another client id
    theirs.locator("#sessions li", has_text="ask").locator("button.open").click()
    their_form = theirs.locator("#active-turn form.card.input", has_text="Which file?")
    expect(their_form.locator(".draft")).to_be_hidden()
    form.get_by_role("textbox").fill("main.py")  # a draft goes out once typing pauses
    expect(their_form.locator(".draft")).to_have_text("Another client's draft: main.py")
    expect(form.locator(".draft")).to_be_hidden()  # one's own draft is not echoed
    their_form.get_by_role("textbox").fill("util.py")
    expect(form.locator(".draft")).to_have_text("Another client's draft: util.py")
    expect(form.get_by_role("textbox")).to_have_value("main.py")  # not rebuilt under the user
    [session] = server.host.list_sessions()
    [request] = server.host.open_session(session.id).chat().state().input_requests
    [(question, answer)] = request.answers or ()
    assert (question, answer.state, answer.value and answer.value.value.value) == (
        "answer",
        "draft",
        "util.py",
    )
    shot(theirs, tmp_path, "draft-elsewhere")
    their_form.get_by_role("textbox").fill("")  # an emptied field clears its draft
    expect(form.locator(".draft")).to_be_hidden()
    form.get_by_role("button", name="Answer").click()
    done(mine, "ask")
    assert provider.model_inputs[-1] == "main.py"


@needs_browser
def test_the_page_says_why_a_steering_removal_was_refused(
    start_host: Callable[..., Host], open_page: Callable[..., Page]
) -> None:
    provider = ScriptedProvider(shape="claude")  # cannot withdraw steering it holds
    provider.on("long", Say("a"), Gate("g"), Say("b"))
    live = LiveServer(start_host(provider))
    live.start()
    try:
        page = open_page(live)
        new_session(page)
        send(page, "long")
        provider.wait_reached("g", 10)
        page.get_by_role("textbox", name="Message").fill("stop")
        page.get_by_role("button", name="Steer").click()
        steering = page.locator('#queue li[data-kind="steering"]')
        expect(steering).to_contain_text("stop")
        provider.wait_steered(1, 10)
        steering.get_by_role("button", name="Remove from queue").click()
        expect(page.locator("#notice")).to_contain_text("Could not remove the message: ")
        expect(steering).to_have_count(1)  # refused: still pending
        provider.open("g")
        done(page, "long")
        page.close()  # before its server goes
    finally:
        live.stop()


@needs_browser
def test_the_page_refuses_a_wrong_token_and_connects_with_the_right_one(
    server: LiveServer, open_page: Callable[..., Page], console: Console, tmp_path: Path
) -> None:
    console.allow("Authentication failed|401")  # the browser reports the refused upgrade
    page = open_page(server, token=None)
    expect(page.locator("#app")).to_be_hidden()
    page.get_by_label("Access token").fill("not-the-token-not-the-token")
    page.get_by_role("button", name="Connect").click()
    expect(page.locator("#connection")).to_have_text("Connection refused: check the token")
    shot(page, tmp_path, "sign-in")
    expect(page.locator("#app")).to_be_hidden()
    page.get_by_label("Access token").fill(TOKEN)
    page.get_by_role("button", name="Connect").click()
    expect(page.locator("#link")).to_have_text("Connected")
    expect(page.locator("#login")).to_be_hidden()
    expect(page.locator("#welcome")).to_be_visible()
    shot(page, tmp_path, "empty")


@needs_browser
def test_a_sign_in_the_server_did_not_take_is_tried_again_with_the_same_token(
    server: LiveServer, open_page: Callable[..., Page], tmp_path: Path
) -> None:
    attempts: list[str] = []

    def first_refused(ws: Any) -> None:
        attempts.append(ws.url)
        if len(attempts) == 1:
            ws.close(code=1011)  # the server could not take it, this once
        else:
            ws.connect_to_server()

    page = open_page(server, token=None, sockets_to=first_refused)
    page.get_by_label("Access token").fill(TOKEN)
    page.get_by_role("button", name="Connect").click()
    expect(page.locator("#connection")).to_have_text(
        "The server did not take the connection. Trying again in 1 s…"
    )
    shot(page, tmp_path, "sign-in-retry")
    expect(page.locator("#link")).to_have_text("Connected")  # by itself, the token kept
    assert len(attempts) == 2
    expect(page.locator("#welcome")).to_be_visible()


@needs_browser
def test_sessions_are_renamed_archived_deleted_and_searched_from_the_sidebar(
    server: LiveServer, open_page: Callable[..., Page], tmp_path: Path
) -> None:
    page = open_page(server)
    send(page, "plan the offsite")  # with no session open: a new one for it
    done(page, "plan the offsite")
    for count, text in ((2, "fix the build"), (3, "quarterly numbers")):
        new_session(page, count)
        send(page, text)
        done(page, text)
    rows = page.locator("#sessions li")
    expect(rows.locator(".title")).to_have_text(
        ["quarterly numbers", "fix the build", "plan the offsite"]
    )
    # /rename and /help say what they did
    send(page, "/rename Q3 figures")
    expect(page.locator("#turns .system")).to_have_text("Renamed this session “Q3 figures”")
    expect(page.locator("#chat-title")).to_have_text("Q3 figures")
    expect(rows.first.locator(".title")).to_have_text("Q3 figures")
    send(page, "/help")
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#help")).to_be_hidden()
    page.locator("#chat-title").click()  # away from the composer, ? shows them too
    page.keyboard.press("?")
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()
    shot(page, tmp_path, "help")
    page.get_by_role("button", name="Close").click()

    build = rows.filter(has_text="fix the build")
    build.get_by_role("button", name="Actions for fix the build").click()
    page.get_by_role("menuitem", name="Rename").click()
    page.get_by_role("textbox", name="New title").fill("CI is green again")
    page.get_by_role("textbox", name="New title").press("Enter")
    expect(rows.locator(".title")).to_have_text(
        ["Q3 figures", "CI is green again", "plan the offsite"]
    )

    offsite = rows.filter(has_text="plan the offsite")
    offsite.get_by_role("button", name="Actions for plan the offsite").click()
    page.get_by_role("menuitem", name="Archive").click()
    expect(rows).to_have_count(2)  # archived sessions are hidden...
    page.get_by_label("Show archived").check()
    expect(rows.filter(has_text="plan the offsite")).to_have_class(re.compile("archived"))
    page.get_by_label("Show archived").uncheck()

    page.keyboard.press("Control+k")
    expect(page.get_by_role("searchbox", name="Search sessions")).to_be_focused()
    page.keyboard.type("green")
    expect(rows.locator(".title")).to_have_text(["CI is green again"])
    page.keyboard.press("Enter")  # opens the one match
    expect(page.locator("#chat-title")).to_have_text("CI is green again")
    shot(page, tmp_path, "sidebar-search")
    page.get_by_role("searchbox", name="Search sessions").fill("")

    green = rows.filter(has_text="CI is green again")
    green.get_by_role("button", name=re.compile("Actions")).click()
    page.get_by_role("menuitem", name="Delete", exact=True).click()
    page.get_by_role("menuitem", name="Delete for good").click()
    expect(rows.locator(".title")).to_have_text(["Q3 figures"])
    expect(page.locator("#welcome")).to_be_visible()  # the open session went with it
    titles = sorted(s.title for s in server.host.list_sessions())
    assert titles == ["Q3 figures", "plan the offsite"]


@needs_browser
def test_unread_is_cleared_when_the_session_is_viewed(
    server: LiveServer, provider: ScriptedProvider, open_page: Callable[..., Page]
) -> None:
    provider.on("slow", Say("done"), Gate("g"))
    page = open_page(server)
    new_session(page)
    send(page, "slow")
    provider.wait_reached("g", 10)
    slow = page.locator("#sessions li", has_text="slow")
    new_session(page, 2)  # look elsewhere while it finishes
    provider.open("g")
    # (its status may still say "working": the server's summary of a session
    # that just went idle can lag behind its chats; the unread mark is right)
    expect(slow).to_have_class(re.compile("unread"))
    slow.locator("button.open").click()
    expect(slow).not_to_have_class(re.compile("unread"))
    send(page, "and now")  # a turn that ends while it is viewed leaves it read
    done(page, "and now")
    expect(slow).not_to_have_class(re.compile("unread"))
    summaries = {s.title: s for s in server.host.list_sessions()}
    assert not summaries["slow"].unread


@needs_browser
def test_a_failed_turn_shows_the_providers_message_also_after_a_reload(
    server: LiveServer, provider: ScriptedProvider, open_page: Callable[..., Page], tmp_path: Path
) -> None:
    why = "the model is unavailable (quota exceeded)"
    provider.on("boom", Say("partial"), Reject(why))
    page = open_page(server)
    new_session(page)
    send(page, "boom")
    failed = done(page, "boom", "error")
    expect(failed.locator(".error-box")).to_contain_text(why)
    expect(page.locator("#chat-status")).to_have_text("Idle")
    page.reload()  # signed in still (this tab keeps the token), the same session open
    expect(page.locator("#link")).to_have_text("Connected")
    failed = done(page, "boom", "error")
    expect(failed.locator(".error-box")).to_contain_text(why)
    expect(failed.locator(".reply")).to_have_text("partial")
    shot(page, tmp_path, "error-after-reload")


@needs_browser
def test_a_turn_stopped_at_a_resumable_error_is_resumed_from_its_error(
    server: LiveServer, provider: ScriptedProvider, open_page: Callable[..., Page], tmp_path: Path
) -> None:
    provider.on("busy", Say("so far "), Reject("the model is overloaded", resumable=True))
    provider.on("broken", Reject("no such model"))
    page = open_page(server)
    new_session(page)
    send(page, "broken")
    expect(done(page, "broken", "error").get_by_role("button", name="Resume")).to_have_count(0)
    send(page, "busy")
    failed = done(page, "busy", "error")
    shot(page, tmp_path, "resumable-error")
    provider.on("busy", Say("and the rest"))
    failed.get_by_role("button", name="Resume").click()
    resumed = done(page, "busy")
    expect(resumed.locator(".reply")).to_contain_text("so far")
    expect(resumed.locator(".reply")).to_contain_text("and the rest")
    expect(resumed.locator(".error-box")).to_have_count(0)
    shot(page, tmp_path, "resumed")
    assert provider.prompts.count("busy") == 2


@needs_browser
def test_a_message_sent_while_disconnected_is_kept_and_sent_on_reconnect(
    server: LiveServer, open_page: Callable[..., Page], console: Console, tmp_path: Path
) -> None:
    console.allow("ERR_CONNECTION_REFUSED|WebSocket connection to .* failed")
    page = open_page(server)
    new_session(page)
    send(page, "before")
    done(page, "before")
    server.stop()  # the server stops: it closes the socket with 1001
    expect(page.locator("#banner")).to_contain_text(
        "Disconnected (1001): the server stopped or restarted."
    )
    expect(page.locator("#link")).to_have_text("Offline")
    send(page, "written offline")
    waiting = page.locator("[data-outbox]", has_text="written offline")
    expect(waiting).to_contain_text("Not sent yet")
    shot(page, tmp_path, "offline")
    server.start()  # the same port again: the page reconnects by itself
    expect(page.locator("#link")).to_have_text("Connected")
    done(page, "written offline")
    expect(waiting).to_have_count(0)
    expect(page.locator("#banner")).to_be_hidden()


@needs_browser
def test_a_message_written_offline_is_kept_across_a_reload_and_sent_once(
    server: LiveServer, open_page: Callable[..., Page], console: Console, tmp_path: Path
) -> None:
    assert playwright_api is not None
    console.allow("ERR_CONNECTION_REFUSED|WebSocket connection to .* failed")
    page = open_page(server)
    new_session(page)
    send(page, "before")
    done(page, "before")
    server.stop()
    expect(page.locator("#link")).to_have_text("Offline")
    send(page, "kept across a reload")
    expect(page.locator("[data-outbox]")).to_contain_text("Not sent yet")
    with pytest.raises(playwright_api.Error, match="ERR_CONNECTION_REFUSED"):
        page.reload()  # the server is down: the tab shows the browser's error page
    page.wait_for_url(re.compile("^chrome-error:"))
    server.start()
    page.goto(server.url)  # back, signed in from the tab's storage
    expect(page.locator("#link")).to_have_text("Connected")
    done(page, "kept across a reload")
    assert page.evaluate("sessionStorage.getItem('agenthost.outbox')") is None
    page.reload()
    done(page, "kept across a reload")
    expect(page.locator("article.turn")).to_have_count(2)
    uri = page.evaluate("sessionStorage.getItem('agenthost.session')")
    turns = server.host.open_session(uri.removeprefix("ahp-session:/")).chat().state().turns
    assert [t.user_text for t in turns] == ["before", "kept across a reload"]  # sent once
    shot(page, tmp_path, "after-offline-reload")


@needs_browser
def test_the_page_works_at_400_px_wide(
    server: LiveServer, provider: ScriptedProvider, open_page: Callable[..., Page], tmp_path: Path
) -> None:
    provider.on("long", Say("a " * 60), Gate("g"), Say("b"))
    page = open_page(server, width=400, height=760)
    expect(page.locator("#sidebar")).not_to_be_in_viewport()
    page.get_by_role("button", name="Sessions").click()
    expect(page.locator("#sidebar")).to_be_in_viewport(ratio=1)  # slid in all the way
    shot(page, tmp_path, "narrow-sidebar")
    new_session(page)  # opening a session closes the drawer
    expect(page.locator("#sidebar")).not_to_be_in_viewport()
    send(page, "long")
    expect(page.locator("#active-turn .reply")).to_contain_text("a a a")
    provider.wait_reached("g", 10)
    expect(page.locator("#active-turn .md p .cursor")).to_have_count(1)  # inline, narrow too
    shot(page, tmp_path, "narrow-streaming")
    page.keyboard.press("Escape")  # stops the running turn
    done(page, "long", "cancelled")
    send(page, "a message with a `code span` and a very-long-word-" + "x" * 80)
    done(page, "a message with")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 400, f"the page scrolls sideways: {width} px"
    for name in ("Message", "Send"):
        box = page.get_by_role("textbox" if name == "Message" else "button", name=name)
        bounds = box.bounding_box()
        assert bounds is not None and bounds["x"] >= 0 and bounds["x"] + bounds["width"] <= 400
    shot(page, tmp_path, "narrow")


@needs_browser
def test_a_sessions_customizations_are_switches_and_one_turned_off_stops_its_behaviour(
    server: LiveServer, provider: ScriptedProvider, open_page: Callable[..., Page], tmp_path: Path
) -> None:
    page = open_page(server)
    new_session(page)
    page.get_by_role("button", name="Customize").click()
    dialog = page.get_by_role("dialog", name="Customizations")
    commands = dialog.locator('input[data-id="local_command"]')
    expect(commands).to_be_checked()
    admission = dialog.locator('input[data-id="turn_admission"]')
    expect(admission).to_be_disabled()
    expect(dialog.locator('li[data-id="turn_admission"]')).to_contain_text("Always on:")
    shot(page, tmp_path, "customizations")
    commands.uncheck()
    [listed] = server.host.list_sessions()
    session = server.host.open_session(listed.id)

    def local_command_enabled() -> bool | None:
        [plugin] = session.state().customizations or ()
        return {c.id: c.enabled for c in getattr(plugin, "children", ())}["local_command"]

    expect(commands).not_to_be_checked()
    page.get_by_role("button", name="Close").click()
    send(page, "/help")  # no longer the host's command: the model gets it
    expect(done(page, "/help").locator(".reply")).to_contain_text("echo: /help")
    assert local_command_enabled() is False
    page.reload()
    expect(page.locator("#link")).to_have_text("Connected")
    page.get_by_role("button", name="Customize").click()
    expect(dialog.locator('input[data-id="local_command"]')).not_to_be_checked()
    dialog.locator('input[data-id="local_command"]').check()
    expect(dialog.locator('input[data-id="local_command"]')).to_be_checked()
