"""Provider adapters: the base contract and one module per provider.

Belongs here: asyncio adapters that speak the provider protocol
(messages/provider.py) through an `emit` callback. Invariants:
1. Nothing here imports agenthost.actors.
2. Adapters run only on their provider kind's event-loop thread.
3. Capabilities are declared, never inferred by the host.
4. Optional backends (openai, and the agent SDKs) are imported only when used:
   importing this package needs none of their extras.
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
from agenthost.providers.manifest import load_manifest
from agenthost.providers.openai_compat import OpenAICompatProvider
from agenthost.providers.scripted import ScriptedProvider

__all__ = [
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
