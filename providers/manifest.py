"""Provider manifests: named providers declared in a TOML file.

    [providers.gpt]
    kind = "openai"
    model = "gpt-4o-mini"
    base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"   # the variable's name, never the key
    temperature = 0.2
    max_output_tokens = 1024
    timeout_s = 60                   # each request's timeout (connect, each chunk)

    [providers.local]
    kind = "openai"
    model = "llama3"
    base_url = "http://127.0.0.1:11434/v1"
    api_key_env = ""                 # empty: the endpoint needs no key

    [providers.claude]
    kind = "claude"
    cli_path = "/usr/local/bin/claude"

    [providers.codex]
    kind = "codex"
    cli_path = "/usr/local/bin/codex"
    approval_policy = "on-request"   # or "untrusted", "never"
    sandbox = "workspace-write"      # or "read-only", "danger-full-access"

    [providers.copilot]
    kind = "copilot"
    cli_path = "/usr/local/bin/copilot"
    model = "claude-sonnet-4.5"
    [providers.copilot.byok]         # your own model endpoint instead of a GitHub login
    type = "anthropic"               # or "openai", "azure"
    base_url = "https://api.anthropic.com"
    api_key_env = "ANTHROPIC_API_KEY"

    [providers.scripted]
    kind = "scripted"
    shape = "claude"

`load_manifest(path)` returns `{name: Provider}` for `Host.start(providers=...)`.
Kinds: scripted, openai, copilot, claude, codex; each accepts its own keys and
no others. A scripted provider's `records` (how many of its latest prompts and
sends it keeps to be read back in process) is 0 unless the manifest says: a
served one would otherwise hold the history of its last 1,000 sends, whole
chats' text. Copilot, Claude and Codex are imported only when a manifest names
them (each comes with its own extra). Every error is an `AgentHostError`
(INVALID_ARGUMENT) naming the file, the provider entry and the key; no error
repeats a value from the file, so a secret pasted in the wrong place never
reaches a log.
"""

import importlib
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from typing import Any

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.providers.base import Provider
from agenthost.providers.openai_compat import DEFAULT_BASE_URL, OpenAICompatProvider
from agenthost.providers.scripted import SHAPES, ScriptedProvider

# kind -> the keys it accepts besides `kind`
KEYS: dict[str, frozenset[str]] = {
    "scripted": frozenset({"shape", "echo_deltas", "delta_s", "records"}),
    "openai": frozenset(
        {"model", "base_url", "api_key_env", "temperature", "max_output_tokens", "timeout_s"}
    ),
    "copilot": frozenset({"model", "cli_path", "byok"}),
    "claude": frozenset({"model", "cli_path"}),
    "codex": frozenset({"model", "cli_path", "approval_policy", "sandbox", "max_retries"}),
}
# What codex 0.163's thread/start and thread/resume take (AskForApproval, SandboxMode;
# `codex --help` lists on-request and never; "untrusted" is still a thread's option,
# though its config.toml no longer takes it). CodexProvider checks the same.
CODEX_CHOICES: dict[str, tuple[str, ...]] = {
    "approval_policy": ("untrusted", "on-request", "never"),
    "sandbox": ("read-only", "workspace-write", "danger-full-access"),
}
SDK_CLASSES = {"copilot": "CopilotProvider", "claude": "ClaudeProvider", "codex": "CodexProvider"}
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# [providers.NAME.byok] keys (the key itself never: only the variable holding it)
BYOK_KEYS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "type": (lambda v: v in ("openai", "azure", "anthropic"), "one of openai, azure, anthropic"),
    "base_url": (
        lambda v: isinstance(v, str) and re.match(r"https?://[^/\s]+", v) is not None,
        "an http:// or https:// URL",
    ),
    "api_key_env": (
        lambda v: isinstance(v, str) and ENV_NAME.fullmatch(v) is not None,
        "an environment variable's name",
    ),
    "wire_api": (lambda v: v in ("completions", "responses"), "completions or responses"),
    "model_id": (lambda v: isinstance(v, str) and v != "", "a non-empty string"),
    "wire_model": (lambda v: isinstance(v, str) and v != "", "a non-empty string"),
    "max_prompt_tokens": (lambda v: _positive_int(v), "a positive integer"),
    "max_output_tokens": (lambda v: _positive_int(v), "a positive integer"),
}


