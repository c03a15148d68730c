"""Client ids: bound to one identity, removed from their sessions after a
grace once their last connection closed, and nothing kept for sessions that
left memory."""

import asyncio
from typing import Any

from agenthost.actors import Host
from agenthost.server.clients import Clients


def test_a_client_id_is_refused_to_another_identity_and_kept_in_the_store(host: Host) -> None:
    async def main() -> None:
        clients = Clients(host.aio, 30.0, remove=_never, spawn=_never_spawn)
        assert await clients.claim("c1", "alice")
        assert await clients.claim("c1", "alice")
        assert not await clients.claim("c1", "bob")
        binding = await host.aio.find_client("c1")
        assert binding is not None and binding.identity == "alice"

    asyncio.run(main())


def test_a_client_that_left_is_removed_from_its_sessions_after_the_grace(host: Host) -> None:
    async def main() -> None:
        removed: asyncio.Queue[tuple[str, str]] = asyncio.Queue()

        async def remove(session_id: str, client_id: str) -> None:
            await removed.put((session_id, client_id))

        clients = Clients(host.aio, 0.0, remove=remove, spawn=lambda work: _spawn(work))
        clients.attach("c1")
        clients.touched("c1", "s1")
        clients.detach("c1")
        assert await asyncio.wait_for(removed.get(), 10) == ("s1", "c1")
        assert clients.sizes().graces == 0 and clients.sizes().acted_in == 0

    asyncio.run(main())


def test_a_client_back_within_the_grace_keeps_its_calls(host: Host) -> None:
    async def main() -> None:
        clients = Clients(host.aio, 30.0, remove=_never, spawn=_never_spawn)
        clients.attach("c1")
        clients.touched("c1", "s1")
        clients.detach("c1")
        assert clients.sizes().graces == 1
        clients.attach("c1")
        assert clients.sizes().graces == 0

    asyncio.run(main())


def test_a_session_that_left_memory_leaves_the_clients_table(host: Host) -> None:
    async def main() -> None:
        clients = Clients(host.aio, 30.0, remove=_never, spawn=_never_spawn)
        clients.attach("c1")
        clients.touched("c1", "s1")
        clients.detach("c1")
        clients.departed("s1")
        sizes = clients.sizes()
        assert (sizes.graces, sizes.acted_in, sizes.sessions, sizes.connected) == (0, 0, 0, 0)

    asyncio.run(main())


_tasks: set[asyncio.Task[Any]] = set()


def _spawn(work: Any) -> None:
    task = asyncio.get_running_loop().create_task(work)
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


async def _never(session_id: str, client_id: str) -> None:
    raise AssertionError("no client is removed here")


def _never_spawn(work: Any) -> None:
    work.close()
    raise AssertionError("nothing runs in the background here")
