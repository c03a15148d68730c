"""The web page driven in a real headless Chromium (Debian's, through python playwright).

The server runs in-process on a free port with the scripted provider; Gate
steps hold a turn open while the page steers and queues. Every wait is one of
playwright's auto-waiting expectations, bounded by a timeout.
"""

import asyncio
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from agenthost.actors import Host
from agenthost.providers.scripted import Gate, Reject, Say, ScriptedProvider, ToolCall
from tests.server.ahp_client import TOKEN, WAIT_S, Server, running

try:
    from playwright import async_api as playwright_api
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


@asynccontextmanager
async def browser_page(server: Server, token: str | None) -> AsyncIterator[Page]:
    """The page in headless chromium; with `token`, opened at /#token=... and connected."""
    async with playwright_api.async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = await browser.new_page()
            page.set_default_timeout(WAIT_MS)
            if token is None:
                await page.goto(server.url)
            else:
                await page.goto(f"{server.url}#token={token}")
                await expect(page.locator("#connection")).to_contain_text("Connected")
                assert token not in page.url  # the fragment is cleared once used
            yield page
        finally:
            await browser.close()


def run(host: Host, body: Callable[[Page], Awaitable[None]], token: str | None = TOKEN) -> None:
    async def main() -> None:
        async with running(host) as server, browser_page(server, token) as page:
            await body(page)

    asyncio.run(asyncio.wait_for(main(), 120))


async def new_session(page: Page) -> None:
    await page.get_by_role("button", name="New session").click()
    await expect(page.locator("#sessions li")).to_have_count(1)
    await expect(page.locator("#chat")).to_be_visible()
    await expect(page.locator("#chat-status")).to_have_text("Idle")


async def send(page: Page, text: str) -> None:
    await page.get_by_role("textbox", name="Message").fill(text)
    await page.get_by_role("button", name="Send", exact=True).click()


def turn(page: Page, text: str) -> Any:
    return page.locator("#turns li.turn").filter(has=page.locator("p.user", has_text=text))


def test_the_page_and_its_files_are_served_without_a_token(host: Host) -> None:
    async def main() -> None:
        async with running(host) as server:
            for path, kind, marker in (
                ("", "text/html", 'id="composer"'),
                ("static/app.js", "javascript", "const wire"),
                ("static/style.css", "text/css", "#queue"),
            ):
                async with server.http.get(server.url + path) as response:
                    assert response.status == 200, path
                    assert kind in response.content_type, path
                    assert marker in await response.text(), path

    asyncio.run(asyncio.wait_for(main(), WAIT_S * 3))


