"""Errors end turns in the real CLIs' own words (DESIGN.md, "Errors end turns"),
offline in the loopback namespace (see conftest.py): a model API that refuses,
one that fails and is retried, a network that is gone, a CLI that cannot start.
Each turn ends with the CLI's words in its outcome, never by a timeout."""

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from agenthost.actors import Host, RestartPolicy
from agenthost.messages import ErrorCode, OutcomeState
from agenthost.store import SqliteStore
from tests.integration.conftest import Vendor
from tests.integration.fake_apis import Fail
from tests.integration.test_real_clis import WAIT_S, StartHost, open_chat

REFUSED = "the model API refuses this request"
FAILING = "the model API is failing"


@pytest.fixture
def logs() -> Iterator[list[dict[str, Any]]]:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    with structlog.testing.capture_logs() as captured:
        yield captured


def test_a_model_api_that_refuses_ends_the_turn_in_the_clis_words(
    vendor: Vendor, start_host: StartHost
) -> None:
    vendor.api.on("refuse me", Fail(400, REFUSED))
    _, chat = open_chat(vendor, start_host)
    outcome = chat.send("refuse me").result(timeout=WAIT_S)
    assert outcome.state is OutcomeState.ERROR
    assert outcome.error is not None and outcome.error.code is ErrorCode.PROVIDER_ERROR
    assert REFUSED in outcome.error.message
    after = chat.send("and now").result(timeout=WAIT_S)  # the CLI is well: only the turn failed
    assert (after.state, after.text) == (OutcomeState.COMPLETE, "echo: and now")


@pytest.mark.parametrize("vendor", ["claude", "codex"], indirect=True)
def test_a_failing_model_api_is_retried_each_retry_logged_then_the_turn_ends_in_its_words(
    vendor: Vendor, start_host: StartHost, logs: list[dict[str, Any]]
) -> None:
    vendor.api.on("fail me", Fail(500, FAILING))
    options: dict[str, Any] = {}
    if vendor.name == "claude":  # it retries ten times by default, over minutes
        options["env"] = {**vendor.env, "CLAUDE_CODE_MAX_RETRIES": "1"}
    _, chat = open_chat(vendor, start_host, **options)
    outcome = chat.send("fail me").result(timeout=WAIT_S)
    assert outcome.state is OutcomeState.ERROR
    assert outcome.error is not None and outcome.error.code is ErrorCode.PROVIDER_ERROR
    retried = [e for e in logs if e["event"] in ("claude_api_retrying", "codex_retrying")]
    assert retried and all(e["log_level"] == "warning" for e in retried)
    assert "fail me" not in repr(retried)
    if vendor.name == "claude":
        assert f"API Error: 500 {FAILING}" in outcome.error.message
    else:  # codex words a server error its own way
        assert "high demand" in outcome.error.message
    assert len(vendor.api.requests) > 1


@pytest.mark.parametrize("vendor", ["codex"], indirect=True)
def test_codex_without_a_network_gives_up_after_its_retries_in_its_own_words(
    vendor: Vendor, start_host: StartHost, tmp_path: Path, logs: list[dict[str, Any]]
) -> None:
    """Codex waits for a network that is gone without end, a retry a minute; the
    adapter ends the turn past max_retries, with codex's words."""
    home = tmp_path / "codex-home"
    home.mkdir()
    config = (Path(vendor.env["CODEX_HOME"]) / "config.toml").read_text()
    # Port 9 (discard) listens nowhere in the namespace: the connection is refused.
    (home / "config.toml").write_text(config.replace(vendor.api.url, "http://127.0.0.1:9"))
    env = {**vendor.env, "CODEX_HOME": str(home)}
    _, chat = open_chat(vendor, start_host, env=env, max_retries=1)
    outcome = chat.send("hello").result(timeout=WAIT_S)
    assert outcome.state is OutcomeState.ERROR
    assert outcome.error is not None
    assert "Reconnecting... waiting for network" in outcome.error.message
    assert "gave up after 2 attempts" in outcome.error.message
    assert [e["attempt"] for e in logs if e["event"] == "codex_retrying"] == [1, 2]


@pytest.mark.parametrize("vendor", ["claude"], indirect=True)
def test_a_claude_cli_that_cannot_start_ends_the_turn_in_its_own_words(
    vendor: Vendor, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-settings.json"
    provider = vendor.provider(sdk_options={"settings": str(missing)})
    host = Host.start(
        store=SqliteStore(tmp_path / "agenthost.db"),
        providers={"claude": provider},
        restart_policy=RestartPolicy(intensity=0),
    )
    try:
        outcome = host.create_session(provider="claude").chat().send("hi").result(timeout=WAIT_S)
    finally:
        host.stop(timeout=30)
    assert outcome.state is OutcomeState.ERROR
    assert outcome.error is not None and outcome.error.code is ErrorCode.PROVIDER_UNAVAILABLE
    assert f"Settings file not found: {missing}" in outcome.error.message
    assert "Check stderr output for details" not in outcome.error.message
