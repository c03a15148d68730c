"""The built-in contributions, registered once, here (DESIGN.md "Contributions")."""

from agenthost.actors.contributions.base import Contribution
from agenthost.actors.contributions.chat_draft import ChatDraft
from agenthost.actors.contributions.input_needed import InputNeeded
from agenthost.actors.contributions.local_command import LocalCommand
from agenthost.actors.contributions.mark_unread import MarkUnread
from agenthost.actors.contributions.queue_drain import QueueDrain
from agenthost.actors.contributions.session_flags import SessionFlags
from agenthost.actors.contributions.session_instructions import SessionInstructions
from agenthost.actors.contributions.session_title import SessionTitle
from agenthost.actors.contributions.turn_admission import TurnAdmission

BUILTINS: tuple[type[Contribution], ...] = (
    LocalCommand,
    TurnAdmission,
    QueueDrain,
    InputNeeded,
    SessionInstructions,
    SessionTitle,
    MarkUnread,
    ChatDraft,
    SessionFlags,
)
