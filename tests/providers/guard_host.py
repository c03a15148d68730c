"""A stand-in host for the CLI-guard test: starts a stand-in CLI through the
launcher, prints the CLI's report, then waits to be killed."""

import subprocess
import sys

from agenthost.providers.cli_guard import guard_env, launcher_path, resolve_cli

cli = resolve_cli(sys.argv[1], provider="test")
child = subprocess.Popen(
    [launcher_path(), "--flag"],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    env={"PATH": "/usr/bin:/bin", **guard_env(cli)},
    text=True,
)
assert child.stdout is not None
print(child.stdout.readline().strip(), flush=True)
sys.stdin.read()  # until the test kills us
