"""Provider adapters: the base contract and one module per provider.

Belongs here: asyncio adapters that speak the provider protocol
(messages/provider.py) through an `emit` callback: `scripted` (built in) and
`claude` (the `claude` extra; importable without it, ClaudeProvider() then
says what to install). Invariants:
1. Nothing here imports agenthost.actors.
2. Adapters run only on their provider kind's event-loop thread.
3. Capabilities are declared, never inferred by the host.
"""

from agenthost.providers.base import (
    Provider,
    ProviderAdapter,
    ProviderCallError,
    ProviderCrashed,
    ProviderLoop,
    ProviderResumeError,
    RetryPolicy,
)
from agenthost.providers.claude import ClaudeProvider
from agenthost.providers.scripted import ScriptedProvider

__all__ = [
    "ClaudeProvider",
    "Provider",
    "ProviderAdapter",
    "ProviderCallError",
    "ProviderCrashed",
    "ProviderLoop",
    "ProviderResumeError",
    "RetryPolicy",
    "ScriptedProvider",
]
