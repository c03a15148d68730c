"""`agenthost chat` on a terminal: a `ChatClient` between the keyboard and the screen.

On a terminal (prompt_toolkit) the line being typed stays apart from the
reply streaming in: finished lines print above the input line, and the line
still streaming shows just above it, growing, until it ends. From a pipe
(stdin not a terminal) lines are read as they come and the text is printed
as is.
"""

import asyncio
import contextlib
import sys
import threading
import urllib.parse
from collections.abc import AsyncGenerator, Callable

import aiohttp
import attrs
from prompt_toolkit import PromptSession
from prompt_toolkit.input import Input
from prompt_toolkit.output import Output
from prompt_toolkit.patch_stdout import patch_stdout

from agenthost.server.chat_client import ChatClient, ChatError, not_one_session

PROMPT = "> "


@attrs.frozen(kw_only=True)
class ChatAddress:
    """Where `agenthost chat` connects: the AHP WebSocket URL, and the token the
    URL carried (`#token=`, as in the URL `agenthost serve` prints), if any."""

    url: str
    token: str | None = attrs.field(default=None, repr=False)


def chat_address(url: str) -> ChatAddress:
    """The WebSocket URL for a --url: ws:// and wss:// as given; http:// and
    https:// (the page's URL) as the server's /ahp beside it.

    Raises:
        ValueError: a URL of another kind, saying what to give.
    """
    parts = urllib.parse.urlsplit(url.strip())
    token = urllib.parse.parse_qs(parts.fragment).get("token", [None])[0]
    scheme = {"ws": "ws", "wss": "wss", "http": "ws", "https": "wss"}.get(parts.scheme.lower())
    if scheme is None or not parts.netloc:
        raise ValueError(
            f"{url!r} is not a WebSocket URL: give ws://HOST:PORT/ahp (or the http:// URL"
            " `agenthost serve` printed)"
        )
    path = parts.path
    if parts.scheme.lower().startswith("http") and path in ("", "/"):
        path = "/ahp"
    return ChatAddress(
        url=urllib.parse.urlunsplit((scheme, parts.netloc, path, parts.query, "")), token=token
    )


class Terminal:
    """The screen: `write` takes the client's text (partial lines too); whole
    lines go to `print_line` (above the input line), the partial one stays in
    `tail`, which the prompt shows above the input line until it ends."""

    def __init__(self, print_line: Callable[[str], None]) -> None:
        self.print_line = print_line
        self.tail = ""
        self.redraw: Callable[[], None] = lambda: None

    def write(self, text: str) -> None:
        text = self.tail + text
        if "\n" in text:
            done, text = text.rsplit("\n", 1)
            self.print_line(done)
        self.tail = text
        self.redraw()

    def prompt(self) -> str:
        return f"{self.tail}\n{PROMPT}" if self.tail else PROMPT


async def _keyboard(
    terminal: Terminal, input: Input | None = None, output: Output | None = None
) -> AsyncGenerator[str, None]:
    """Lines typed at a prompt_toolkit prompt; ends on Ctrl+D or Ctrl+C."""
    session: PromptSession[str] = PromptSession(input=input, output=output)
    terminal.redraw = lambda: session.app.invalidate() if session.app.is_running else None
    while True:
        try:
            yield await session.prompt_async(terminal.prompt)
        except (EOFError, KeyboardInterrupt):
            return


async def _piped() -> AsyncGenerator[str, None]:
    """Lines from stdin, read on a daemon thread, so a read in progress never
    keeps the process from exiting."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def read() -> None:
        try:
            for line in sys.stdin:
                loop.call_soon_threadsafe(queue.put_nowait, line)
            loop.call_soon_threadsafe(queue.put_nowait, None)
        except RuntimeError:  # the loop closed: the chat is over
            return

    threading.Thread(target=read, name="chat-stdin", daemon=True).start()
    while (line := await queue.get()) is not None:
        yield line


async def converse(client: ChatClient, lines: AsyncGenerator[str, None]) -> int:
    """Hand each line to the client until the user leaves (0) or the server
    closes the connection (1)."""
    closed = asyncio.get_running_loop().create_task(client.closed.wait())
    try:
        while True:
            line = asyncio.ensure_future(anext(lines, None))
            await asyncio.wait({line, closed}, return_when=asyncio.FIRST_COMPLETED)
            if not line.done():
                line.cancel()
                client.write("[the server closed the connection]\n")
                return 1
            text = line.result()
            if text is None or not await client.handle_line(text):
                return 0
    finally:
        closed.cancel()
        await lines.aclose()


async def run_chat(
    url: str,
    token: str,
    session: str | None,
    *,
    interactive: bool | None = None,
    input: Input | None = None,
    output: Output | None = None,
) -> int:
    """The `agenthost chat` loop. Returns the exit code. `interactive`: use
    prompt_toolkit (default: when stdin is a terminal); `input`/`output` are
    prompt_toolkit's, for tests."""
    if interactive is None:
        interactive = sys.stdin.isatty()

    def say(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def fail(why: str, what: str = "chat") -> int:
        print(f"agenthost: {what}: {why}", file=sys.stderr)
        return 1

    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as http:
        try:
            ws = await http.ws_connect(url, headers=headers)
        except aiohttp.WSServerHandshakeError as error:
            reason = "check the token" if error.status == 401 else error.message
            return fail(f"the server refused the connection ({error.status}: {reason})")
        except aiohttp.ClientError as error:
            return fail(f"cannot connect to {url}: {error}")
        terminal = Terminal(lambda line: say(line + "\n"))
        client = ChatClient(ws, terminal.write if interactive else say)
        try:
            with patch_stdout() if interactive else contextlib.nullcontext():
                version = await client.initialize()
                found = None if session is None else await client.matching(session)
                if found is not None and len(found) != 1:
                    return fail(not_one_session(found), f"--open {session}")
                client.write(f"[connected: AHP {version}; /help lists the commands]\n")
                if found is None:
                    await client.create_session()
                else:
                    await client.open_session(found[0])
                lines = _keyboard(terminal, input, output) if interactive else _piped()
                return await converse(client, lines)
        except (ChatError, TimeoutError) as error:
            return fail(str(error) or "the server did not answer in time")
        finally:
            await client.close()
