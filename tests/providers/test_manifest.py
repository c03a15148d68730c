"""Provider manifests: parsing, and an error for each way an entry can be wrong."""

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from agenthost.actors import Host
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.providers import OpenAICompatProvider, ScriptedProvider, load_manifest
from agenthost.providers.manifest import SDK_CLASSES
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock

SECRET = "sk-very-secret-value-42"


@pytest.fixture
def manifest(tmp_path: Path) -> Any:
    def write(text: str) -> Path:
        path = tmp_path / "providers.toml"
        path.write_text(text)
        return path

    return write


def error_of(path: Path) -> AgentHostError:
    with pytest.raises(AgentHostError) as caught:
        load_manifest(path)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    assert SECRET not in caught.value.message
    return caught.value


def test_a_manifest_declares_named_providers_of_each_kind(
    manifest: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPT_KEY", SECRET)
    providers = load_manifest(
        manifest(
            """
[providers.gpt]
kind = "openai"
model = "gpt-4o-mini"
base_url = "https://example.test/v1"
api_key_env = "GPT_KEY"
temperature = 0.5
max_output_tokens = 256

[providers.local]
kind = "openai"
model = "llama3"
base_url = "http://127.0.0.1:11434/v1"
api_key_env = ""

[providers.fake]
kind = "scripted"
shape = "claude"
"""
        )
    )
    assert list(providers) == ["gpt", "local", "fake"]
    gpt = providers["gpt"]
    assert isinstance(gpt, OpenAICompatProvider)
    assert (gpt.name, gpt.model, gpt.base_url, gpt.api_key_env) == (
        "gpt",
        "gpt-4o-mini",
        "https://example.test/v1",
        "GPT_KEY",
    )
    assert (gpt.temperature, gpt.max_output_tokens) == (0.5, 256)
    local = providers["local"]
    assert isinstance(local, OpenAICompatProvider)
    assert local.api_key_env is None
    fake = providers["fake"]
    assert isinstance(fake, ScriptedProvider)
    assert fake.shape == "claude"


def test_openai_defaults_to_the_openai_endpoint_and_key_variable(
    manifest: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    (provider,) = load_manifest(manifest('[providers.o]\nkind = "openai"\nmodel = "m"\n')).values()
    assert isinstance(provider, OpenAICompatProvider)
    assert provider.base_url == "https://api.openai.com/v1"
    assert provider.api_key_env == "OPENAI_API_KEY"
    assert (provider.temperature, provider.max_output_tokens) == (None, None)


def test_a_host_runs_turns_on_a_manifests_providers(
    manifest: Any, db_path: Path, clock: FakeClock
) -> None:
    providers = load_manifest(manifest('[providers.fake]\nkind = "scripted"\n'))
    with Host.start(store=SqliteStore(db_path), providers=providers, clock=clock) as host:
        chat = host.create_session(provider="fake").chat()
        assert chat.send("hi").result(timeout=10).state is OutcomeState.COMPLETE


@pytest.mark.parametrize(("records", "kept"), [("", []), ("records = 2\n", ["b", "c"])])
def test_a_manifests_scripted_provider_keeps_records_only_when_asked(
    manifest: Any, db_path: Path, clock: FakeClock, records: str, kept: list[str]
) -> None:
    """Served, nobody reads them: each would hold its send's history (whole chats)."""
    entry = '[providers.fake]\nkind = "scripted"\n' + records
    (provider,) = load_manifest(manifest(entry)).values()
    assert isinstance(provider, ScriptedProvider)
    with Host.start(store=SqliteStore(db_path), providers={"fake": provider}, clock=clock) as host:
        chat = host.create_session(provider="fake").chat()
        for text in ("a", "b", "c"):
            assert chat.send(text).result(timeout=10).state is OutcomeState.COMPLETE
    assert provider.prompts == kept


def test_a_missing_key_variable_names_the_entry_key_and_variable(
    manifest: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ABSENT_KEY", raising=False)
    error = error_of(
        manifest('[providers.gpt]\nkind = "openai"\nmodel = "m"\napi_key_env = "ABSENT_KEY"\n')
    )
    assert "'gpt'" in error.message
    assert "'api_key_env'" in error.message
    assert "ABSENT_KEY" in error.message


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ('kind = "openai"\nmodel = "m"\napi_key = "' + SECRET + '"', "api_key"),
        ('kind = "scripted"\nmodel = "' + SECRET + '"', "model"),
        ('kind = "claude"\ntemperature = 0.1', "temperature"),
    ],
)
def test_an_unknown_key_names_the_entry_and_key_never_its_value(
    manifest: Any, monkeypatch: pytest.MonkeyPatch, entry: str, key: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    error = error_of(manifest(f"[providers.p1]\n{entry}\n"))
    assert "'p1'" in error.message
    assert f"{key!r}" in error.message


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ('kind = "openai"\nmodel = "m"\ntemperature = "' + SECRET + '"', "temperature"),
        ('kind = "openai"\nmodel = "m"\ntemperature = 3.5', "temperature"),
        ('kind = "openai"\nmodel = "m"\nmax_output_tokens = 0', "max_output_tokens"),
        ('kind = "openai"\nmodel = "m"\nmax_output_tokens = true', "max_output_tokens"),
        ('kind = "openai"\nmodel = "m"\nbase_url = "' + SECRET + '"', "base_url"),
        ('kind = "openai"\nmodel = "m"\napi_key_env = "' + SECRET + '"', "api_key_env"),
        ('kind = "openai"\nmodel = ""', "model"),
        ('kind = "openai"', "model"),
        ('kind = "scripted"\nshape = "' + SECRET + '"', "shape"),
        ('kind = "scripted"\nrecords = -1', "records"),
        ('kind = "copilot"\ncli_path = 7', "cli_path"),
        ('kind = "' + SECRET + '"', "kind"),
        ('model = "m"', "kind"),
    ],
)
def test_a_bad_or_missing_value_names_the_entry_and_key_never_the_value(
    manifest: Any, monkeypatch: pytest.MonkeyPatch, entry: str, key: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    error = error_of(manifest(f"[providers.p1]\n{entry}\n"))
    assert "'p1'" in error.message
    assert f"{key!r}" in error.message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[providers", "not valid TOML"),
        ("", "declares no providers"),
        ('[other]\nkind = "scripted"\n', "'other'"),
        ("providers = 3\n", "declares no providers"),
        ("[providers]\np1 = 3\n", "'p1' must be a table"),
    ],
)
def test_a_malformed_manifest_is_a_clear_error(manifest: Any, text: str, expected: str) -> None:
    assert expected in error_of(manifest(text)).message


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    assert "cannot read" in error_of(tmp_path / "absent.toml").message


