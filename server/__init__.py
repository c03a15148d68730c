"""The CLI (`agenthost ...`), the AHP server, its web page and the terminal client.

Belongs here: everything that faces a person or a network peer: the AHP
server (ahp.py wires its parts: http.py, hosts.py, connection.py,
requests.py, actions.py, registry.py, quotas.py, broadcasts.py, channels.py,
clients.py, views.py, errors.py, metrics.py), serve.py (`agenthost serve`),
web/ (the static
page served at /, an AHP client with no build step), chat_client.py
(`agenthost chat`, a terminal AHP client), load.py, cli.py. Invariants:
1. The server and the CLI use the public surface (agenthost.actors), never
   actor internals.
2. The library never configures logging; the CLI does.
3. The page and the terminal client speak only AHP to the server, and each
   keeps AHP's JSON shapes in one place (`wire` in web/app.js; the `_wire_*`
   functions and `_read_action` in chat_client.py).
"""

__all__: list[str] = []
