"""chat_draft (600): a chat's draft is kept (a chat memento) and restored."""

from agenthost.actors.contributions.base import ChatKey, ClientAction, Contribution
from agenthost.actors.contributions.services import Mementos
from agenthost.messages.events import DraftChanged


class ChatDraft(Contribution):
    id = "chat_draft"
    order = 600
    description = "Keeps each chat's draft across restarts."
    applies = (DraftChanged,)

    def __init__(self, mementos: Mementos) -> None:
        self._mementos = mementos

    def on_did_apply_client_action(self, applied: ClientAction) -> None:
        match applied.action:
            case DraftChanged(draft=str(draft)) if draft:
                self._mementos.set(applied.chat, "draft", value=draft)
            case DraftChanged():
                if self._mementos.get(applied.chat, "draft") is not None:
                    self._mementos.delete_memento(applied.chat, "draft")

    def on_hydrate_chat(
        self, title: str, draft: str | None, *, chat: ChatKey
    ) -> tuple[str, str | None]:
        return title, self._mementos.get(chat, "draft", default=draft)
