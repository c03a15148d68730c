"""The dispatcher: runs each hook over the registered contributions in order.

Order is `order` ascending, ties in registration order. Admission
(on_incoming_request) fails closed: the first non-accept wins, and a
contribution that raises rejects the request naming itself. Observer hooks
are isolated: one that raises is logged and the next runs. Outgoing turns
thread text replacements through in order and concatenate instructions; a
failing stage adds nothing. Hydration passes the previous value on past a
failing stage.

A session may turn contributions off (its customizations): `without(ids)` is
the dispatcher of the others, built once per set of ids and kept, so a chat
resolves its dispatcher when its session's set changes and a turn costs
nothing more than with every contribution on.
"""

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import attrs
import structlog

from agenthost.actors.contributions.base import (
    ACCEPT,
    HOOKS,
    Accept,
    ChatKey,
    ClientAction,
    Command,
    Contribution,
    Dispatch,
    Handled,
    IncomingRequest,
    OutgoingTurn,
    Reject,
    TurnEnd,
    Verdict,
    overrides,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.reduction import replace
from agenthost.messages.state import Turn

log = structlog.get_logger(__name__)

T = TypeVar("T")


class ContributionError(ValueError):
    """A contribution cannot be registered or constructed."""


@attrs.frozen(kw_only=True)
class OutgoingResult:
    text: str
    instructions: str = ""


Takers = tuple[tuple[Contribution, ...], tuple[Contribution, ...]]
"""A dispatched action's observers (on_did_dispatch_action) and appliers
(on_did_apply_client_action)."""


class Dispatcher:
    """The host's contributions, constructed, sorted, and indexed by hook."""

    def __init__(self, contributions: Sequence[Contribution]) -> None:
        indexed = sorted(enumerate(contributions), key=lambda pair: (pair[1].order, pair[0]))
        self.contributions: tuple[Contribution, ...] = tuple(c for _, c in indexed)
        self._by_hook: dict[str, tuple[Contribution, ...]] = {
            hook: tuple(c for c in self.contributions if overrides(c, hook)) for hook in HOOKS
        }
        self._observers: dict[type, tuple[Contribution, ...]] = {}  # by action type
        self._appliers: dict[type, tuple[Contribution, ...]] = {}  # by action type
        self._without: dict[frozenset[str], Dispatcher] = {}  # by the ids turned off

    def without(self, ids: frozenset[str]) -> "Dispatcher":
        """The dispatcher of every contribution but those in `ids` (none: this
        one). Called from any actor's thread; building one twice is harmless."""
        if not ids:
            return self
        found = self._without.get(ids)
        if found is None:
            kept = [c for c in self.contributions if c.id not in ids]
            found = self._without[ids] = Dispatcher(kept)
        return found

    def commands(self) -> tuple[Command, ...]:
        """Every declared slash command, in the order the contributions run
        (a name declared twice: the first)."""
        found: dict[str, Command] = {}
        for contribution in self.contributions:
            for command in contribution.commands:
                found.setdefault(command.name, command)
        return tuple(found.values())

    def ids(self, hook: str | None = None) -> list[str]:
        """Contribution ids in the order they run (for `hook`, those that implement it)."""
        chosen = self.contributions if hook is None else self._by_hook[hook]
        return [c.id for c in chosen]

    # -- admission -----------------------------------------------------------------------
    def incoming(self, request: IncomingRequest) -> Verdict:
        for contribution in self._by_hook["on_incoming_request"]:
            try:
                verdict = contribution.on_incoming_request(request)
            except Exception:
                log.exception("contribution_failed", contribution=contribution.id, hook="admission")
                return Reject(
                    error=AgentHostError(
                        code=ErrorCode.INTERNAL,
                        message=f"The contribution {contribution.id!r} failed on this request.",
                    ),
                    stage=contribution.id,
                )
            if verdict is None or isinstance(verdict, Accept):
                continue
            if isinstance(verdict, Reject) and not verdict.stage:
                verdict = attrs.evolve(verdict, stage=contribution.id)
            if isinstance(verdict, Handled | Reject):
                return verdict
        return ACCEPT

    # -- observers -----------------------------------------------------------------------
    def _observe(
        self, hook: str, value: Any, contributions: Iterable[Contribution] | None = None
    ) -> None:
        for contribution in self._by_hook[hook] if contributions is None else contributions:
            try:
                getattr(contribution, hook)(value)
            except Exception:
                log.exception("contribution_failed", contribution=contribution.id, hook=hook)

    def turn_end(self, end: TurnEnd) -> None:
        self._observe("on_turn_end", end)

    def did_apply_client_action(self, applied: ClientAction) -> None:
        self._observe("on_did_apply_client_action", applied, self.appliers(type(applied.action)))

    def did_dispatch(self, dispatch: Dispatch) -> None:
        self._observe("on_did_dispatch_action", dispatch, self.observers(type(dispatch.action)))

    def observers(self, action_type: type) -> tuple[Contribution, ...]:
        """The contributions whose on_did_dispatch_action observes `action_type`, in order."""
        return self._takers(self._observers, "on_did_dispatch_action", "observes", action_type)

    def appliers(self, action_type: type) -> tuple[Contribution, ...]:
        """The contributions whose on_did_apply_client_action takes `action_type`, in order."""
        return self._takers(self._appliers, "on_did_apply_client_action", "applies", action_type)

    def _takers(
        self,
        cache: dict[type, tuple[Contribution, ...]],
        hook: str,
        types_named: str,
        action_type: type,
    ) -> tuple[Contribution, ...]:
        """Those implementing `hook` whose `types_named` (None: every type)
        includes `action_type`, looked up once per type."""
        takers = cache.get(action_type)
        if takers is None:
            takers = cache[action_type] = tuple(
                c
                for c in self._by_hook[hook]
                if (types := getattr(c, types_named)) is None or issubclass(action_type, types)
            )
        return takers

    def takers(self, action_type: type, from_client: bool, rejected: bool = False) -> Takers:
        """Who hears a dispatched action of this type: its observers, and, for a
        client's action that was applied, the contributions that take it."""
        applied = from_client and not rejected
        return self.observers(action_type), self.appliers(action_type) if applied else ()

    def wants(self, action_type: type, from_client: bool) -> bool:
        """Whether a dispatched action of this type reaches any contribution."""
        return any(self.takers(action_type, from_client))

    def action_done(self, dispatch: Dispatch, takers: Takers | None = None) -> None:
        """An action was dispatched: observed by those that observe its type,
        and, when a client's action was applied, by on_did_apply_client_action
        too (those that take its type). A caller that looked `takers` up
        already passes them."""
        if takers is None:
            kind = type(dispatch.action)
            takers = self.takers(kind, dispatch.from_client, dispatch.rejection is not None)
        observers, appliers = takers
        if observers:
            self.did_dispatch(dispatch)
        if appliers:
            self.did_apply_client_action(
                ClientAction(
                    chat=dispatch.chat,
                    action=dispatch.action,
                    client_id=dispatch.client_id,
                    state=dispatch.state,
                    session=dispatch.session,
                )
            )

    # -- transforms ----------------------------------------------------------------------
    def outgoing(self, turn: OutgoingTurn) -> OutgoingResult:
        text = turn.text
        instructions: list[str] = []
        for contribution in self._by_hook["on_outgoing_turn"]:
            try:
                change = contribution.on_outgoing_turn(
                    turn if text is turn.text else replace(turn, text=text)
                )
            except Exception:
                log.exception("contribution_failed", contribution=contribution.id, hook="outgoing")
                continue
            if change is None:
                continue
            if change.text is not None:
                text = change.text
            if change.instructions:
                instructions.append(change.instructions)
        return OutgoingResult(text=text, instructions="\n\n".join(instructions))

    def _fold(self, hook: str, value: T, step: Callable[[Contribution, T], T]) -> T:
        for contribution in self._by_hook[hook]:
            try:
                value = step(contribution, value)
            except Exception:
                log.exception("contribution_failed", contribution=contribution.id, hook=hook)
        return value

    def hydrate_turns(self, turns: tuple[Turn, ...], chat: ChatKey) -> tuple[Turn, ...]:
        return self._fold(
            "on_hydrate_turns", turns, lambda c, value: tuple(c.on_hydrate_turns(value, chat=chat))
        )

    def hydrate_chat(self, title: str, draft: str | None, chat: ChatKey) -> tuple[str, str | None]:
        def step(c: Contribution, value: tuple[str, str | None]) -> tuple[str, str | None]:
            new_title, new_draft = c.on_hydrate_chat(*value, chat=chat)
            return str(new_title), new_draft

        return self._fold("on_hydrate_chat", (title, draft), step)


def check_ids(classes: Iterable[type[Contribution]]) -> None:
    """Every class has an id, and no id is registered twice.

    Raises:
        ContributionError: naming the id and both classes.
    """
    seen: dict[str, type[Contribution]] = {}
    for cls in classes:
        if not cls.id:
            raise ContributionError(f"{cls.__qualname__} has no id")
        if cls.id in seen:
            raise ContributionError(
                f"contribution id {cls.id!r} is registered twice "
                f"({seen[cls.id].__qualname__} and {cls.__qualname__})"
            )
        seen[cls.id] = cls


def build_dispatcher(
    classes: Iterable[type[Contribution]], services: Mapping[str, Callable[[str], Any]]
) -> Dispatcher:
    """Construct each contribution class once, injecting by constructor parameter name.

    `services` maps a parameter name to a factory taking the contribution's id.

    Raises:
        ContributionError: a second class with the same id (before constructing
            anything), a class without an id, or a constructor parameter no service has.
    """
    classes = list(classes)
    check_ids(classes)
    built = []
    for cls in classes:
        kwargs = {}
        for name, parameter in inspect.signature(cls).parameters.items():
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            if name not in services:
                if parameter.default is not parameter.empty:
                    continue
                raise ContributionError(
                    f"{cls.__qualname__} asks for {name!r}; services: {', '.join(sorted(services))}"
                )
            kwargs[name] = services[name](cls.id)
        built.append(cls(**kwargs))
    return Dispatcher(built)
