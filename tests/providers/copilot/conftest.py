"""The Copilot adapter driven by the real SDK against standin_copilot.py.

The SDK downloads a CLI when given no path: every test passes one and sets
COPILOT_SKIP_CLI_DOWNLOAD=1, so a slip is an error, never a download.
"""

import json
import queue
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agenthost.messages.provider import ProviderEvent, ProviderRefReported, ProviderSend
from agenthost.providers.base import ProviderLoop
from agenthost.providers.copilot import CopilotAdapter, CopilotProvider

STANDIN = Path(__file__).with_name("standin_copilot.py")
LOADER = Path(__file__).with_name("copilot_loader.sh")  # starts STANDIN as its child
WAIT_S = 10.0
E = TypeVar("E")
T = TypeVar("T")


@pytest.fixture(autouse=True)
def _no_cli_download(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPILOT_SKIP_CLI_DOWNLOAD", "1")


class StandIn:
    """One scripted stand-in CLI: its script, the requests it received, a provider on it."""

    def __init__(
        self, tmp_path: Path, script: dict[str, Any], cli: Path = STANDIN, **options: Any
    ) -> None:
        self.record = tmp_path / "requests.jsonl"
        path = tmp_path / "script.json"
        path.write_text(json.dumps({"record": str(self.record), **script}))
        options.setdefault("heartbeat_s", 0.05)
        self.provider = CopilotProvider(
            cli_path=cli, env={"COPILOT_STANDIN_SCRIPT": str(path)}, **options
        )

    def requests(self, method: str) -> list[dict[str, Any]]:
        """The params of every `method` request the stand-in received, in order."""
        if not self.record.exists():
            return []
        lines = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [line["params"] for line in lines if line["method"] == method]

    def prompts(self) -> list[str]:
        return [params["prompt"] for params in self.requests("session.send")]


class Driver:
    """An adapter on its own provider loop, with its emitted events in a queue."""

    def __init__(self, standin: StandIn) -> None:
        self.standin = standin
        self.loop = ProviderLoop("copilot-test")
        self.events: queue.Queue[ProviderEvent] = queue.Queue()
        self.seen: list[ProviderEvent] = []
        self.refs: list[str] = []  # the references reported, apart
        self.adapter: CopilotAdapter = standin.provider.open_session("s1", "c1", self._emit)

    def _emit(self, event: ProviderEvent) -> None:
        if isinstance(event, ProviderRefReported):
            self.refs.append(event.provider_ref)
        else:
            self.events.put(event)

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.submit(coro).result(WAIT_S)

    def send(self, text: str, turn_id: str = "t1") -> str:
        sent = ProviderSend(session_id="s1", chat_id="c1", turn_id=turn_id, text=text)
        message_id = self.call(self.adapter.send(sent))
        assert message_id is not None
        return message_id

    def wait_for(self, kind: type[E], where: Callable[[E], bool] = lambda _: True) -> E:
        """The next emitted `kind` event matching `where` (earlier ones are kept in `seen`)."""
        while True:
            event = self.events.get(timeout=WAIT_S)
            self.seen.append(event)
            if isinstance(event, kind) and where(event):
                return event

    def close(self) -> None:
        try:
            self.call(self.adapter.dispose())
        finally:
            self.loop.stop()


@pytest.fixture
def drive(tmp_path: Path) -> Iterator[Callable[..., Driver]]:
    """Start an adapter on a stand-in scripted with `script`; `start=False` leaves it unopened."""
    drivers: list[Driver] = []

    def make(script: dict[str, Any] | None = None, start: bool = True, **options: Any) -> Driver:
        driver = Driver(StandIn(tmp_path, script or {}, **options))
        drivers.append(driver)
        if start:
            driver.call(driver.adapter.start())
        return driver

    yield make
    for driver in drivers:
        driver.close()
