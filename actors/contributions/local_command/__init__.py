"""local_command (50): slash commands handled without a turn.

`/rename <title>` renames the chat (and, for the session's default chat, the
session: see session_title); it runs before admission, so it works in
read-only chats and archived sessions. `/help` lists the commands. Any
other text, slash or not, goes on to the model.
"""

from agenthost.actors.contributions.base import (
    ACCEPT,
    Command,
    Contribution,
    Handled,
    IncomingRequest,
    Reject,
    Verdict,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import ChatTitleChanged

MAX_TITLE = 200
RENAME = Command(name="/rename", usage="<title>", description="names this chat")
HELP_COMMAND = Command(name="/help", description="shows this list")
HELP = "Commands: /rename <title> names this chat; /help shows this list."


class LocalCommand(Contribution):
    id = "local_command"
    order = 50
    description = "Handles the slash commands /rename and /help without a turn."
    commands = (RENAME, HELP_COMMAND)

    def on_incoming_request(self, request: IncomingRequest) -> Verdict:
        command, _, argument = request.text.strip().partition(" ")
        if command == "/help":
            return Handled(reply=HELP)
        if command != "/rename":
            return ACCEPT
        title = " ".join(argument.split())
        if not title or len(title) > MAX_TITLE:
            return Reject(
                error=AgentHostError(
                    code=ErrorCode.INVALID_ARGUMENT,
                    message=f"Usage: /rename <title> (1 to {MAX_TITLE} characters).",
                )
            )
        return Handled(
            reply=f"Renamed to {title}.", actions=(ChatTitleChanged(title=title, by_user=True),)
        )