def load_manifest(path: str | os.PathLike[str]) -> dict[str, Provider]:
    """Build the providers a manifest declares (on the caller's thread).

    Args:
        path: the TOML file.

    Returns:
        The providers by name, in the file's order.

    Raises:
        AgentHostError: INVALID_ARGUMENT naming the entry and key at fault: an
            unreadable or malformed file, an unknown kind or key, a bad value, a
            key variable that is not set, or a kind whose extra is not installed.
    """
    where = os.fspath(path)
    try:
        with open(where, "rb") as file:
            document = tomllib.load(file)
    except OSError as exc:
        raise _invalid(f"{where}: cannot read the provider manifest: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise _invalid(f"{where}: not valid TOML: {exc}") from None
    unknown = sorted(set(document) - {"providers"})
    if unknown:
        raise _invalid(f"{where}: unknown top-level key {unknown[0]!r} (expected [providers.NAME])")
    entries = document.get("providers")
    if not isinstance(entries, dict) or not entries:
        raise _invalid(f"{where}: declares no providers (expected [providers.NAME] tables)")
    providers: dict[str, Provider] = {}
    for name, entry in entries.items():
        if not NAME.fullmatch(name):
            raise _invalid(f"{where}: provider name {name!r} must be letters, digits, . _ -")
        if not isinstance(entry, dict):
            raise _invalid(f"{where}: provider {name!r} must be a table ([providers.{name}])")
        providers[name] = _provider(_Entry(where, name, entry))
    return providers


class _Entry:
    """One [providers.NAME] table, read key by key."""

    def __init__(self, where: str, name: str, table: Mapping[str, Any]) -> None:
        self.where = where
        self.name = name
        self.table = table

    def error(self, key: str, problem: str) -> AgentHostError:
        return _invalid(f"{self.where}: provider {self.name!r}: {key!r} {problem}")

    def get(self, key: str, check: Callable[[Any], bool], expected: str, default: Any) -> Any:
        if key not in self.table:
            return default
        value = self.table[key]
        if not check(value):
            # Say what was expected and what type came, never the value itself.
            raise self.error(key, f"must be {expected} (got a {_toml_type(value)})")
        return value

    def text(self, key: str, default: str | None = None) -> str | None:
        return self.get(
            key, lambda v: isinstance(v, str) and v != "", "a non-empty string", default
        )

    def required_text(self, key: str) -> str:
        value = self.text(key)
        if value is None:
            raise self.error(key, "is required")
        return value


def _provider(entry: _Entry) -> Provider:
    kind = entry.table.get("kind")
    if kind is None:
        raise entry.error("kind", f"is required: one of {', '.join(KEYS)}")
    if not isinstance(kind, str) or kind not in KEYS:
        raise entry.error("kind", f"must be one of {', '.join(KEYS)}")
    for key in entry.table:
        if key != "kind" and key not in KEYS[kind]:
            accepted = ", ".join(sorted(KEYS[kind]))
            raise entry.error(key, f"is not a key of kind {kind!r} (it accepts: {accepted})")
    if kind == "scripted":
        return _scripted(entry)
    if kind == "openai":
        return _openai(entry)
    return _sdk(entry, kind)


def _scripted(entry: _Entry) -> Provider:
    shape = entry.get("shape", lambda v: v in SHAPES, f"one of {', '.join(SHAPES)}", "copilot")
    echo_deltas = entry.get("echo_deltas", _positive_int, "a positive integer", 3)
    delta_s = entry.get("delta_s", lambda v: _number(v) and v >= 0, "a number >= 0", 0.0)
    # What it was sent is read back only in process: a served one keeps none
    # unless asked (a record holds its send's history, the text of whole chats).
    records = entry.get("records", _non_negative_int, "an integer >= 0", 0)
    return ScriptedProvider(
        shape=shape, echo_deltas=echo_deltas, delta_s=float(delta_s), records=records
    )


def _openai(entry: _Entry) -> Provider:
    model = entry.required_text("model")
    base_url = entry.get(
        "base_url",
        lambda v: isinstance(v, str) and re.match(r"https?://[^/\s]+", v) is not None,
        "an http:// or https:// URL",
        DEFAULT_BASE_URL,
    )
    key_env = entry.get(
        "api_key_env",
        lambda v: isinstance(v, str) and (v == "" or ENV_NAME.fullmatch(v) is not None),
        "an environment variable's name (or empty for an endpoint without a key)",
        "OPENAI_API_KEY",
    )
    temperature = entry.get(
        "temperature", lambda v: _number(v) and 0 <= v <= 2, "a number from 0 to 2", None
    )
    max_output_tokens = entry.get("max_output_tokens", _positive_int, "a positive integer", None)
    timeout_s = entry.get("timeout_s", lambda v: _number(v) and v > 0, "a number > 0", 60.0)
    if key_env and not os.environ.get(key_env):
        raise entry.error(
            "api_key_env", f"names the environment variable {key_env}, which is not set"
        )
    return OpenAICompatProvider(
        name=entry.name,
        model=model,
        base_url=base_url,
        api_key_env=key_env or None,
        temperature=None if temperature is None else float(temperature),
        max_output_tokens=max_output_tokens,
        timeout_s=float(timeout_s),
    )


def _sdk(entry: _Entry, kind: str) -> Provider:
    """Copilot, Claude, Codex: their modules are imported only when named."""
    options: dict[str, Any] = {}
    cli_path = entry.text("cli_path")
    if cli_path is not None:
        options["cli_path"] = cli_path
    model = entry.text("model")
    if model is not None:
        options["model"] = model
    if "byok" in entry.table:
        options["byok"] = _byok(entry)
    for key, accepted in CODEX_CHOICES.items():
        if key in entry.table:
            options[key] = entry.get(
                key, accepted.__contains__, f"one of {', '.join(accepted)}", None
            )
    if "max_retries" in entry.table:
        options["max_retries"] = entry.get(
            "max_retries",
            lambda v: _positive_int(v) or (v == 0 and type(v) is int),
            "a whole number >= 0",
            None,
        )
    try:
        module = importlib.import_module(f"agenthost.providers.{kind}")
        cls = getattr(module, SDK_CLASSES[kind])
    except (ImportError, AttributeError) as exc:
        raise _invalid(
            f"{entry.where}: provider {entry.name!r}: kind {kind!r} is not available"
            f" ({type(exc).__name__}): install it with pip install 'agenthost[{kind}]'"
        ) from None
    provider: Provider = cls(**options)
    return provider


def _byok(entry: _Entry) -> dict[str, Any]:
    """A copilot entry's [providers.NAME.byok] table, checked key by key."""
    table = entry.get(
        "byok", lambda v: isinstance(v, dict), f"a table ([providers.{entry.name}.byok])", {}
    )
    for key, value in table.items():
        if key == "api_key":
            raise entry.error("byok.api_key", "is not accepted: name the variable with api_key_env")
        if key not in BYOK_KEYS:
            accepted = ", ".join(sorted(BYOK_KEYS))
            raise entry.error(f"byok.{key}", f"is not a byok key (it accepts: {accepted})")
        check, expected = BYOK_KEYS[key]
        if not check(value):
            raise entry.error(f"byok.{key}", f"must be {expected} (got a {_toml_type(value)})")
    for key in ("type", "base_url"):
        if key not in table:
            raise entry.error(f"byok.{key}", "is required")
    variable = table.get("api_key_env")
    if variable is not None and not os.environ.get(variable):
        raise entry.error(
            "byok.api_key_env", f"names the environment variable {variable}, which is not set"
        )
    return dict(table)


def _invalid(message: str) -> AgentHostError:
    return AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message=message)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _non_negative_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _toml_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    return {
        str: "string",
        int: "integer",
        float: "float",
        dict: "table",
        list: "array",
    }.get(type(value), type(value).__name__)
