"""A stand-in host for the CLI-guard tests: starts a stand-in CLI through the
launcher, prints the launcher's pid and the CLI's report, then, once the
launcher exits, its exit status and whether the CLI's stdout reached its end;
it runs until the test kills it or closes its stdin."""

import subprocess
import sys
import threading

from agenthost.providers.cli_guard import guard_env, launcher_path, resolve_cli

cli = resolve_cli(sys.argv[1], provider="test")
child = subprocess.Popen(
    [launcher_path(), "--flag"],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    env={"PATH": "/usr/bin:/bin", **guard_env(cli), **dict(a.split("=", 1) for a in sys.argv[2:])},
    text=True,
)
assert child.stdout is not None
print(child.pid, child.stdout.readline().strip(), flush=True)


def watch() -> None:
    assert child.stdout is not None
    rest = child.stdout.read()  # returns at EOF: every holder of the pipe is gone
    print("exited", child.wait(), "eof", repr(rest), flush=True)


threading.Thread(target=watch, daemon=True).start()
sys.stdin.read()  # until the test kills us or closes our stdin
