"""The ownership registry: a session for its owner only, read from the store,
and nothing kept once the session left memory."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agenthost.actors import Host
from agenthost.actors.aio import AsyncHost
from agenthost.server.errors import RpcError
from agenthost.server.registry import Registry
from agenthost.store.base import OWNER_KEY


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(body())


def owned(host: Host, identity: str) -> tuple[str, str]:
    session = host.create_session()
    session.set_config({OWNER_KEY: identity})
    return session.id, session.chat().id


def test_a_session_is_found_for_its_owner_and_for_nobody_else(host: Host) -> None:
    session_id, chat_id = owned(host, "alice")

    async def body() -> None:
        registry = Registry(host.aio)
        assert (await registry.session(session_id, "alice")).id == session_id
        with pytest.raises(RpcError) as hidden:
            await registry.session(session_id, "bob")
        assert hidden.value.code == -32001
        with pytest.raises(RpcError) as chat_hidden:
            await registry.chat(chat_id, "bob")
        assert chat_hidden.value.code == -32008
        _, chat = await registry.chat(chat_id, "alice")
        assert chat.id == chat_id

    run(body)


def test_a_departed_session_leaves_nothing_behind_and_is_found_again(host: Host) -> None:
    session_id, chat_id = owned(host, "alice")

    async def body() -> None:
        registry = Registry(host.aio)
        await registry.chat(chat_id, "alice")
        assert registry.sizes().owners == 1 and registry.sizes().chats == 1
        assert registry.departed(session_id) == (chat_id,)
        sizes = registry.sizes()
        assert (sizes.owners, sizes.handles, sizes.chats, sizes.sessions_with_chats) == (0, 0, 0, 0)
        assert (await registry.chat(chat_id, "alice"))[1].id == chat_id  # from the store again

    run(body)


def test_a_lookup_overlapping_a_dispose_of_its_session_reads_again(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id, _ = owned(host, "alice")
    real = AsyncHost.find_session
    reads: list[str | None] = []

    async def body() -> None:
        registry = Registry(host.aio)

        async def racing(*args: Any, **kwargs: Any) -> Any:
            found = await real(*args, **kwargs)
            reads.append(None if found is None else found.id)
            if len(reads) == 1:  # the session goes while this read returns
                await host.aio.open_session(session_id)
                await (await host.aio.open_session(session_id)).dispose()
                registry.disposed(session_id)
            return found

        monkeypatch.setattr(AsyncHost, "find_session", racing)
        with pytest.raises(RpcError):
            await registry.session(session_id, "alice")
        assert reads == [session_id, None]
        assert registry.sizes().lookups == 0 and registry.owner(session_id) is None

    run(body)
