"""The asyncio mirror of the surface: awaitable calls that never block the loop."""

import asyncio
import threading
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


def _parameters(fn: object) -> list[tuple[str, object, object]]:
    import inspect

    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]  # type: ignore[arg-type]


def test_every_sync_call_has_an_async_twin_with_the_same_parameters() -> None:
    from agenthost.actors.surface import Chat, Host, Session

    for sync, twin in ((Host, AsyncHost), (Session, AsyncSession), (Chat, AsyncChat)):
        calls = {n for n in vars(sync) if not n.startswith("_") and callable(vars(sync)[n])}
        calls -= {"aio", "core"}  # the way across, and the host's own parts
        assert calls, sync
        for name in sorted(calls):
            assert hasattr(twin, name), f"{twin.__name__} has no {name}"
            assert _parameters(getattr(sync, name)) == _parameters(getattr(twin, name)), name


def test_no_async_call_but_stop_runs_on_an_executor_thread(db_path: Path, clock: FakeClock) -> None:
    provider = ScriptedProvider().on("slow", Say("a"), Gate("g"), Say("b"))

    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("an async call used the loop's executor")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.run_in_executor = refuse  # type: ignore[method-assign]
        host = await AsyncHost.start(
            store=SqliteStore(db_path), providers={"scripted": provider}, clock=clock
        )
        try:
            session = await host.create_session(instructions="Be brief.")
            chat = await session.chat()
            events = await chat.subscribe()
            handle = await chat.send("slow")
            await _reached(provider, "g")
            steering = await chat.steer("more")
            removal = chat.remove_pending_nowait(steering.id)
            assert isinstance(await removal, bool)
            await chat.set_draft("draft")
            await session.rename("Renamed")
            assert (await session.summary()).title == "Renamed"
            provider.open("g")
            outcome = await handle
            assert outcome.state is OutcomeState.COMPLETE
            assert (await chat.state()).active_turn is None
            assert [s.id for s in await host.list_sessions()] == [session.id]
            async for event in events:
                if isinstance(event, TurnCompleted):
                    break
        finally:
            del loop.run_in_executor  # stopping joins threads: the one call that may
            await host.stop()

    asyncio.run(main())


async def _reached(provider: ScriptedProvider, gate: str) -> None:
    """Wait for the provider to reach `gate`, on a thread of the test's own (not
    the loop's executor, which the test forbids)."""
    loop = asyncio.get_running_loop()
    reached: asyncio.Future[None] = loop.create_future()

    def wait() -> None:
        provider.wait_reached(gate, 10)
        loop.call_soon_threadsafe(reached.set_result, None)

    threading.Thread(target=wait, daemon=True).start()
    await asyncio.wait_for(reached, 10)
