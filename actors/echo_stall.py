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
"""

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from agenthost.messages.provider import ProviderEvent, UserMessageEcho


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

    def events(
        self, events: Sequence[ProviderEvent], handle: Callable[[ProviderEvent], Any]
    ) -> None:
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
