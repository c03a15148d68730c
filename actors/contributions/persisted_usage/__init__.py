"""persisted_usage (800): each turn's token usage is kept (a chat memento per
turn) and put back on the turns when the chat is restored. Not for
subagents' chats."""

import attrs

from agenthost.actors.contributions.base import ChatKey, Contribution, TurnEnd
from agenthost.actors.contributions.services import Mementos
from agenthost.messages.state import Turn, Usage


class PersistedUsage(Contribution):
    id = "persisted_usage"
    order = 800

    def __init__(self, mementos: Mementos) -> None:
        self._mementos = mementos

    def on_turn_end(self, end: TurnEnd) -> None:
        turn = end.turn
        if end.subagent or turn is None or turn.usage is None:
            return
        usage = [turn.usage.prompt_tokens, turn.usage.completion_tokens]
        self._mementos.set(end.chat, "usage", turn.id, value=usage)

    def on_hydrate_turns(self, turns: tuple[Turn, ...], *, chat: ChatKey) -> tuple[Turn, ...]:
        def restored(turn: Turn) -> Turn:
            stored = self._mementos.get(chat, "usage", turn.id)
            if turn.usage is not None or stored is None:
                return turn
            prompt, completion = stored
            return attrs.evolve(
                turn, usage=Usage(prompt_tokens=prompt, completion_tokens=completion)
            )

        return tuple(restored(turn) for turn in turns)
