"""session_instructions (300): a session's system instructions (its config
value `instructions`, set by `host.create_session(instructions=...)`) go with
every turn it sends."""

from agenthost.actors.contributions.base import Contribution, Outgoing, OutgoingTurn

KEY = "instructions"


class SessionInstructions(Contribution):
    id = "session_instructions"
    order = 300
    description = "Sends the session's instructions with every turn."

    def on_outgoing_turn(self, turn: OutgoingTurn) -> Outgoing | None:
        instructions = dict(turn.session.config).get(KEY, "")
        return Outgoing(instructions=instructions) if instructions else None
