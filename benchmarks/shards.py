"""`python -m benchmarks shards`: one shard against two, in process and over AHP.

One run, on one local Ray cluster (started here, loopback only, ports from
24800), each measure in a fresh PostgreSQL schema:
- in process: `agenthost load --shards N`'s driver (server/load.py) against a
  ShardedHost of N shards, for N = 1 and 2;
- over AHP: `agenthost serve --shards N --ray-address <the cluster>` in a
  process of its own, driven by `load --url`'s driver from here;
- over AHP with fronts (mode `fronts`): `serve --shards 2 --fronts 2`, two
  front processes on the one port, driven the same way;
- a kill: 2 shards in process, one killed with SIGKILL when 30% of the turns
  ended; every turn the client saw complete must be stored complete, once,
  and after every session's next use no turn is left running.

CPU: every process's user+system time (psutil) from the first turn's end to
the last's, divided by the turns between: the front (this process in process,
the serve process over AHP; with --fronts each front process, front-N, and
the serve process that supervises them, serve; the load driver over AHP is
the client and is not counted), each shard, Ray's own processes (GCS, raylet, agents, idle
workers), and the PostgreSQL backends of the run (by application_name). The
machine's other work is not in it; wall-clock turns/s is, so run it quiet.
"""

import argparse
import asyncio
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import psutil
import structlog
from rich.console import Console
from rich.table import Table

from agenthost.server.load import (
    RESIDENT_S,
    ChatRecord,
    LoadConfig,
    _drive_local,
    build_report,
    read_store,
)
from agenthost.server.load_remote import load_remote
from agenthost.shards.serving import ShardOptions, scripted_providers

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1/test"
PORTS = 24800
SERVE_PORT = 24790


@attrs.define
class Cpu:
    """CPU seconds by part of the system, between two snapshots."""

    parts: dict[str, float] = attrs.field(factory=dict)

    @property
    def total(self) -> float:
        return sum(self.parts.values())


@attrs.define
class Figures:
    mode: str
    shards: int
    turns: int
    turns_per_s: float
    cpu: Cpu
    ok: bool
    violations: tuple[str, ...] = ()
    fronts: int = 1

    def per_turn_us(self, part: str | None = None) -> float:
        seconds = self.cpu.total if part is None else self.cpu.parts.get(part, 0.0)
        return seconds / max(self.turns, 1) * 1e6


class Meter:
    """Snapshots of the run's processes' CPU (see the module docstring)."""

    def __init__(
        self, front: int, schema: str, dsn: str, client: int | None = None, fronts: int = 1
    ) -> None:
        self.front = front
        self.fronts = fronts
        self.schema = schema
        self.dsn = dsn
        self.client = client
        self.start: dict[int, tuple[str, float]] = {}
        self.turns_at_start = 0

    def processes(self) -> dict[int, str]:
        """pid -> its part: front, shard-N, ray, postgres."""
        me = psutil.Process()
        parts: dict[int, str] = {self.front: "front" if self.fronts == 1 else "serve"}
        shards, fronts = [], []
        for child in [*me.children(recursive=True), *_children(self.front)]:
            if child.pid in (self.front, self.client):
                continue
            try:
                line = " ".join(child.cmdline())
            except psutil.Error:
                continue
            if "ShardActor" in line:
                shards.append(child.pid)
            elif "spawn_main" in line and child.ppid() == self.front:
                fronts.append(child.pid)  # a front process of serve --fronts
            else:
                parts.setdefault(child.pid, "ray")
        for n, pid in enumerate(sorted(set(shards))):
            parts[pid] = f"shard-{n}"
        for n, pid in enumerate(sorted(set(fronts))):
            parts[pid] = f"front-{n}"
        for pid in _backends(self.dsn, self.schema):
            parts[pid] = "postgres"
        return parts

    def snapshot(self) -> dict[int, tuple[str, float]]:
        seen = {}
        for pid, part in self.processes().items():
            try:
                times = psutil.Process(pid).cpu_times()
            except psutil.Error:
                continue
            seen[pid] = (part, times.user + times.system)
        return seen

    def begin(self, turns_done: int) -> None:
        self.start = self.snapshot()
        self.turns_at_start = turns_done

    def end(self) -> Cpu:
        cpu = Cpu()
        for pid, (_, seconds) in self.snapshot().items():
            if pid not in self.start:
                continue  # started meanwhile (a restarted shard): not measured from the start
            part, before = self.start[pid]
            cpu.parts[part] = cpu.parts.get(part, 0.0) + max(seconds - before, 0.0)
        return cpu


def _children(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _backends(dsn: str, schema: str) -> list[int]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as db:
        rows = db.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (schema,)
        ).fetchall()
    return [int(r[0]) for r in rows]


