"""CPU per turn: this tree against a baseline commit, and the asyncio floor, in one run.

A turn's CPU is measured by difference, so start-up, imports and the store's
read-back cancel out: each system runs the same load twice in a child process
of its own (`agenthost load --chats C --turns 1` and `--turns 1+T`), and

    CPU per turn = (CPU of the long run - CPU of the short run) / (C x T)

where a run's CPU is its child's user + system time (every thread, from
`os.wait4`). That "whole run" figure keeps what grows with the turns after
them (reading the store back, the invariant checks, collections); "turns
alone" is the same difference over the CPU of the turns only (every thread's,
from the first chat's first turn to the last chat's last one), and "first
turn" the short load's turns alone per chat (a chat's first turn, which also
opens its provider session). Systems alternate round by round and the figure is the median
of rounds, so the shared machine's noise hits them alike; what matters is the
ratio, measured in the same run:

- `baseline`: the code at a given commit (default 398386c, where issue 17's
  figures were taken), checked out with `git archive` into a temporary folder
  and imported from there instead of this tree;
- `current`: this tree;
- `floor`: the asyncio floor of the same workload (benchmarks/peers.py: three
  tasks per chat joined by queues, the reply in 10 deltas), the least a turn
  can cost in this interpreter.

With `--ahp`, the same for the path users take through the server: a server
(baseline's or this tree's `agenthost serve`) is driven by this tree's
`agenthost load --url`, and the server's CPU is read from /proc before and
after each load.

The "vs baseline" ratios are paired: each round's current against the
baseline measured beside it (a minute apart at most), and the median of those
ratios, with the lowest and highest, is what is printed. On a shared machine
whose speed drifts from minute to minute a ratio of medians mixes rounds that
ran at different speeds; a paired ratio does not.

Run: `python -m benchmarks turn-cpu [--chats 1000] [--turns 5] [--rounds 3]
[--baseline 398386c] [--ahp] [--json]`.
"""

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("messages", "actors", "providers", "store", "server")
DEFAULT_BASELINE = "398386c"
DELTAS = 10
CHILD_TIMEOUT_S = 900.0


@attrs.frozen
class System:
    """Where a system's code comes from: `pythonpath` None is this tree."""

    name: str
    pythonpath: str | None = None


@contextlib.contextmanager
def checked_out(commit: str) -> Iterator[str]:
    """The packages at `commit`, importable as agenthost.* from the folder yielded
    (put first on PYTHONPATH, it shadows this tree's editable install)."""
    with tempfile.TemporaryDirectory(prefix="agenthost-baseline-") as folder:
        root = Path(folder)
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", "--format=tar", commit, *PACKAGES],
            check=True,
            capture_output=True,
        ).stdout
        tree = root / "tree"
        tree.mkdir()
        with tarfile.open(fileobj=__import__("io").BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
        namespace = root / "path" / "agenthost"
        namespace.mkdir(parents=True)
        for package in PACKAGES:
            (namespace / package).symlink_to(tree / package)
        yield str(root / "path")


def _env(system: System) -> dict[str, str]:
    env = dict(os.environ)
    if system.pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [system.pythonpath, str(REPO)]))
    else:
        env["PYTHONPATH"] = str(REPO)
    return env


def _child_cpu(command: list[str], env: dict[str, str], out: list[str] | None = None) -> float:
    """Run `command` to its end; its CPU seconds (user + system, all threads).
    With `out`, the lines it printed are appended to it."""
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + CHILD_TIMEOUT_S
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"{command[:4]} took over {CHILD_TIMEOUT_S:.0f} s")
            time.sleep(0.05)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            output.seek(0)
            tail = output.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"{command[:4]} exited {process.returncode}:\n{tail}")
        if out is not None:
            output.seek(0)
            out.extend(output.read().decode(errors="replace").splitlines())
    return usage.ru_utime + usage.ru_stime


def load_cpu(system: System, chats: int, turns: int) -> tuple[float, float]:
    """A load's CPU seconds in all: the whole process, and the turns alone (every
    thread's CPU from the first chat's first turn to the last chat's last turn)."""
    command = [sys.executable, "-m", "benchmarks.turn_cpu", "--load-child", str(chats), str(turns)]
    printed: list[str] = []
    whole = _child_cpu(command, _env(system), printed)
    turns_only = next(float(line.split()[1]) for line in printed if line.startswith("TURNS_CPU "))
    return whole, turns_only


def floor_cpu(chats: int, turns: int) -> float:
    command = [sys.executable, "-m", "benchmarks.turn_cpu", "--floor-child", str(chats), str(turns)]
    return _child_cpu(command, _env(System("floor")))


def per_turn_us(long: float, short: float, chats: int, turns: int) -> float:
    return (long - short) / (chats * turns) * 1e6


