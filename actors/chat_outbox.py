"""What the turn tracker sends its chat, held back until the tracker flushes.

A plain object the turn tracker holds (its thread only). Invariants:
1. Order is kept: the chat hears messages in the order they were queued.
2. Consecutive actions merge into one ApplyActions (a run of deltas is one
   message, reduced by the chat at once); a message in between starts a new run.
   Pieces of text in a row to one part (`text`) go as one DeltaRun. A turn's
   EndTurn right behind its AssistantStable carries that text (`stable`)
   instead of both going.
3. A flush delivers everything queued since the last one as one message (a
   ChatBatch when there are several), and nothing when nothing is queued.
Actions are stamped with the tracker's session and chat ids.
"""

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs

from agenthost.actors.protocol import ApplyActions, AssistantStable, ChatBatch, DeltaRun, EndTurn
from agenthost.messages.events import ChatEvent
from agenthost.messages.reduction import replace

E = TypeVar("E", bound=ChatEvent)


@attrs.define
class _Pieces:
    """A DeltaRun being gathered."""

    turn_id: str
    part_id: str
    texts: list[str]


class ChatOutbox:
    def __init__(self, session_id: str, chat_id: str, deliver: Callable[[object], Any]) -> None:
        self.session_id = session_id
        self.chat_id = chat_id
        self._deliver = deliver  # one message to the chat
        self._out: list[Any] = []  # messages, and runs of actions (lists)
        self._pieces: _Pieces | None = None  # the DeltaRun being gathered, if last queued

    def stamp(self, event: E) -> E:
        """`event` naming this tracker's session and chat."""
        return replace(event, session_id=self.session_id, chat_id=self.chat_id)

    def new(self, event_type: type[E], **fields: Any) -> E:
        """An event naming this tracker's session and chat: `stamp` of one made
        with `fields`, without the copy."""
        return event_type(session_id=self.session_id, chat_id=self.chat_id, **fields)

    def message(self, message: object) -> None:
        """Queue `message` for the chat; an ApplyActions joins the last run of
        actions, and a turn's end takes the AssistantStable of its turn queued
        just before it."""
        if isinstance(message, ApplyActions):
            self.actions(message.actions)
            return
        self._pieces = None
        out = self._out
        if type(message) is EndTurn and out and type(out[-1]) is AssistantStable:
            stable = out[-1]
            if stable.turn_id == message.action.turn_id and not message.stable:  # type: ignore[attr-defined]
                out[-1] = replace(message, stable=stable.text)
                return
        out.append(message)

    def actions(self, actions: tuple[ChatEvent | DeltaRun, ...]) -> None:
        """Queue actions, already stamped (they join the run of actions queued last)."""
        self._pieces = None
        out = self._out
        if out and isinstance(out[-1], list):
            out[-1].extend(actions)
        else:
            out.append(list(actions))

    def apply(self, action: ChatEvent) -> None:
        """Queue one action, stamped."""
        self.actions((self.stamp(action),))

    def text(self, turn_id: str, part_id: str, texts: Sequence[str]) -> None:
        """Queue pieces of streamed text to a part: with the pieces queued just
        before them to the same part, one DeltaRun."""
        pieces = self._pieces
        if pieces is not None and pieces.part_id == part_id and pieces.turn_id == turn_id:
            pieces.texts.extend(texts)
            return
        pieces = _Pieces(turn_id, part_id, list(texts))
        self.actions((pieces,))  # type: ignore[arg-type]
        self._pieces = pieces

    def _run(self, actions: list[Any]) -> ApplyActions:
        return ApplyActions(
            actions=tuple(
                [
                    DeltaRun(
                        session_id=self.session_id,
                        chat_id=self.chat_id,
                        turn_id=a.turn_id,
                        part_id=a.part_id,
                        texts=tuple(a.texts),
                    )
                    if type(a) is _Pieces
                    else a
                    for a in actions
                ]
            )
        )

    def flush(self) -> None:
        """Deliver what was queued since the last flush, as one message."""
        out = self._out
        if not out:
            return
        self._out, self._pieces = [], None
        messages = [self._run(m) if isinstance(m, list) else m for m in out]
        self._deliver(messages[0] if len(messages) == 1 else ChatBatch(messages=tuple(messages)))
