"""`agenthost chat` on a real terminal: a pseudo-terminal, so prompt_toolkit runs
as it does for a person (the other chat tests feed it a pipe).

The chat runs as the installed command would, in a child process whose
stdin, stdout and stderr are the pty; the server runs in this process. The
test reads the screen with bounded waits (select with a deadline), never
for a time.
"""

import asyncio
import os
import pty
import re
import select
import subprocess
import sys
import time

from agenthost.actors import Host
from agenthost.providers.scripted import Gate, Say, ScriptedProvider
from tests.server.ahp_client import TOKEN, WAIT_S, Server, running

ESCAPES = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][A-Z0-9]|[=>])")


class PtyScreen:
    """What the child printed on the terminal, escape sequences left out. Whole
    lines printed above the prompt read as they are; what prompt_toolkit draws
    in its own area comes as differences, a needle there is one write's text."""

    def __init__(self, master: int) -> None:
        self.master = master
        self.raw = ""
        self.seen = 0

    @property
    def text(self) -> str:
        return ESCAPES.sub("", self.raw).replace("\r", "")

    def shows(self, needle: str) -> str:
        """Wait (at most WAIT_S) until `needle` is printed after the last match."""
        deadline = time.monotonic() + WAIT_S
        while (at := self.text.find(needle, self.seen)) < 0:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.master], [], [], left)[0]:
                raise AssertionError(f"{needle!r} never shown after:\n{self.text[self.seen :]}")
            try:
                self.raw += os.read(self.master, 65536).decode(errors="replace")
            except OSError:  # the child closed the terminal
                raise AssertionError(f"{needle!r} never shown:\n{self.text[self.seen :]}") from None
        between = self.text[self.seen : at]
        self.seen = at + len(needle)
        return between

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def closed(self) -> None:
        """Read on (the child must never block on a full terminal) until it closes it."""
        deadline = time.monotonic() + WAIT_S
        while (left := deadline - time.monotonic()) > 0:
            if select.select([self.master], [], [], left)[0]:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # EIO: every holder of the terminal closed it
                    return
                if not chunk:
                    return
                self.raw += chunk.decode(errors="replace")
        raise AssertionError(f"the chat never closed the terminal:\n{self.text[self.seen :]}")


def test_chat_on_a_terminal_keeps_what_is_typed_while_a_reply_streams(
    host: Host, provider: ScriptedProvider
) -> None:
    provider.on("long", Say("first half"), Gate("g"), Say(" and the rest"))

    async def body(server: Server) -> None:
        master, slave = pty.openpty()
        url = server.url.replace("http", "ws", 1) + "ahp"
        child = subprocess.Popen(
            [sys.executable, "-m", "agenthost.server.cli", "chat", "--url", url],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={
                **os.environ,
                "AGENTHOST_TOKEN": TOKEN,
                "TERM": "xterm",
                "PROMPT_TOOLKIT_NO_CPR": "1",  # no cursor-position answers to wait for
                "COLUMNS": "100",
                "LINES": "30",
            },
            start_new_session=True,
        )
        os.close(slave)
        screen = PtyScreen(master)
        try:
            await asyncio.to_thread(screen.shows, "/help lists the commands]")
            await asyncio.to_thread(screen.shows, "nothing pending]")
            await asyncio.to_thread(screen.shows, ">")  # the prompt is up: keys reach it
            screen.type("long\r")
            # (the line still streaming is drawn above the prompt, where prompt_toolkit
            # redraws only what changed: so a needle there is what one write brought)
            await asyncio.to_thread(screen.shows, "first half")
            await asyncio.to_thread(provider.wait_reached, "g", 10)
            screen.type("half a thou")  # typed, not sent, while the reply streams
            await asyncio.to_thread(screen.shows, "half a thou")
            provider.open("g")
            await asyncio.to_thread(screen.shows, "[turn complete]")
            # Each line printed above the prompt is printed with the terminal in cooked mode
            # for a moment (prompt_toolkit's run_in_terminal), where Enter and Ctrl+D are the
            # line discipline's: keys like those wait for the prompt to be drawn again.
            await asyncio.to_thread(screen.shows, ">")
            screen.type("ght\r")  # the line typed before the reply ended, whole
            await asyncio.to_thread(screen.shows, "you: half a thought\n")
            await asyncio.to_thread(screen.shows, "echo: half a thought\n[turn complete]")
            await asyncio.to_thread(screen.shows, ">")
            screen.type("\x04")  # Ctrl+D leaves
            await asyncio.to_thread(screen.closed)
            assert await asyncio.to_thread(child.wait, WAIT_S) == 0
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(WAIT_S)
            os.close(master)
        assert "Traceback" not in screen.text and "Warning" not in screen.text
        assert "half a thought" in provider.prompts

    async def main() -> None:
        async with running(host) as server:
            await body(server)

    asyncio.run(main())