# -- over AHP: a server process, driven by this tree's load --url --------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _process_cpu(pid: int) -> float:
    """utime + stime of a running process, in seconds (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def serving(system: System, folder: Path) -> Iterator[tuple[str, str, int]]:
    """`agenthost serve` of `system` on a free loopback port; (url, token, pid)."""
    token = secrets.token_urlsafe(24)
    (folder / "tokens").write_text(f"{token} bench\n")
    manifest = folder / "providers.toml"
    manifest.write_text(f'[providers.scripted]\nkind = "scripted"\necho_deltas = {DELTAS}\n')
    port = _free_port()
    (folder / system.name).mkdir()  # serve makes no folder for its store
    command = [sys.executable, "-c", "from agenthost.server.cli import main; main()", "serve"]
    command += ["--port", str(port), "--token-file", str(folder / "tokens")]
    command += ["--store", f"sqlite:///{folder / system.name / 'agenthost.db'}"]
    command += ["--providers", str(manifest)]
    if system.pythonpath is None:  # this tree's quotas would refuse a load's sessions
        command += ["--max-resident-sessions", "0", "--session-creations-per-minute", "0"]
    server = subprocess.Popen(
        command, env=_env(system), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{system.name}'s server did not start")
            time.sleep(0.1)
        yield f"ws://127.0.0.1:{port}/ahp", token, server.pid
    finally:
        server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(30)
        if server.poll() is None:
            server.kill()


def ahp_server_cpu(system: System, chats: int, turns: int) -> float:
    """The server's CPU per turn: its CPU across one remote load, by difference with a
    load of one turn a chat (which pays the sessions and subscriptions)."""
    with (
        tempfile.TemporaryDirectory(prefix="agenthost-ahp-") as tmp,
        serving(system, Path(tmp)) as (url, token, pid),
    ):
        spent = []
        for count in (1, 1 + turns):
            before = _process_cpu(pid)
            command = [sys.executable, "-c", "from agenthost.server.cli import main; main()"]
            command += ["load", "--url", url, "--token", token, "--chats", str(chats)]
            command += ["--turns", str(count), "--deltas", str(DELTAS)]
            _child_cpu(command, _env(System("client")))
            spent.append(_process_cpu(pid) - before)
        return per_turn_us(spent[1], spent[0], chats, turns)


@attrs.frozen
class Ratio:
    """Current against baseline, round by round: the median and the range."""

    median: float
    low: float
    high: float

    @classmethod
    def paired(cls, current: list[float], baseline: list[float]) -> "Ratio":
        ratios = [c / b for c, b in zip(current, baseline, strict=True)]
        return cls(statistics.median(ratios), min(ratios), max(ratios))

    def __str__(self) -> str:
        return f"{self.median:.2f}x ({self.low:.2f}-{self.high:.2f})"


@attrs.frozen
class Figures:
    in_process_us: dict[str, float]  # whole runs, by difference (start-up cancels out)
    turns_only_us: dict[str, float]  # the turns alone, every thread, by difference
    first_turn_us: dict[str, float]  # a chat's first turn (the short load's turns alone)
    ahp_server_us: dict[str, float]
    rounds: int
    in_process_ratio: Ratio  # this tree against the baseline, paired by round
    turns_only_ratio: Ratio
    first_turn_ratio: Ratio
    ahp_server_ratio: Ratio | None


def measure(chats: int, turns: int, rounds: int, baseline: str, ahp: bool) -> Figures:
    samples: dict[str, list[float]] = {"baseline": [], "current": [], "floor": []}
    alone: dict[str, list[float]] = {"baseline": [], "current": []}
    first: dict[str, list[float]] = {"baseline": [], "current": []}
    server: dict[str, list[float]] = {"baseline": [], "current": []}
    with checked_out(baseline) as path:
        systems = [System("baseline", path), System("current")]
        for _ in range(rounds):
            for system in systems:
                short, short_turns = load_cpu(system, chats, 1)
                long, long_turns = load_cpu(system, chats, 1 + turns)
                samples[system.name].append(per_turn_us(long, short, chats, turns))
                alone[system.name].append(per_turn_us(long_turns, short_turns, chats, turns))
                first[system.name].append(short_turns / chats * 1e6)
            samples["floor"].append(
                per_turn_us(floor_cpu(chats, 1 + turns), floor_cpu(chats, 1), chats, turns)
            )
            if ahp:
                for system in systems:
                    server[system.name].append(ahp_server_cpu(system, chats, turns))
    return Figures(
        in_process_us={k: statistics.median(v) for k, v in samples.items()},
        turns_only_us={k: statistics.median(v) for k, v in alone.items()},
        first_turn_us={k: statistics.median(v) for k, v in first.items()},
        ahp_server_us={k: statistics.median(v) for k, v in server.items() if v},
        rounds=rounds,
        in_process_ratio=Ratio.paired(samples["current"], samples["baseline"]),
        turns_only_ratio=Ratio.paired(alone["current"], alone["baseline"]),
        first_turn_ratio=Ratio.paired(first["current"], first["baseline"]),
        ahp_server_ratio=Ratio.paired(server["current"], server["baseline"]) if ahp else None,
    )


def print_figures(figures: Figures, args: argparse.Namespace, console: Console) -> None:
    cpu = figures.in_process_us
    table = Table(
        title=(
            f"CPU per turn, {args.chats} chats x {args.turns} turns, {DELTAS} deltas, SQLite "
            f"(medians of {figures.rounds} rounds, same run)"
        )
    )
    columns = ("system", "whole run", "vs baseline", "vs floor", "turns alone", "vs baseline")
    columns += ("first turn", "vs baseline")
    for column in columns:
        table.add_column(column, justify="left" if column == "system" else "right")
    alone, first = figures.turns_only_us, figures.first_turn_us
    current = (figures.in_process_ratio, figures.turns_only_ratio, figures.first_turn_ratio)
    ratios = {"baseline": ("1.00x",) * 3, "current": tuple(map(str, current)), "floor": ("",) * 3}
    for name, label in (
        ("baseline", f"baseline ({args.baseline})"),
        ("current", "this tree"),
        ("floor", "asyncio floor"),
    ):
        table.add_row(
            label,
            f"{cpu[name]:,.0f} µs",
            ratios[name][0],
            f"{cpu[name] / cpu['floor']:.1f}x",
            f"{alone[name]:,.0f} µs" if name in alone else "",
            ratios[name][1],
            f"{first[name]:,.0f} µs" if name in first else "",
            ratios[name][2],
        )
    console.print(table)
    console.print(
        "whole run: the difference of two loads (1 and 1+T turns a chat), so start-up"
        " cancels out; it keeps what grows with the turns (the store read-back, the"
        " invariant checks, collections). turns alone: every thread's CPU from the first"
        " turn to the last, by the same difference (the turns and nothing else). first"
        " turn: a chat's first turn (the short load's turns alone, per chat). vs baseline:"
        " the median of the rounds' paired ratios (lowest-highest)."
    )
    if figures.ahp_server_us:
        server = figures.ahp_server_us
        table = Table(title="AHP server CPU per turn (agenthost serve, driven by load --url)")
        for column in ("server", "CPU per turn", "vs baseline"):
            table.add_column(column, justify="left" if column == "server" else "right")
        paired = {"baseline": "1.00x", "current": str(figures.ahp_server_ratio)}
        for name in ("baseline", "current"):
            table.add_row(name, f"{server[name]:,.0f} µs", paired[name])
        console.print(table)


def _load_child(chats: int, turns: int) -> None:
    """`agenthost load` as its CLI runs it, timing the turns' CPU: the load module's
    `run_chat` (in this tree and the baseline alike) runs each chat's turns."""
    import logging

    import structlog

    from agenthost.server import load

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    real = load.run_chat
    phase = {"running": 0, "start": 0.0, "end": 0.0}

    async def timed(*args: object, **kwargs: object) -> None:
        if phase["running"] == 0 and not phase["start"]:
            phase["start"] = time.process_time()
        phase["running"] += 1
        try:
            await real(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            phase["running"] -= 1
            if phase["running"] == 0:
                phase["end"] = time.process_time()

    load.run_chat = timed  # type: ignore[assignment]
    report = load.run_load(load.LoadConfig(chats=chats, turns=turns, deltas=DELTAS))
    if report.violations:
        raise SystemExit(f"violations: {report.violations}")
    print(f"TURNS_CPU {phase['end'] - phase['start']}")


def _floor_child(chats: int, turns: int) -> None:
    from benchmarks import peers

    peers.TURNS = turns
    tally = asyncio.run(peers.asyncio_chats(chats))
    if tally.turns != chats * turns:
        raise SystemExit(f"the floor counted {tally.turns} turns")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks turn-cpu")
    parser.add_argument("--chats", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--ahp", action="store_true", help="also the server's CPU over AHP")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--floor-child", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--load-child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.load_child:
        _load_child(*args.load_child)
        return
    if args.floor_child:
        _floor_child(*args.floor_child)
        return
    figures = measure(args.chats, args.turns, args.rounds, args.baseline, args.ahp)
    print_figures(figures, args, Console(width=150))
    if args.json:
        print(json.dumps(attrs.asdict(figures)))


if __name__ == "__main__":
    main(sys.argv[1:])