def fake_sdk_kind(monkeypatch: pytest.MonkeyPatch, kind: str) -> list[dict[str, Any]]:
    """Stand a recording class in for `kind`'s provider; returns what each was made with."""
    made: list[dict[str, Any]] = []

    class Recording(ScriptedProvider):
        def __init__(self, **options: Any) -> None:
            made.append(options)
            super().__init__()

    module = types.ModuleType(f"agenthost.providers.{kind}")
    setattr(module, SDK_CLASSES[kind], Recording)
    monkeypatch.setitem(sys.modules, f"agenthost.providers.{kind}", module)
    return made


def test_agent_sdk_kinds_are_imported_only_when_named_with_their_options(
    manifest: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = fake_sdk_kind(monkeypatch, "copilot")
    providers = load_manifest(
        manifest(
            '[providers.co]\nkind = "copilot"\ncli_path = "/opt/copilot"\nmodel = "gpt-5"\n'
            '[providers.bare]\nkind = "copilot"\n'
        )
    )
    assert type(providers["co"]).__name__ == "Recording"
    assert made == [{"cli_path": "/opt/copilot", "model": "gpt-5"}, {}]


def test_an_agent_sdk_kind_that_is_not_installed_says_which_extra_to_install(
    manifest: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "agenthost.providers.codex", None)  # not importable
    error = error_of(manifest('[providers.cx]\nkind = "codex"\n'))
    assert "'cx'" in error.message
    assert "agenthost[codex]" in error.message


def test_a_copilot_entry_passes_its_byok_table_on(
    manifest: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = fake_sdk_kind(monkeypatch, "copilot")
    monkeypatch.setenv("BYOK_KEY", SECRET)
    load_manifest(
        manifest(
            '[providers.co]\nkind = "copilot"\nmodel = "claude-sonnet-4.5"\n'
            '[providers.co.byok]\ntype = "anthropic"\nbase_url = "http://127.0.0.1:9"\n'
            'api_key_env = "BYOK_KEY"\nmax_output_tokens = 512\n'
        )
    )
    byok = {
        "type": "anthropic",
        "base_url": "http://127.0.0.1:9",
        "api_key_env": "BYOK_KEY",
        "max_output_tokens": 512,
    }
    assert made == [{"model": "claude-sonnet-4.5", "byok": byok}]


@pytest.mark.parametrize(
    ("byok", "key"),
    [
        ('api_key = "' + SECRET + '"', "byok.api_key"),
        ('type = "' + SECRET + '"\nbase_url = "http://x"', "byok.type"),
        ('type = "openai"', "byok.base_url"),
        ('type = "openai"\nbase_url = "' + SECRET + '"', "byok.base_url"),
        (
            'type = "openai"\nbase_url = "http://x"\napi_key_env = "UNSET_BYOK_VAR"',
            "byok.api_key_env",
        ),
        ('type = "openai"\nbase_url = "http://x"\nsecret = "' + SECRET + '"', "byok.secret"),
    ],
)
def test_a_bad_byok_table_names_the_entry_and_key_never_the_value(
    manifest: Any, byok: str, key: str
) -> None:
    error = error_of(manifest(f'[providers.co]\nkind = "copilot"\n[providers.co.byok]\n{byok}\n'))
    assert "'co'" in error.message
    assert f"{key!r}" in error.message


def test_a_codex_entry_passes_its_approval_policy_and_sandbox_on(
    manifest: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = fake_sdk_kind(monkeypatch, "codex")
    load_manifest(
        manifest(
            '[providers.cx]\nkind = "codex"\napproval_policy = "never"\nsandbox = "read-only"\n'
            "max_retries = 3\n"
        )
    )
    assert made == [{"approval_policy": "never", "sandbox": "read-only", "max_retries": 3}]


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ('approval_policy = "on-failure"', "approval_policy"),
        ('sandbox = "' + SECRET + '"', "sandbox"),
        ("max_retries = -1", "max_retries"),
        ('max_retries = "' + SECRET + '"', "max_retries"),
    ],
)
def test_a_codex_choice_codex_does_not_take_names_the_entry_and_key(
    manifest: Any, entry: str, key: str
) -> None:
    error = error_of(manifest(f'[providers.cx]\nkind = "codex"\n{entry}\n'))
    assert "'cx'" in error.message and f"{key!r}" in error.message
