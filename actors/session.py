"""SessionActor: one live session: its chats and its provider binding.

It starts a ChatActor per chat (children stop in reverse order with it) and
tells the host once every chat's provider session is open (SessionReady),
or that one failed to open, with the provider's error.
"""

import attrs
import structlog

from agenthost.actors.chat import ChatActor
from agenthost.actors.context import Services
from agenthost.actors.hosted import HostedActor
from agenthost.actors.protocol import ChatReady, GetChat, Ref, SessionReady
from agenthost.actors.runtime import handles
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.state import ChatState

log = structlog.get_logger(__name__)


@attrs.frozen
class ChatInfo:
    chat_id: str
    ref: Ref


class SessionActor(HostedActor):
    def __init__(
        self,
        services: Services,
        *,
        session_id: str,
        provider: str,
        chats: tuple[ChatState, ...],
        chat_ids: tuple[str, ...],
        restored: bool,
    ) -> None:
        super().__init__(services)
        self.session_id = session_id
        self.provider = provider
        self.restored = restored
        self._initial = tuple(zip(chat_ids, chats, strict=True))
        self._chats: dict[str, Ref] = {}
        self._waiting: set[str] = set(chat_ids)
        self._log = log.bind(session_id=session_id)

    def on_start(self) -> None:
        for chat_id, state in self._initial:
            self._chats[chat_id] = ChatActor.start(
                self.services,
                session_id=self.session_id,
                chat_id=chat_id,
                provider=self.provider,
                state=state,
                session=self.actor_ref,
                resume=self.restored,
            )
        self._initial = ()

    def on_stop(self) -> None:
        for ref in reversed(list(self._chats.values())):
            if ref.is_alive():
                ref.stop(block=False)

    @handles(ChatReady)
    def _chat_ready(self, message: ChatReady) -> None:
        if message.chat_id not in self._waiting:
            return
        if message.error is not None:
            self._waiting.clear()
            self.send(
                self.services.host, SessionReady(session_id=self.session_id, error=message.error)
            )
            return
        self._waiting.discard(message.chat_id)
        if not self._waiting:
            self.send(self.services.host, SessionReady(session_id=self.session_id))

    @handles(GetChat)
    def _get_chat(self, message: GetChat) -> ChatInfo:
        chat_id = message.chat_id or next(iter(self._chats))
        ref = self._chats.get(chat_id)
        if ref is None:
            raise AgentHostError(
                code=ErrorCode.NOT_FOUND, message=f"session {self.session_id} has no chat {chat_id}"
            )
        return ChatInfo(chat_id=chat_id, ref=ref)
