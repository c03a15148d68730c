"""A host process for the SIGKILL test: opens a Copilot session on the stand-in
(through the real SDK and the CLI guard), says so, then waits to be killed."""

import sys

from agenthost.providers.base import ProviderLoop
from agenthost.providers.copilot import CopilotProvider

standin, script = sys.argv[1:3]
provider = CopilotProvider(cli_path=standin, env={"COPILOT_STANDIN_SCRIPT": script})
loop = ProviderLoop("copilot")
adapter = provider.open_session("s1", "c1", lambda event: None)
loop.submit(adapter.start()).result(30)
print("ready", flush=True)
sys.stdin.read()  # until the test kills us
