"""A host for the SIGKILL test: runs a Claude turn that never ends on the
stand-in CLI, says so, then waits to be killed."""

import sys
import tempfile
from pathlib import Path

import structlog

from agenthost.actors import Host
from agenthost.messages.events import AssistantDelta
from agenthost.store import SqliteStore
from tests.providers.claude.standin import WAIT_S, StandIn

structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
standin = StandIn(Path(sys.argv[1]))
standin.script({"wait": [{"say": ["a"]}, {"block": "interrupt"}]})
store = SqliteStore(Path(tempfile.mkdtemp()) / "agenthost.db")
host = Host.start(store=store, providers={"claude": standin.provider()})
chat = host.create_session(provider="claude").chat()
events = chat.subscribe()
chat.send("wait")
while not isinstance(events.next(WAIT_S), AssistantDelta):
    pass
print("running", flush=True)
sys.stdin.read()  # until the test kills us
