"""Provider adapters: the base contract and one module per provider.

Belongs here: asyncio adapters that speak the provider protocol
(messages/provider.py) through an `emit` callback: `scripted` (built in),
`copilot`, `claude`, `codex` and `openai_compat` (each an optional extra).
Invariants:
1. Nothing here imports agenthost.actors.
2. Adapters run only on their provider kind's event-loop thread.
3. Capabilities are declared, never inferred by the host.
4. A vendor SDK is an optional extra: its provider module is imported only
   when the provider is used (`CopilotProvider` needs
   `pip install agenthost[copilot]`, and so on), so importing this package
   needs none of them.
"""

import importlib
from typing import TYPE_CHECKING, Any

from agenthost.providers.base import (
    Provider,
    ProviderAdapter,
    ProviderCallError,
    ProviderCrashed,
    ProviderLoop,
    ProviderResumeError,
    RetryPolicy,
)
from agenthost.providers.manifest import load_manifest
from agenthost.providers.scripted import ScriptedProvider

if TYPE_CHECKING:
    from agenthost.providers.claude import ClaudeProvider
    from agenthost.providers.codex import CodexProvider
    from agenthost.providers.copilot import CopilotProvider
    from agenthost.providers.openai_compat import OpenAICompatProvider

_LAZY = {
    "ClaudeProvider": "agenthost.providers.claude",
    "CodexProvider": "agenthost.providers.codex",
    "CopilotProvider": "agenthost.providers.copilot",
    "OpenAICompatProvider": "agenthost.providers.openai_compat",
}

__all__ = [
    "ClaudeProvider",
    "CodexProvider",
    "CopilotProvider",
    "OpenAICompatProvider",
    "Provider",
    "ProviderAdapter",
    "ProviderCallError",
    "ProviderCrashed",
    "ProviderLoop",
    "ProviderResumeError",
    "RetryPolicy",
    "ScriptedProvider",
    "load_manifest",
]


def __getattr__(name: str) -> Any:
    """The vendor providers, imported on first use (their SDKs are optional extras)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