class Progress:
    """The driver's progress callback: begins the meter at the first turn's end,
    ends it at the last's, and runs `at` once `at_turn` turns ended."""

    def __init__(
        self, meter: Meter, total: int, at_turn: int = 0, at: Callable[[], None] = lambda: None
    ) -> None:
        self.meter = meter
        self.total = total
        self.done = 0
        self.cpu: Cpu | None = None
        self._at_turn = at_turn
        self._at = at

    def __call__(self) -> None:
        self.done += 1
        if self.done == 1:
            self.meter.begin(1)
        if self.done == self._at_turn:
            self._at()
        if self.done == self.total:
            self.cpu = self.meter.end()


@contextmanager
def schema(base: str) -> Iterator[tuple[str, str]]:
    """A fresh schema: (the store's URL, its name); dropped afterwards."""
    import psycopg

    name = f"bench_{uuid.uuid4().hex[:12]}"
    joiner = "&" if "?" in base else "?"
    try:
        yield f"{base}{joiner}schema={name}&application_name={name}", name
    finally:
        with psycopg.connect(base, autocommit=True) as db:
            db.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            db.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE".encode())


def in_process(local: Any, base: str, chats: int, turns: int, shards: int, kill: bool) -> Figures:
    from agenthost.shards.ray_shards import start_sharded

    config = LoadConfig(chats=chats, turns=turns, shards=shards)
    with schema(base) as (url, name):
        options = ShardOptions(
            store=url, providers=scripted_providers(config.deltas), idle_release_s=RESIDENT_S
        )
        host = start_sharded(options, shards, local=local)
        records = [ChatRecord(index=i) for i in range(chats)]
        latencies: list[float] = []
        meter = Meter(os.getpid(), name, base)

        def kill_one() -> None:
            os.kill(host.shards.pid("shard-0"), signal.SIGKILL)

        at = int(chats * turns * 0.3) if kill else 0
        progress = Progress(meter, chats * turns if not kill else 0, at, kill_one)
        try:
            run = asyncio.run(_drive_local(host, config, records, latencies, progress))
            if kill:
                asyncio.run(_use_every_session(host, run.session_ids))
            cpu = progress.cpu or meter.end()
        finally:
            host.stop(timeout=60)
        read_store(url, run.session_ids, records)
    if kill:
        violations = tuple(_kill_violations(records))
        done = sum(r.outcomes.count("complete") for r in records)
        return Figures("kill", shards, done, done / run.seconds, cpu, not violations, violations)
    report = build_report(config, "in-process", records, latencies, run.seconds)
    return Figures(
        "in process",
        shards,
        chats * turns - 1,
        report.turns_per_s,
        cpu,
        report.ok,
        report.violations,
    )


async def _use_every_session(host: Any, session_ids: list[str]) -> None:
    """Each session's next use (where its restarted shard takes it over)."""
    ahost = host.aio
    for start in range(0, len(session_ids), 200):
        sessions = await asyncio.gather(
            *(ahost.open_session(s, timeout=120) for s in session_ids[start : start + 200])
        )
        await asyncio.gather(*(s.summary(timeout=120) for s in sessions))


def _kill_violations(records: list[ChatRecord]) -> Iterator[str]:
    """Every turn the client saw complete is stored complete, once; none runs."""
    from agenthost.providers.scripted import echo_reply

    for record in records:
        stored = record.stored
        prompts = [p for p, _, _ in stored]
        if len(prompts) != len(set(prompts)):
            yield f"chat {record.index}: a turn is stored twice"
        if any(state is None for _, _, state in stored):
            yield f"chat {record.index}: a turn was left running"
        for prompt, outcome in zip(record.prompts, record.outcomes, strict=False):
            if outcome == "complete" and (prompt, echo_reply(prompt), "complete") not in stored:
                yield f"chat {record.index}: {prompt!r} completed but is not stored complete"


