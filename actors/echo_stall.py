"""An echo the queue drain is matching, and what the tracker holds behind it.

A plain object the turn tracker holds (its thread only). While an echo that
is not the turn's own message is being matched (it may be steering, and may
start a turn of its own), the tracker handles nothing else: the provider's
later events, and the messages that arrive meanwhile (a cancel must see the
turn the echo may have started), wait here in order. Invariants:
1. Items are handled in the order they came, provider events and messages alike.
2. While stalled nothing is handled; once matched, the held items are handled
   in order, until one of them stalls again (the rest wait for that match).
3. Only the match of the current stall (its token) ends it.
The tracker hands it a burst with each run of plain text deltas as one
TextRun (`text_runs`): only an echo stalls, so no run is ever split.
"""

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from agenthost.messages.provider import ProviderEvent, ReplyDelta, UserMessageEcho


@attrs.define
class TextRun:
    """Plain ReplyDeltas in a row of one burst, for one turn key: the tracker
    takes their pieces at once. An echo never sits inside one, so a stall
    never begins in it."""

    turn_id: str
    texts: list[str]


def text_runs(events: Sequence[ProviderEvent]) -> list[ProviderEvent | TextRun]:
    """`events`, each run of plain ReplyDeltas (no subagent's) of one turn key as
    a TextRun, in order."""
    items: list[ProviderEvent | TextRun] = []
    run: TextRun | None = None
    for event in events:
        if type(event) is ReplyDelta and event.subagent_id is None:
            if run is not None and run.turn_id == event.turn_id:
                run.texts.append(event.text)
                continue
            run = TextRun(event.turn_id, [event.text])
            items.append(run)
            continue
        run = None
        items.append(event)
    return items


@attrs.frozen
class Held:
    """One item held behind a stall: a provider event, or a message to the tracker."""

    item: Any
    from_provider: bool


@attrs.frozen
class Released:
    """A matched stall: its echo, and what was held behind it, in order."""

    echo: UserMessageEcho
    held: tuple[Held, ...]


class EchoStall:
    def __init__(self) -> None:
        self._tokens = 0
        self._echo: UserMessageEcho | None = None
        self._held: list[Held] = []

    @property
    def stalled(self) -> bool:
        return self._echo is not None

    def begin(self, echo: UserMessageEcho) -> int:
        """Stall on `echo`; returns the token its match must carry."""
        self._tokens += 1
        self._echo = echo
        return self._tokens

    def hold(self, message: Any) -> None:
        """A message to the tracker waits for the match."""
        self._held.append(Held(message, from_provider=False))

    def events(self, events: Sequence[Any], handle: Callable[[Any], Any]) -> None:
        """Handle provider events in order; from the one that stalls on, they wait."""
        for index, event in enumerate(events):
            if self._echo is not None:  # stalled
                self._held.extend(Held(e, from_provider=True) for e in events[index:])
                return
            handle(event)

    def matched(self, token: int) -> Released | None:
        """The match for `token` came: the stall ends (None: `token` is not the
        current stall's, and nothing changes)."""
        echo = self._echo
        if echo is None or token != self._tokens:
            return None
        released = Released(echo=echo, held=tuple(self._held))
        self._echo, self._held = None, []
        return released

    def replay(self, held: Sequence[Held], handle: Callable[[Held], Any]) -> None:
        """Handle held items in order; from the one that stalls again on, they wait."""
        for index, entry in enumerate(held):
            if self.stalled:
                self._held.extend(held[index:])
                return
            handle(entry)
