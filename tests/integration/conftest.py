"""The vendors' real CLIs, each only inside a loopback-only network namespace.

Where they come from (the issue's versions):
- Claude Code: bundled in claude-agent-sdk's platform wheel
  (`claude_agent_sdk/_bundled/claude`; the `claude` extra);
- codex: openai-codex-cli-bin (`codex_cli_bin/bin/codex`; the `codex` extra);
- GitHub Copilot CLI: npm `@github/copilot` at COPILOT_VERSION with its platform
  package, installed once into a cache folder (AGENTHOST_CLI_CACHE, default
  ~/.cache/agenthost/clis) with `npm install --prefix`; `copilot` is a node
  loader that starts the native binary as its child.
Every CLI path a provider gets is a netns.py wrapper, so each CLI, and all it
starts, runs inside the namespace; the fake model APIs listen there too. At the
end of every test that drives one, each process of a real CLI still running
(the CLI proper, Copilot's npm loader, and everything they started) is checked
to be in that namespace, and once the test's hosts stop, none may be left.
Every test here is marked `realcli` (`-m "not realcli"` leaves them out).
"""

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import psutil
import pytest

from agenthost.actors import Host
from agenthost.providers.base import Provider
from agenthost.store import SqliteStore
from tests.integration.fake_apis import AnthropicAPI, FakeAPI, ResponsesAPI, Tool
from tests.integration.netns import LoopbackNamespace, unavailable

COPILOT_VERSION = "1.0.102"
CLAUDE_MODEL = "claude-sonnet-4-5"
COPILOT_MODEL = "claude-sonnet-4.5"
FAKE_KEY = "sk-fake-loopback-only"
HERE = Path(__file__).parent
WAIT_S = 30.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.realcli)


@pytest.fixture(scope="session")
def netns() -> Iterator[LoopbackNamespace]:
    reason = unavailable()
    if reason is not None:
        pytest.skip(
            f"no loopback-only network namespace here ({reason}): real CLIs run only in one"
        )
    namespace = LoopbackNamespace.create()
    yield namespace
    namespace.close()


@pytest.fixture(scope="session")
def anthropic_api(netns: LoopbackNamespace) -> Iterator[AnthropicAPI]:
    api = AnthropicAPI(netns).start()
    yield api
    api.stop()


@pytest.fixture(scope="session")
def responses_api(netns: LoopbackNamespace) -> Iterator[ResponsesAPI]:
    api = ResponsesAPI(netns).start()
    yield api
    api.stop()


# -- the CLIs -------------------------------------------------------------------------------
def claude_binary() -> Path:
    try:
        import claude_agent_sdk
    except ImportError:
        pytest.skip("claude-agent-sdk is not installed (pip install 'agenthost[claude]')")
    path = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    if not path.is_file():
        pytest.skip(f"no Claude Code CLI bundled at {path} (the sdist has none: use the wheel)")
    return path


def codex_binary() -> Path:
    try:
        import codex_cli_bin
    except ImportError:
        pytest.skip("openai-codex-cli-bin is not installed (pip install 'agenthost[codex]')")
    return codex_cli_bin.bundled_codex_path()


@pytest.fixture(scope="session")
def copilot_install() -> Path:
    """npm's @github/copilot at COPILOT_VERSION, installed once into the cache folder."""
    cache = Path(
        os.environ.get("AGENTHOST_CLI_CACHE") or Path.home() / ".cache" / "agenthost" / "clis"
    )
    prefix = cache / f"copilot-{COPILOT_VERSION}"
    loader = prefix / "node_modules" / "@github" / "copilot" / "npm-loader.js"
    if loader.is_file():
        return prefix
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("npm and node are needed to install @github/copilot; neither is installed")
    prefix.mkdir(parents=True, exist_ok=True)
    installed = subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(prefix),
            "--no-audit",
            "--ignore-scripts",
            "--no-fund",
            "--no-save",
            f"@github/copilot@{COPILOT_VERSION}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if installed.returncode != 0 or not loader.is_file():
        pytest.skip(
            f"npm could not install @github/copilot@{COPILOT_VERSION}: {installed.stderr[-500:]}"
        )
    return prefix