def over_ahp(
    local: Any, base: str, chats: int, turns: int, shards: int, fronts: int = 1
) -> Figures:
    token = secrets.token_hex(16)
    with schema(base) as (url, name), _token_file(token) as tokens:
        server = subprocess.Popen(
            [
                os.path.join(os.path.dirname(sys.executable), "agenthost"),
                "serve",
                "--shards",
                str(shards),
                "--ray-address",
                local.address,
                "--port",
                str(SERVE_PORT),
                "--store",
                url,
                "--token-file",
                tokens,
                # 2,000 chats at once: past the per-identity quotas' defaults
                "--session-creations-per-minute",
                "0",
                "--max-resident-sessions",
                "0",
                *(["--fronts", str(fronts)] if fronts > 1 else []),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            _wait_serving(server)
            config = LoadConfig(
                chats=chats, turns=turns, url=f"ws://127.0.0.1:{SERVE_PORT}/ahp", token=token
            )
            meter = Meter(server.pid, name, base, client=os.getpid(), fronts=fronts)
            progress = Progress(meter, chats * turns)
            report = asyncio.run(load_remote(config, progress))
            cpu = progress.cpu or meter.end()
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(10)
    return Figures(
        "over AHP",
        shards,
        chats * turns - 1,
        report.turns_per_s,
        cpu,
        report.ok,
        report.violations,
        fronts,
    )


@contextmanager
def _token_file(token: str) -> Iterator[str]:
    path = f"/tmp/agenthost-bench-tokens-{os.getpid()}"
    with open(path, "w") as out:
        out.write(f"{token} bench\n")
    try:
        yield path
    finally:
        os.unlink(path)


def _wait_serving(server: subprocess.Popen[str], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    assert server.stdout is not None
    for line in server.stdout:
        if "serving AHP" in line:
            return
        if time.monotonic() > deadline:
            break
    raise RuntimeError(f"the server did not start (exit code {server.poll()})")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks shards")
    parser.add_argument("--chats", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--modes", default="process,ahp,fronts,kill")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    from agenthost.shards.ray_shards import LocalRay

    modes = args.modes.split(",")
    local = LocalRay(ports=PORTS, num_cpus=os.cpu_count() or 2)
    results: list[Figures] = []
    try:
        for shards in (1, 2):
            if "process" in modes:
                results.append(
                    in_process(local, args.postgres, args.chats, args.turns, shards, False)
                )
            if "ahp" in modes:
                results.append(over_ahp(local, args.postgres, args.chats, args.turns, shards))
        if "fronts" in modes:  # 2 shards x 2 front processes
            results.append(over_ahp(local, args.postgres, args.chats, args.turns, 2, fronts=2))
        if "kill" in modes:
            results.append(in_process(local, args.postgres, args.chats, args.turns, 2, True))
    finally:
        local.stop()
    if args.json:
        print(json.dumps([_as_dict(r) for r in results], indent=2))
    show(results)


def _as_dict(figures: Figures) -> dict[str, Any]:
    return {
        "mode": figures.mode,
        "shards": figures.shards,
        "fronts": figures.fronts,
        "turns_per_s": round(figures.turns_per_s),
        "cpu_us_per_turn": {
            k: round(v / max(figures.turns, 1) * 1e6) for k, v in figures.cpu.parts.items()
        },
        "cpu_us_per_turn_total": round(figures.per_turn_us()),
        "ok": figures.ok,
        "violations": list(figures.violations[:5]),
    }


def show(results: list[Figures]) -> None:
    console = Console()
    parts = sorted({part for r in results for part in r.cpu.parts}, key=_part_order)
    table = Table(title="shards: turns/s and CPU µs a turn (all processes), one run")
    for column in ("run", "shards", "fronts", "turns/s", "CPU/turn", *parts, "invariants"):
        table.add_column(column, justify="left" if column in ("run", "invariants") else "right")
    for r in results:
        table.add_row(
            r.mode,
            str(r.shards),
            str(r.fronts),
            f"{r.turns_per_s:,.0f}",
            f"{r.per_turn_us():,.0f}",
            *(f"{r.per_turn_us(p):,.0f}" for p in parts),
            "ok" if r.ok else f"{len(r.violations)} broken: {r.violations[0]}",
        )
    console.print(table)
    for mode in ("in process", "over AHP"):
        one = next((r for r in results if (r.mode, r.shards, r.fronts) == (mode, 1, 1)), None)
        two = next((r for r in results if (r.mode, r.shards, r.fronts) == (mode, 2, 1)), None)
        if one and two:
            console.print(
                f"{mode}: 2 shards / 1: turns/s {two.turns_per_s / one.turns_per_s:.2f}x"
                f" (target >= 1.3x), CPU a turn {two.per_turn_us() / one.per_turn_us():.2f}x"
                " (target <= 1.5x)"
            )
    one_front = next(
        (r for r in results if (r.mode, r.shards, r.fronts) == ("over AHP", 2, 1)), None
    )
    two_fronts = next((r for r in results if r.fronts == 2), None)
    if one_front and two_fronts:
        console.print(
            f"over AHP, 2 shards: 2 fronts / 1: turns/s"
            f" {two_fronts.turns_per_s / one_front.turns_per_s:.2f}x, CPU a turn"
            f" {two_fronts.per_turn_us() / one_front.per_turn_us():.2f}x"
        )


def _part_order(part: str) -> tuple[int, str]:
    order = {"front": 0, "serve": 0, "ray": 8, "postgres": 9}
    return order.get(part, 0 if part.startswith("front-") else 1), part
