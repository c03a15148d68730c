"""The CLI (`agenthost ...`) and, later, the AHP server and web page.

Belongs here: everything that faces a person or a network peer. Invariants:
1. The server and the CLI use the public surface (agenthost.actors), never
   actor internals.
2. The library never configures logging; the CLI does.
"""

__all__: list[str] = []