# -- the vendors ----------------------------------------------------------------------------
@attrs.define
class Vendor:
    """One real CLI as the tests drive it: how to make its provider (with `env`,
    its environment), the binary that is the CLI proper (the one a kill -9 aims
    at) and the loader that starts it (Copilot's), how its model writes a file,
    whether it can take back steering it was given, and the network namespace
    (`namespace`, its /proc path) every process of it must run in."""

    name: str
    api: FakeAPI
    binary: Path
    make: Callable[..., Provider]
    write_file: Callable[[Path, str], Tool]
    withdraws: bool
    workdir: Path
    env: dict[str, str]
    namespace: str
    loader: Path | None = None

    def provider(self, **options: Any) -> Provider:
        return self.make(**options)

    def cli_tree(self) -> list[psutil.Process]:
        """Every process of the real CLI among this process's descendants: the CLI
        proper, the loader, and all they started."""
        roots = self.cli_processes()
        if self.loader is not None:
            loader = str(self.loader.resolve())
            for process in psutil.Process().children(recursive=True):
                try:
                    if any(loader == arg or arg.endswith(loader) for arg in process.cmdline()):
                        roots.append(process)
                except (psutil.Error, OSError):
                    continue
        found: dict[int, psutil.Process] = {}
        for root in roots:
            try:
                for process in [root, *root.children(recursive=True)]:
                    found[process.pid] = process
            except psutil.Error:
                continue
        return list(found.values())

    def outside_the_namespace(self) -> list[str]:
        """The processes of the CLI whose network namespace is not the test's."""
        expected = os.readlink(self.namespace)
        outside = []
        for process in self.cli_tree():
            try:
                actual = os.readlink(f"/proc/{process.pid}/ns/net")
                described = f"{process.pid} {' '.join(process.cmdline()[:2])} in {actual}"
            except (OSError, psutil.Error):
                continue  # it exited meanwhile
            if actual != expected:
                outside.append(described)
        return outside

    def cli_processes(self) -> list[psutil.Process]:
        """The CLI proper, among this process's descendants (through the guard and
        the wrapper; under npm's loader for Copilot)."""
        found = []
        for process in psutil.Process().children(recursive=True):
            try:
                if Path(process.exe()).resolve() == self.binary.resolve():
                    found.append(process)
            except (psutil.Error, OSError):
                continue
        return found


