"""The steering ledger: every steering message of one chat from the moment a
client sends it until it is consumed, withdrawn, dropped or requeued.

A plain object, owned by the chat's QueueDrainActor (the one copy: no other
actor keeps these entries). Each operation changes the ledger and returns
what the actor must do about it, as values; the actor does the sending.

An entry's stage:
- PREPARING: the tracker is handing it to the provider (or holding it until
  its turn is sent);
- HELD: the provider takes no input mid-turn: it runs as the next turn;
- SENT: the provider has it; `provider_message_id` once the provider said;
- CONSUMING: an echo of it was matched; it leaves once the tracker applied the
  echo (`consumed`), or is requeued if the provider died first.

DESIGN.md rule 1: a client's removal of a message the provider holds is a
request (withdraw where the provider can; reject where it cannot); a
message not yet sent is simply dropped; removals the host makes itself
(consumed, cancelled) never withdraw. Echoes match by provider message id
first, by text only where an id is missing (oldest first, one being
withdrawn last).
"""

import enum

import attrs

from agenthost.actors.protocol import Handled, RemovalOutcome
from agenthost.messages.provider import UserMessageEcho


class Stage(enum.Enum):
    PREPARING = "preparing"
    HELD = "held"
    SENT = "sent"
    CONSUMING = "consuming"  # an echo matched it; the tracker applies it (or its provider died)


@attrs.define
class Entry:
    pending_id: str
    text: str
    stage: Stage = Stage.PREPARING
    provider_message_id: str | None = None
    withdrawing: bool = False  # a withdraw is on its way to the provider
    removal_wanted: bool = False  # a client asked to remove it; waiting to know how


@attrs.frozen
class Settle:
    """A client's removal ended: tell the chat."""

    pending_id: str
    outcome: RemovalOutcome


@attrs.frozen
class Withdraw:
    """Ask the provider to take it back."""

    pending_id: str
    provider_message_id: str
    text: str


@attrs.frozen
class Requeue:
    """It goes back to the chat's queue, at the head."""

    pending_id: str


@attrs.frozen
class Unpark:
    """Ask the tracker to drop it, if it has not handed it over yet."""

    pending_id: str


@attrs.frozen
class Cancel:
    """A cancel ended the run these were for: the host's own removal."""

    pending_ids: tuple[str, ...]


Effect = Settle | Withdraw | Requeue | Cancel | Unpark


