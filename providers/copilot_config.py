"""What CopilotProvider is configured with, and the CLI's words as our errors.

`byok(...)` checks a `byok=` mapping and makes the SDK's own-endpoint
("bring your own key") `provider` option from it (a key only through the
variable that holds it, read now); `login_or_provider_error(...)` gives a
missing GitHub login its own code, PROVIDER_LOGIN_REQUIRED, saying what to
do. Neither repeats a key.
"""

import os
from collections.abc import Mapping
from typing import Any

from agenthost.messages.errors import AgentHostError, ErrorCode

NO_LOGIN = ("no github oauth token", "copilot hmac key")  # the CLI's words, lowercased
BYOK_TYPES = ("openai", "azure", "anthropic")
# ProviderConfig keys passed on as they are (the SDK's snake_case names)
BYOK_KEYS = frozenset(
    {
        "type",
        "base_url",
        "api_key",
        "api_key_env",
        "api_key_command",
        "bearer_token",
        "wire_api",
        "transport",
        "model_provider",
        "headers",
        "model_id",
        "wire_model",
        "max_prompt_tokens",
        "max_output_tokens",
        "azure",
    }
)


def login_or_provider_error(message: str) -> AgentHostError:
    """The CLI's error as ours: a missing GitHub login has its own code and says
    what to do; anything else is the provider's error, in its words."""
    if any(marker in message.lower() for marker in NO_LOGIN):
        return AgentHostError(
            code=ErrorCode.PROVIDER_LOGIN_REQUIRED,
            message=(
                "copilot: the CLI has no GitHub login (log in with `copilot login`, set"
                " COPILOT_GITHUB_TOKEN, GH_TOKEN or GITHUB_TOKEN in its env, or pass byok="
                f" for your own model endpoint): {message}"
            ),
        )
    return AgentHostError(code=ErrorCode.PROVIDER_ERROR, message=message)


def byok(options: Mapping[str, Any]) -> dict[str, Any]:
    """The SDK's `provider` option from `byok=`: checked, the key read from its variable.

    Raises:
        AgentHostError: INVALID_ARGUMENT naming the key at fault (never a value).
    """

    def invalid(problem: str) -> AgentHostError:
        return AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message=f"copilot: byok {problem}")

    unknown = sorted(set(options) - BYOK_KEYS)
    if unknown:
        raise invalid(
            f"has an unknown key {unknown[0]!r} (it accepts: {', '.join(sorted(BYOK_KEYS))})"
        )
    if options.get("type") not in BYOK_TYPES:
        raise invalid(f"'type' must be one of {', '.join(BYOK_TYPES)}")
    base_url = options.get("base_url")
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise invalid("'base_url' must be an http:// or https:// URL")
    if "api_key" in options and "api_key_env" in options:
        raise invalid("takes 'api_key' or 'api_key_env', not both")
    config = {k: v for k, v in options.items() if k != "api_key_env"}
    variable = options.get("api_key_env")
    if variable is not None:
        if not isinstance(variable, str) or not variable:
            raise invalid("'api_key_env' must be the name of an environment variable")
        key = os.environ.get(variable, "")
        if not key:
            raise invalid(
                f"'api_key_env' names the environment variable {variable}, which is not set"
            )
        config["api_key"] = key
    return config
