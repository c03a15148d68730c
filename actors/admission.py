"""A chat's side of the contribution pipeline: admission and the observer hooks.

A plain object the ChatActor holds (its thread only). It builds what each
hook is given from the chat's facts (its key, the session entry, default,
read-only, driven by a parent's stream) and calls the host's dispatcher, less
the contributions the session turned off (resolved when the session's
customizations change, not per hook call).
"""

from typing import Any

import attrs

from agenthost.actors.contributions import (
    Accept,
    ChatKey,
    Dispatch,
    Dispatcher,
    Handled,
    IncomingRequest,
    OutgoingTurn,
    Reject,
    RequestKind,
    RequestSource,
    TurnEnd,
    TurnEndReason,
)
from agenthost.actors.contributions.customizations import disabled
from agenthost.actors.contributions.dispatcher import OutgoingResult
from agenthost.actors.contributions.queue_drain import sender_of
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import ChatEvent
from agenthost.messages.state import ChatState, SessionState, Turn


@attrs.frozen
class Origin:
    """Who caused an action: a client (`client_id` None: the embedding program),
    or, with `from_client` False, the host acting on a client's queued message."""

    client_id: str | None = None
    from_client: bool = True

    def as_client(self) -> "Origin":
        return Origin(self.client_id)


Verdict = Accept | Handled | Reject


class Admission:
    def __init__(
        self,
        dispatcher: Dispatcher,
        mementos: Any,
        chat: ChatKey,
        *,
        session: SessionState,
        default: bool,
        read_only: bool,
        driven: bool,
    ) -> None:
        self._root = dispatcher  # every contribution the host runs
        self._dispatcher = dispatcher.without(disabled(session.customizations))
        self._mementos = mementos  # the host's MementoCache
        self.chat = chat
        self.session = session  # the session entry as the chat last heard it
        self.default = default
        self.read_only = read_only
        self.driven = driven  # a subagent's chat: its parent's turn drives it

    def session_changed(self, state: SessionState) -> None:
        """The session's entry as it is now; its customizations, when they
        changed, pick the contributions that run from here on."""
        if state.customizations is not self.session.customizations:
            self._dispatcher = self._root.without(disabled(state.customizations))
        self.session = state

    @property
    def dispatcher(self) -> Dispatcher:
        """The contributions that run for this chat (its session's, turned on)."""
        return self._dispatcher

    def refuse_if_driven(self) -> None:
        if self.driven:
            raise AgentHostError(
                code=ErrorCode.INVALID_ARGUMENT,
                message="This is a subagent's chat: its parent's turn drives it.",
            )

    def admit(
        self,
        text: str,
        origin: Origin,
        state: ChatState,
        *,
        steer: bool = False,
        pending_id: str | None = None,
    ) -> Verdict:
        """on_incoming_request: the first contribution that does not accept wins."""
        return self._dispatcher.incoming(
            IncomingRequest(
                chat=self.chat,
                kind=RequestKind.STEER if steer else RequestKind.SEND,
                text=text,
                source=RequestSource.CLIENT if origin.from_client else RequestSource.QUEUE,
                client_id=origin.client_id,
                state=state,
                session=self.session,
                read_only=self.read_only,
                default_chat=self.default,
                subagent=self.driven,
                pending_id=pending_id,
            )
        )

    def outgoing(self, turn_id: str, text: str, state: ChatState) -> OutgoingResult:
        """on_outgoing_turn: the text and instructions the provider gets."""
        return self._dispatcher.outgoing(
            OutgoingTurn(
                chat=self.chat, turn_id=turn_id, text=text, state=state, session=self.session
            )
        )

    def observed(self, action_type: type) -> bool:
        """Whether a contribution observes actions of this type one by one."""
        return bool(self._dispatcher.observers(action_type))

    def dispatched(
        self, action: ChatEvent, before: ChatState, state: ChatState, origin: Origin | None
    ) -> None:
        """Tell the contributions: every action, and which a client applied."""
        self._tell(action, before, state, origin, rejection=None)

    def refused(
        self, action: ChatEvent, state: ChatState, origin: Origin, error: AgentHostError
    ) -> None:
        """A client's action that is not applied: observed with its reason."""
        self._tell(action, state, state, origin, rejection=error.message)

    def _tell(
        self,
        action: ChatEvent,
        before: ChatState,
        state: ChatState,
        origin: Origin | None,
        rejection: str | None,
    ) -> None:
        from_client = origin is not None and origin.from_client
        dispatcher = self._dispatcher
        takers = dispatcher.takers(type(action), from_client, rejection is not None)
        if not any(takers):
            return  # (most actions: nothing is built)
        dispatcher.action_done(
            Dispatch(
                chat=self.chat,
                action=action,
                from_client=from_client,
                client_id=None if origin is None else origin.client_id,
                before=before,
                state=state,
                session=self.session,
                rejection=rejection,
                default_chat=self.default,
                subagent=self.driven,
            ),
            takers,
        )

    def turn_ended(
        self, reason: TurnEndReason, turn: Turn | None, state: ChatState, origin: Origin | None
    ) -> None:
        self._dispatcher.turn_end(
            TurnEnd(
                chat=self.chat,
                reason=reason,
                state=state,
                session=self.session,
                turn=turn,
                resumable=turn is not None and turn.error is not None and turn.error.resumable,
                subagent=self.driven,
                default_chat=self.default,
                client_id=None if origin is None else origin.client_id,
            )
        )

    def sender_of(self, pending_id: str) -> str | None:
        """The client that queued `pending_id` (the queue_drain contribution keeps it)."""
        return sender_of(self._mementos, self.chat, pending_id)
