"""A session's client tools, as its state's `activeClients` holds them.

A client that executes tools for a session (`Session.set_client_tools`, or a
client's `session/activeClientSet` over AHP) is an entry of the session state's
`active_clients`, reduced from `session/activeClientSet`/`activeClientRemoved`
like any session action: the tools calls wait on are the ones clients see.
Entries are not kept over a restart (a client is a live connection): a
restored session starts with none.
"""

import attrs

from agenthost.messages.commands import SetClientTools
from agenthost.messages.session_events import ActiveClientSet
from agenthost.messages.state import ActiveClient, SessionState

__all__ = ["client_set", "tool_owners"]


def client_set(message: SetClientTools) -> ActiveClientSet:
    """The session action a client's tools are: the entry it asked to be shown
    (display name, _meta, customizations; else only its id), with its tools."""
    shown = message.shown or ActiveClient(client_id=message.client_id)
    client = attrs.evolve(shown, client_id=message.client_id, tools=message.tools)
    return ActiveClientSet(active_client=client)


def tool_owners(state: SessionState) -> tuple[tuple[str, str], ...]:
    """Tool name -> the client that executes it (the latest registration wins)."""
    owners: dict[str, str] = {}
    for client in state.active_clients:
        for tool in client.tools:
            owners[tool.name] = client.client_id
    return tuple(sorted(owners.items()))
