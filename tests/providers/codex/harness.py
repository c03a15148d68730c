"""The stand-in codex CLI as tests use it: its script, its record, its thread store."""

import json
from pathlib import Path
from typing import Any

from agenthost.providers import CodexProvider

STANDIN = Path(__file__).with_name("standin_codex.py")


class Standin:
    """One test's stand-in CLI: its script, its record, its thread store."""

    def __init__(self, tmp_path: Path) -> None:
        self.record = tmp_path / "received.jsonl"
        self.home = tmp_path / "codex-home"
        self.home.mkdir()
        self.script_path = tmp_path / "script.json"
        self.script: dict[str, Any] = {"turns": {}}

    def on(self, prompt: str, *steps: dict[str, Any]) -> "Standin":
        self.script["turns"][prompt] = list(steps)
        return self

    def provider(self, **options: Any) -> CodexProvider:
        self.script_path.write_text(json.dumps(self.script))
        env = {
            "CODEX_STANDIN_SCRIPT": str(self.script_path),
            "CODEX_STANDIN_RECORD": str(self.record),
            "CODEX_STANDIN_HOME": str(self.home),
        }
        return CodexProvider(cli_path=STANDIN, env=env, **options)

    def received(self, method: str) -> list[dict[str, Any]]:
        """The params of every request of `method` the stand-in received."""
        if not self.record.exists():
            return []
        lines = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [m.get("params") or {} for m in lines if m.get("method") == method]

    def startups(self) -> list[dict[str, int]]:
        """Each stand-in process started: its pid, session id and process group."""
        lines = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [m["startup"] for m in lines if "startup" in m]

    def approvals(self) -> list[Any]:
        """The decisions the stand-in's approval requests were answered with."""
        return [r["decision"] for r in self.results() if "decision" in r]

    def inputs(self) -> list[dict[str, Any]]:
        """The answers the stand-in's request_user_input requests were answered with."""
        return [r["answers"] for r in self.results() if "answers" in r]

    def results(self) -> list[dict[str, Any]]:
        lines = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [m["result"] for m in lines if "result" in m]


def texts(params: list[dict[str, Any]]) -> list[str]:
    return ["\n".join(i["text"] for i in p["input"]) for p in params]
