"""providers/loops.py: which event loop agenthost runs its own loops on."""

import asyncio
import sys

import pytest
import uvloop

from agenthost.providers import loops
from agenthost.providers.base import ProviderLoop


async def _loop_type() -> type:
    return type(asyncio.get_running_loop())


def test_agenthosts_own_loops_are_uvloops_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(loops.LOOP_ENV, raising=False)
    assert loops.kind() == "uvloop"
    assert loops.run(_loop_type()) is uvloop.Loop
    provider_loop = ProviderLoop("kind")
    try:
        assert isinstance(provider_loop.loop, uvloop.Loop)
    finally:
        provider_loop.stop()


def test_the_environment_can_choose_asyncios_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(loops.LOOP_ENV, "asyncio")
    assert loops.kind() == "asyncio"
    assert not issubclass(loops.run(_loop_type()), uvloop.Loop)
    provider_loop = ProviderLoop("kind")
    try:
        assert not isinstance(provider_loop.loop, uvloop.Loop)
    finally:
        provider_loop.stop()


def test_a_loop_kind_that_does_not_exist_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(loops.LOOP_ENV, "trio")
    with pytest.raises(ValueError, match="AGENTHOST_LOOP='trio': choose uvloop or asyncio"):
        loops.new_loop()


def test_without_uvloop_asyncios_loop_is_used_unless_uvloop_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as on Windows: the import fails
    monkeypatch.delenv(loops.LOOP_ENV, raising=False)
    assert loops.kind() == "asyncio"
    monkeypatch.setenv(loops.LOOP_ENV, "uvloop")
    with pytest.raises(ValueError, match="AGENTHOST_LOOP=uvloop: uvloop is not installed"):
        loops.new_loop()