@needs_browser
def test_the_page_sends_streams_steers_and_removes_from_the_queue(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("long", Say("first half"), Gate("g"), Say(" second half"))

    async def body(page: Page) -> None:
        await expect(page.locator("#login")).to_be_hidden()
        await new_session(page)
        await send(page, "hello")
        await expect(turn(page, "hello").locator(".reply")).to_have_text("echo: hello")
        await expect(turn(page, "hello").locator(".turn-state")).to_have_text("complete")

        await send(page, "long")
        await asyncio.to_thread(provider.wait_reached, "g", 10)
        # streamed: the first half shows while the turn is still held open
        await expect(page.locator("#active-turn .reply")).to_have_text("first half")
        await expect(page.locator("#chat-status")).to_have_text("A turn is running")
        await expect(page.locator("#sessions li .status")).to_have_text("(working)")

        await page.get_by_role("textbox", name="Steer the running turn").fill("faster")
        await page.get_by_role("button", name="Steer", exact=True).click()
        steering = page.locator('#queue li[data-kind="steering"]')
        await expect(steering).to_contain_text("faster")

        await send(page, "later")  # while a turn runs: queued, not a second turn
        queued = page.locator('#queue li[data-kind="queued"]', has_text="later")
        await expect(queued).to_have_count(1)
        await send(page, "keep me")
        await expect(page.locator('#queue li[data-kind="queued"]')).to_have_count(2)
        await queued.get_by_role("button", name="Remove from Queue").click()
        await expect(queued).to_have_count(0)
        await expect(page.locator('#queue li[data-kind="queued"]')).to_have_text(
            "queuedkeep me Remove from Queue"
        )
        await expect(page.locator("#notice")).to_be_empty()

        await asyncio.to_thread(provider.open, "g")
        await expect(turn(page, "long").locator(".reply")).to_contain_text("first half")
        await expect(turn(page, "long").locator(".turn-state")).to_have_text("complete")
        # what was pending runs after it (the steering as the scripted copilot
        # shape runs it: a turn of its own), and the removed "later" never does
        await expect(turn(page, "faster").locator(".turn-state")).to_have_text("complete")
        await expect(turn(page, "keep me").locator(".turn-state")).to_have_text("complete")
        await expect(turn(page, "later")).to_have_count(0)
        await expect(page.locator("#queue li")).to_have_count(0)
        await expect(page.locator("#sessions li .status")).to_contain_text("idle")
        assert "later" not in provider.prompts

    run(host, body)


@needs_browser
def test_the_page_answers_a_permission_prompt(host: Host, provider: ScriptedProvider) -> None:
    provider.on("tool", ToolCall("shell", '{"cmd": "ls"}'), Say("ran it"))

    async def body(page: Page) -> None:
        await new_session(page)
        await send(page, "tool")
        prompt = page.locator("#permissions li")
        await expect(prompt).to_contain_text("shell")
        await prompt.get_by_role("button", name="Approve").click()
        await expect(turn(page, "tool").locator(".reply")).to_contain_text("ran it")
        await expect(turn(page, "tool").locator(".turn-state")).to_have_text("complete")
        await expect(page.locator("#permissions-section")).to_be_hidden()
        assert [a.approved for a in provider.answers] == [True]

    run(host, body)


@needs_browser
def test_the_page_shows_why_a_steering_removal_was_refused(
    start_host: Callable[..., Host],
) -> None:
    provider = ScriptedProvider(shape="claude")  # cannot withdraw steering it holds
    provider.on("long", Say("a"), Gate("g"), Say("b"))
    host = start_host(provider)

    async def body(page: Page) -> None:
        await new_session(page)
        await send(page, "long")
        await asyncio.to_thread(provider.wait_reached, "g", 10)
        await page.get_by_role("textbox", name="Steer the running turn").fill("stop")
        await page.get_by_role("button", name="Steer", exact=True).click()
        steering = page.locator('#queue li[data-kind="steering"]')
        await expect(steering).to_contain_text("stop")
        await asyncio.to_thread(provider.wait_steered, 1, 10)
        await steering.get_by_role("button", name="Remove from Queue").click()
        await expect(page.locator("#notice")).to_contain_text("Refused chat/pendingMessageRemoved")
        await expect(steering).to_have_count(1)  # refused: still pending
        await asyncio.to_thread(provider.open, "g")
        await expect(turn(page, "long").locator(".turn-state")).to_have_text("complete")

    run(host, body)


@needs_browser
def test_the_page_refuses_a_wrong_token_and_connects_with_the_right_one(host: Host) -> None:
    async def body(page: Page) -> None:
        await expect(page.locator("#app")).to_be_hidden()
        await page.get_by_label("Access token").fill("not-the-token-not-the-token")
        await page.get_by_role("button", name="Connect").click()
        await expect(page.locator("#connection")).to_have_text(
            "Connection refused: check the token"
        )
        await expect(page.locator("#app")).to_be_hidden()
        await page.get_by_label("Access token").fill(TOKEN)
        await page.get_by_role("button", name="Connect").click()
        await expect(page.locator("#connection")).to_have_text("Connected (AHP 1.1.0)")
        await expect(page.locator("#login")).to_be_hidden()
        await expect(page.locator("#app")).to_be_visible()

    run(host, body, token=None)


@needs_browser
def test_the_page_lists_sessions_and_opens_one_from_its_snapshot(host: Host) -> None:
    async def body(page: Page) -> None:
        await new_session(page)
        await send(page, "in the first")
        await expect(turn(page, "in the first").locator(".turn-state")).to_have_text("complete")
        first = await page.locator("#sessions li button[aria-current=true]").get_attribute(
            "data-session"
        )
        await page.get_by_role("button", name="New session").click()
        await expect(page.locator("#sessions li")).to_have_count(2)
        await expect(page.locator("#turns li")).to_have_count(0)  # the new, empty session
        await page.locator(f'#sessions button[data-session="{first}"]').click()
        await expect(page.locator("#sessions li button[aria-current=true]")).to_have_attribute(
            "data-session", str(first)
        )
        await expect(turn(page, "in the first").locator(".reply")).to_have_text(
            "echo: in the first"
        )
        await expect(turn(page, "in the first").locator(".turn-state")).to_have_text("complete")

    run(host, body)


@needs_browser
def test_the_page_cancels_the_running_turn(host: Host, provider: ScriptedProvider) -> None:
    provider.on("long", Say("a"), Gate("g"), Say("b"))

    async def body(page: Page) -> None:
        await new_session(page)
        await send(page, "long")
        await expect(page.locator("#active-turn .reply")).to_have_text("a")
        await page.get_by_role("button", name="Cancel turn").click()
        await expect(turn(page, "long").locator(".turn-state")).to_have_text("cancelled")
        await expect(page.locator("#steer-form")).to_be_hidden()
        await expect(page.locator("#chat-status")).to_have_text("Idle")

    run(host, body)


@needs_browser
def test_the_page_says_why_a_turn_failed(host: Host, provider: ScriptedProvider) -> None:
    provider.on("boom", Say("partial"), Reject("the model is unavailable"))

    async def body(page: Page) -> None:
        await new_session(page)
        await send(page, "boom")
        state = turn(page, "boom").locator(".turn-state")
        await expect(state).to_contain_text("error: ")
        await expect(state).to_contain_text("the model is unavailable")
        await expect(page.locator("#chat-status")).to_have_text("Idle")

    run(host, body)
