"""`completions`: what a user composing a message in a chat may complete, from
what the host's contributions declare (`Contribution.commands`, read with
`AsyncHost.commands()`, less those of contributions the chat's session
turned off): the built-in /rename and /help, and any slash
command another contribution handles.

A command completes where the message starts with a slash and the caret
(`offset`, in UTF-16 code units as AHP counts them) is inside that first
word: every declared command whose name begins with what was typed, the
range to replace being that word. Other kinds of completion, or a caret
elsewhere, have no items. `initialize` announces "/" as the trigger
character. Each item carries the command as a `simple` attachment whose
text is its usage line (`displayKind: command`): AHP's CompletionItem has
one, and a command is what the item stands for.

Pure but for the ownership check: a chat the caller may not see is "not
found", as for every other request.
"""

import re
from typing import TYPE_CHECKING

from agenthost.actors.contributions import Command
from agenthost.actors.contributions.customizations import disabled
from agenthost.messages import protocol as p
from agenthost.messages.parts import Attachment
from agenthost.server.channels import CHAT_PREFIX

if TYPE_CHECKING:
    from agenthost.server.connection import Connection

USER_MESSAGE = "userMessage"
"""AHP's CompletionItemKind for a message being composed."""
TRIGGERS = ("/",)
"""What initialize's completionTriggerCharacters announces."""

_COMMAND_WORD = re.compile(r"\s*(/\S*)")


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _index(text: str, offset: int) -> int:
    """The Python index at `offset` UTF-16 code units into `text` (clamped)."""
    units = 0
    for index, char in enumerate(text):
        if units >= offset:
            return index
        units += 2 if ord(char) > 0xFFFF else 1
    return len(text)


def complete(commands: tuple[Command, ...], text: str, offset: int) -> tuple[p.CompletionItem, ...]:
    """The commands that complete the slash word the caret is in."""
    caret = _index(text, offset)
    word = _COMMAND_WORD.match(text)
    if word is None or not word.start(1) < caret <= word.end(1):
        return ()
    typed = text[word.start(1) : caret]
    start, end = _utf16(text[: word.start(1)]), _utf16(text[: word.end(1)])
    return tuple(
        p.CompletionItem(
            insert_text=command.insert_text,
            range_start=start,
            range_end=end,
            attachment=Attachment(
                name=command.name,
                text=" ".join(filter(None, (command.name, command.usage)))
                + f": {command.description}",
                display_kind="command",
            ),
        )
        for command in commands
        if command.name.startswith(typed)
    )


async def completions(conn: "Connection", params: p.CompletionsParams) -> p.CompletionsResult:
    session, _ = await conn.server.registry.chat(
        params.channel.removeprefix(CHAT_PREFIX), conn.identity
    )
    if params.kind != USER_MESSAGE:
        return p.CompletionsResult()
    turned_off = disabled((await session.state()).customizations)
    items = complete(conn.server.host.commands(turned_off), params.text, params.offset)
    return p.CompletionsResult(items=items)
