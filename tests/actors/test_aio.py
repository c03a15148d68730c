"""The asyncio mirror of the surface: awaitable calls that never block the loop."""

import asyncio
from pathlib import Path

from agenthost.actors.aio import AsyncChat, AsyncHost, AsyncSession
from agenthost.actors.surface import TurnHandle
from agenthost.messages import OutcomeState, TurnOutcome
from agenthost.messages.events import TurnCompleted
from agenthost.providers.scripted import Gate, Say, ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock


def test_the_async_surface_mirrors_the_sync_one_without_blocking_the_loop(
    db_path: Path, clock: FakeClock
) -> None:
    provider = ScriptedProvider().on("slow", Say("a"), Gate("g"), Say("b"))

    async def main() -> None:
        host = await AsyncHost.start(
            store=SqliteStore(db_path), providers={"scripted": provider}, clock=clock
        )
        try:
            session = await host.create_session()
            assert isinstance(session, AsyncSession)
            chat = await session.chat()
            assert isinstance(chat, AsyncChat) and chat.id == chat.sync.id
            events = await chat.subscribe()
            handle = await chat.send("slow")
            await asyncio.to_thread(provider.wait_reached, "g", 10)
            loop = asyncio.get_running_loop()
            waiting = loop.create_task(_outcome(handle))
            responsive = asyncio.Event()
            loop.call_soon(responsive.set)
            # Were awaiting the turn to block the loop, this callback could not run
            # before the gate opens, and the gate opens only after it ran.
            await asyncio.wait_for(responsive.wait(), 10)
            assert not waiting.done()
            provider.open("g")
            outcome = await asyncio.wait_for(waiting, 10)
            assert (outcome.state, outcome.text) == (OutcomeState.COMPLETE, "ab")
            async for event in events:
                if isinstance(event, TurnCompleted):
                    break
            assert [s.id for s in await host.list_sessions()] == [session.id]
            assert [c.id for c in await session.chats()] == [chat.id]
        finally:
            await host.stop()

    asyncio.run(main())


async def _outcome(handle: TurnHandle) -> TurnOutcome:
    return await handle
