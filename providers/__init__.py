"""Provider adapters: the base contract and one module per provider.

Belongs here: asyncio adapters that speak the provider protocol
(messages/provider.py) through an `emit` callback. Invariants:
1. Nothing here imports agenthost.actors.
2. Adapters run only on their provider kind's event-loop thread.
3. Capabilities are declared, never inferred by the host.
4. A vendor SDK is an optional extra: its adapter module is imported only when
   its provider is used (`CodexProvider` needs `agenthost[codex]`).
"""

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
from agenthost.providers.scripted import ScriptedProvider

if TYPE_CHECKING:
    from agenthost.providers.codex import CodexProvider

__all__ = [
    "CodexProvider",
    "Provider",
    "ProviderAdapter",
    "ProviderCallError",
    "ProviderCrashed",
    "ProviderLoop",
    "ProviderResumeError",
    "RetryPolicy",
    "ScriptedProvider",
]


def __getattr__(name: str) -> Any:
    """The vendor providers, imported on first use (their SDKs are optional extras)."""
    if name == "CodexProvider":
        from agenthost.providers.codex import CodexProvider

        return CodexProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
