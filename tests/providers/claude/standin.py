"""Drive the stand-in Claude CLI (standin_cli.py) through the real SDK and ClaudeAdapter."""

import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from agenthost.messages.provider import ProviderEvent, ProviderRefReported, ProviderSend
from agenthost.providers.claude import ClaudeProvider

STANDIN = Path(__file__).with_name("standin_cli.py")
WAIT_S = 30.0  # a CLI (two Python processes) starts within it even on a loaded machine
T = TypeVar("T")
E = TypeVar("E")


class StandIn:
    """One test's stand-in: its script, its state directory and its record."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.script_path = directory / "script.json"
        self.log_path = directory / "cli-log.jsonl"
        self.script()

    @property
    def env(self) -> dict[str, str]:
        return {
            "CLAUDE_STANDIN_SCRIPT": str(self.script_path),
            "CLAUDE_STANDIN_LOG": str(self.log_path),
            "CLAUDE_STANDIN_STATE": str(self.directory),
        }

    def script(self, replies: dict[str, list[dict[str, Any]]] | None = None, **more: Any) -> None:
        """Script the CLIs started from now on."""
        self.script_path.write_text(json.dumps({"replies": replies or {}, **more}))

    def provider(self, **options: Any) -> ClaudeProvider:
        return ClaudeProvider(cli_path=STANDIN, env=self.env, **options)

    def log(self, event: str | None = None) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        entries = [json.loads(line) for line in self.log_path.read_text().splitlines()]
        return [e for e in entries if event is None or e["event"] == event]

    def received(self) -> list[str]:
        """The text of every user message the CLIs received, in order."""
        return [e["text"] for e in self.log() if e["event"] in ("prompt", "steering")]


class Events:
    """What an adapter emitted, with waits (the adapter and the test share one loop)."""

    def __init__(self) -> None:
        self.seen: list[ProviderEvent] = []
        self.refs: list[str] = []  # the references reported, apart
        self._changed = asyncio.Event()

    def __call__(self, event: ProviderEvent) -> None:
        if isinstance(event, ProviderRefReported):
            self.refs.append(event.provider_ref)
        else:
            self.seen.append(event)
        self._changed.set()

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.seen if isinstance(e, kind)]

    async def wait_for(self, kind: type[E], where: Callable[[E], bool] = lambda _: True) -> E:
        async with asyncio.timeout(WAIT_S):
            while True:
                for event in self.seen:
                    if isinstance(event, kind) and where(event):
                        return event
                self._changed.clear()
                await self._changed.wait()


def run(scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run one test's scenario on a fresh event loop, bounded."""

    async def bounded() -> T:
        async with asyncio.timeout(90):
            return await scenario()

    return asyncio.run(bounded())


def send(turn_id: str, text: str, session_id: str = "s1", chat_id: str = "c1") -> ProviderSend:
    return ProviderSend(session_id=session_id, chat_id=chat_id, turn_id=turn_id, text=text)
