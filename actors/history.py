"""A stateless provider's history: what an OpenAI-compatible endpoint is sent."""

from agenthost.messages.provider import HistoryMessage
from agenthost.messages.state import Turn, TurnState

NO_REPLY = {
    TurnState.COMPLETE: "[no reply]",
    TurnState.CANCELLED: "[no reply: the user cancelled this turn]",
    TurnState.ERROR: "[no reply: this turn failed]",
}


def history(turns: tuple[Turn, ...]) -> tuple[HistoryMessage, ...]:
    """Strictly alternating user and assistant messages, one pair per finished
    turn, oldest first (the system instructions and the new turn's text are
    the provider's to add around it).

    Every turn contributes its user message (with steering folded into it, in
    order) and the assistant text stored for it, whatever its end. A turn that
    stored no assistant text (it failed or was cancelled before a word, or the
    provider said nothing) gets a placeholder saying so, rather than being
    merged with the next user message: merging would replay its question as
    part of a later prompt, and the model would answer it again.
    """
    messages: list[HistoryMessage] = []
    for turn in turns:
        user = "\n\n".join([turn.message.prompt, *(s.text for s in turn.steering)])
        messages.append(HistoryMessage(role="user", text=user))
        assistant = turn.assistant_text or NO_REPLY[turn.state]
        messages.append(HistoryMessage(role="assistant", text=assistant))
    return tuple(messages)