@pytest.fixture(scope="session")
def homes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One HOME per vendor for the session (the CLIs unpack and keep state there)."""
    return tmp_path_factory.mktemp("homes")


def _claude(netns: LoopbackNamespace, api: AnthropicAPI, homes: Path, work: Path) -> Vendor:
    from agenthost.providers import ClaudeProvider

    binary = claude_binary()
    home = homes / "claude"
    home.mkdir(exist_ok=True)
    wrapper = netns.wrap(binary, homes / "claude-in-netns")
    env = {
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": FAKE_KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
    }

    def make(**options: Any) -> Provider:
        settings: dict[str, Any] = {
            "cli_path": wrapper,
            "env": env,
            "model": CLAUDE_MODEL,
            "cwd": work,
            "probe_after": 600.0,
        }
        return ClaudeProvider(**{**settings, **options})

    return Vendor(
        name="claude",
        api=api,
        binary=binary,
        make=make,
        write_file=lambda path, text: Tool("Write", {"file_path": str(path), "content": text}),
        withdraws=False,
        workdir=work,
        env=env,
        namespace=netns.path,
    )


def _codex(netns: LoopbackNamespace, api: ResponsesAPI, homes: Path, work: Path) -> Vendor:
    from agenthost.providers import CodexProvider

    binary = codex_binary()
    home = homes / "codex"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        'model = "gpt-fake"\n'
        'model_provider = "fake"\n'
        "[model_providers.fake]\n"
        'name = "fake"\n'
        f'base_url = "{api.url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "FAKE_RESPONSES_KEY"\n'
        "stream_max_retries = 1\n"  # a failing API's turn ends in seconds, not 25
        "request_max_retries = 1\n"
    )
    wrapper = netns.wrap(binary, homes / "codex-in-netns")
    env = {"HOME": str(home), "CODEX_HOME": str(codex_home), "FAKE_RESPONSES_KEY": FAKE_KEY}

    def make(**options: Any) -> Provider:
        settings: dict[str, Any] = {
            "cli_path": wrapper,
            "env": env,
            "cwd": str(work),
            "approval_policy": "on-request",
            "sandbox": "read-only",
        }
        return CodexProvider(**{**settings, **options})

    def write_file(path: Path, text: str) -> Tool:
        command = f"printf %s {text} > {path}"
        arguments = {
            "cmd": command,
            "sandbox_permissions": "require_escalated",
            "justification": "May I write the file?",
        }
        return Tool("exec_command", arguments)

    return Vendor(
        name="codex",
        api=api,
        binary=binary,
        make=make,
        write_file=write_file,
        withdraws=False,
        workdir=work,
        env=env,
        namespace=netns.path,
    )


def _copilot(
    netns: LoopbackNamespace, api: AnthropicAPI, homes: Path, work: Path, prefix: Path
) -> Vendor:
    from agenthost.providers import CopilotProvider

    loader = prefix / "node_modules" / "@github" / "copilot" / "npm-loader.js"
    binary = prefix / "node_modules" / "@github" / "copilot-linux-x64" / "copilot"
    if not binary.is_file():
        pytest.skip(f"no native Copilot CLI at {binary} (its platform package is not installed)")
    home = homes / "copilot"
    home.mkdir(exist_ok=True)
    wrapper = netns.wrap(loader, homes / "copilot-in-netns")
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}

    def make(**options: Any) -> Provider:
        settings: dict[str, Any] = {
            "cli_path": wrapper,
            "env": env,
            "model": COPILOT_MODEL,
            "working_directory": str(work),
            "byok": {"type": "anthropic", "base_url": api.url, "api_key": FAKE_KEY},
            "heartbeat_s": 1.0,  # how soon a killed CLI is noticed mid-turn (5 s by default)
        }
        return CopilotProvider(**{**settings, **options})

    return Vendor(
        name="copilot",
        api=api,
        binary=binary,
        make=make,
        write_file=lambda path, text: Tool("create", {"path": str(path), "file_text": text}),
        withdraws=True,
        workdir=work,
        env=env,
        namespace=netns.path,
        loader=loader,
    )


@pytest.fixture(params=["claude", "codex", "copilot"])
def vendor(
    request: pytest.FixtureRequest,
    netns: LoopbackNamespace,
    homes: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Vendor]:
    """Each vendor's real CLI, its fake API reset for the test."""
    for variable in ("GH_TOKEN", "GITHUB_TOKEN", "COPILOT_GITHUB_TOKEN", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(variable, raising=False)  # no login but what a test gives
    monkeypatch.setenv("COPILOT_SKIP_CLI_DOWNLOAD", "1")
    work = tmp_path / "work"
    work.mkdir()
    made: Vendor
    if request.param == "claude":
        made = _claude(netns, request.getfixturevalue("anthropic_api"), homes, work)
    elif request.param == "codex":
        made = _codex(netns, request.getfixturevalue("responses_api"), homes, work)
    else:
        prefix = request.getfixturevalue("copilot_install")
        made = _copilot(netns, request.getfixturevalue("anthropic_api"), homes, work, prefix)
    made.api.reset()
    yield made
    made.api.reset()  # opens every gate a test left closed


@pytest.fixture
def start_host(tmp_path: Path, vendor: Vendor) -> Iterator[Callable[[Provider, str], Host]]:
    """Hosts on this test's store; all are stopped at the end. Before they stop,
    every process of the vendor's CLI still running must be in the loopback
    namespace; once they stopped, none may be left."""
    hosts: list[Host] = []

    def start(provider: Provider, name: str) -> Host:
        host = Host.start(store=SqliteStore(tmp_path / "agenthost.db"), providers={name: provider})
        hosts.append(host)
        return host

    yield start
    outside = vendor.outside_the_namespace()
    for host in hosts:
        host.stop(timeout=30)
    _, left = psutil.wait_procs(vendor.cli_tree(), timeout=WAIT_S)
    assert not outside, f"processes of the {vendor.name} CLI outside the namespace: {outside}"
    assert not left, f"processes of the {vendor.name} CLI left after the hosts stopped: {left}"