class SteeringLedger:
    """One chat's steering messages, oldest first. See the module docstring."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}

    def __contains__(self, pending_id: str) -> bool:
        return pending_id in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, pending_id: str) -> Entry | None:
        return self._entries.get(pending_id)

    def held(self) -> tuple[str, ...]:
        """Held messages, oldest first: each runs as a turn of its own."""
        return tuple(e.pending_id for e in self._entries.values() if e.stage is Stage.HELD)

    def on_provider(self) -> bool:
        """Whether the provider has (or is being handed) any: queued messages wait."""
        return any(e.stage is not Stage.HELD for e in self._entries.values())

    def consumed(self, pending_id: str) -> None:
        """The tracker applied the echo that consumed it."""
        self._entries.pop(pending_id, None)

    # -- a message's way in ---------------------------------------------------------
    def add(self, pending_id: str, text: str) -> None:
        """A client steered: the tracker is handing it over."""
        self._entries[pending_id] = Entry(pending_id, text)

    def handled(self, pending_id: str, how: Handled, may_withdraw: bool) -> list[Effect]:
        """The tracker handed it over, held it, or dropped it."""
        entry = self._entries.get(pending_id)
        if entry is None:
            return []
        if how is Handled.CANCELLED:
            del self._entries[pending_id]
            return [Cancel((pending_id,))]
        if how is Handled.DROPPED:
            del self._entries[pending_id]
            return [Settle(pending_id, RemovalOutcome.DROPPED)]
        if how is Handled.REQUEUED:
            del self._entries[pending_id]
            if entry.removal_wanted:
                return [Settle(pending_id, RemovalOutcome.DROPPED)]
            return [Requeue(pending_id)]
        entry.stage = Stage.HELD if how is Handled.HELD else Stage.SENT
        if not entry.removal_wanted:
            return []
        if entry.stage is Stage.HELD:  # the tracker's report overtook our Unpark
            del self._entries[pending_id]
            return [Settle(pending_id, RemovalOutcome.DROPPED)]
        return self._withdraw_or_reject(entry, may_withdraw)

    def answered(
        self, pending_id: str, provider_message_id: str | None, refused: bool, may_withdraw: bool
    ) -> list[Effect]:
        """The provider answered the steer call: its id, or a refusal (then the
        message goes back to the queue, unless a client is removing it)."""
        entry = self._entries.get(pending_id)
        if entry is None:
            return []
        if refused:
            del self._entries[pending_id]
            if entry.removal_wanted:
                return [Settle(pending_id, RemovalOutcome.DROPPED)]
            return [Requeue(pending_id)]
        entry.provider_message_id = provider_message_id
        if entry.removal_wanted and not entry.withdrawing:
            return self._withdraw_or_reject(entry, may_withdraw)
        return []

    # -- a client's removal -------------------------------------------------------
    def remove(self, pending_id: str, may_withdraw: bool) -> list[Effect]:
        entry = self._entries.get(pending_id)
        if entry is None or entry.stage is Stage.CONSUMING:
            return [Settle(pending_id, RemovalOutcome.GONE)]
        if entry.stage is Stage.HELD:
            del self._entries[pending_id]
            return [Settle(pending_id, RemovalOutcome.DROPPED)]
        if entry.removal_wanted or entry.withdrawing:
            return []  # a removal of it is under way already
        entry.removal_wanted = True
        if entry.stage is Stage.PREPARING:
            return [Unpark(pending_id)]  # dropped if not handed over yet
        return self._withdraw_or_reject(entry, may_withdraw)

    def _withdraw_or_reject(self, entry: Entry, may_withdraw: bool) -> list[Effect]:
        if not may_withdraw:
            entry.removal_wanted = False
            return [Settle(entry.pending_id, RemovalOutcome.REJECTED)]
        if entry.provider_message_id is None:
            return []  # withdraw once the provider tells us its id
        entry.withdrawing = True
        entry.removal_wanted = False
        return [Withdraw(entry.pending_id, entry.provider_message_id, entry.text)]

    def withdrawn(self, pending_id: str, removed: bool) -> list[Effect]:
        """The provider answered a withdraw."""
        entry = self._entries.get(pending_id)
        if entry is None or entry.stage is Stage.CONSUMING:  # the model had it
            return [Settle(pending_id, RemovalOutcome.NOT_WITHDRAWN)]
        entry.withdrawing = False
        if removed:
            del self._entries[pending_id]
            return [Settle(pending_id, RemovalOutcome.WITHDRAWN)]
        return [Settle(pending_id, RemovalOutcome.NOT_WITHDRAWN)]

    # -- the host's own removals --------------------------------------------------------
    def match(self, echo: UserMessageEcho) -> Entry | None:
        """The entry an echo consumed (now CONSUMING), or None: by provider message
        id first; by exact text only where an id is missing."""
        entries = [e for e in self._entries.values() if e.stage is Stage.SENT]
        found = None
        if echo.provider_message_id is not None:
            found = next(
                (e for e in entries if e.provider_message_id == echo.provider_message_id), None
            )
            entries = [e for e in entries if e.provider_message_id is None]
        if found is None:
            same_text = [e for e in entries if e.text == echo.text]
            same_text.sort(key=lambda e: e.withdrawing)  # stable: oldest first, withdrawing last
            found = same_text[0] if same_text else None
        if found is not None:
            found.stage = Stage.CONSUMING
        return found

    def cancelled(self) -> list[Effect]:
        """A cancel ended the run the provider's messages were for: they go with
        it, never withdrawn (the tracker reports those it had not handed over)."""
        gone = tuple(e.pending_id for e in self._entries.values() if e.stage is Stage.SENT)
        for pending_id in gone:
            del self._entries[pending_id]
        return [Cancel(gone)] if gone else []

    def provider_gone(self) -> list[Effect]:
        """The provider that had them is gone: nothing is lost, they are requeued
        (a message a client was removing is simply dropped). Those the tracker
        had not handed over yet it reports itself (REQUEUED)."""
        effects: list[Effect] = []
        gone = (Stage.SENT, Stage.CONSUMING)  # an echo its tracker will not apply now
        for entry in [e for e in self._entries.values() if e.stage in gone]:
            del self._entries[entry.pending_id]
            if entry.removal_wanted or entry.withdrawing:
                effects.append(Settle(entry.pending_id, RemovalOutcome.DROPPED))
            else:
                effects.append(Requeue(entry.pending_id))
        return effects

    def take_held(self, pending_id: str) -> bool:
        """A held message starts its turn: it leaves the ledger."""
        entry = self._entries.get(pending_id)
        if entry is None or entry.stage is not Stage.HELD:
            return False
        del self._entries[pending_id]
        return True
