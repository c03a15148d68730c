"""The server's copy of a chat (its channel's state) shares its text with the
host's: the strings are the host's own objects, not equal copies."""

import asyncio
import gc
import tracemalloc
from pathlib import Path

from agenthost.actors.aio import AsyncHost
from agenthost.messages.events import ChatEvent, TurnCompleted
from agenthost.providers.scripted import ScriptedProvider
from agenthost.server.channels import ChatChannel, Sequencer
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock

TURNS = 8
TEXT = 200_000  # characters a message; its echo comes back in 10 deltas


def test_a_channel_holds_the_host_s_strings_and_no_copy_of_them(db_path: Path) -> None:
    async def main() -> tuple[float, bool]:
        provider = ScriptedProvider(echo_deltas=10)
        host = await AsyncHost.start(
            store=SqliteStore(db_path), providers={"scripted": provider}, clock=FakeClock()
        )
        try:
            chat = await (await host.create_session()).chat()
            ended = 0
            all_ended = asyncio.Event()

            def count(event: ChatEvent) -> None:
                nonlocal ended
                ended += isinstance(event, TurnCompleted)
                if ended == TURNS:
                    all_ended.set()

            # A replay buffer of a few actions: what is measured is the state.
            channel = ChatChannel("ahp-chat:/c", "s", Sequencer(4), lambda: 0, count)
            await channel.open(await chat.subscribe(maxsize=1_000_000, keep_state=True))
            gc.collect()
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                for i in range(TURNS):
                    await (await chat.send(f"{i} " + "x" * TEXT))
                await asyncio.wait_for(all_ended.wait(), 10)
                gc.collect()
                held = tracemalloc.get_traced_memory()[0] - before
            finally:
                tracemalloc.stop()
            mine = channel.state
            theirs = await chat.state()
            assert mine is not None and len(mine.turns) == TURNS
            shared = all(
                a.message.text is b.message.text
                and a.assistant_text == b.assistant_text
                and a.response_parts[0].content is b.response_parts[0].content  # type: ignore[attr-defined]
                for a, b in zip(mine.turns, theirs.turns, strict=True)
            )
            await channel.close()
            return held / (TURNS * TEXT), shared
        finally:
            await host.stop()

    per_text, shared = asyncio.run(main())
    assert shared
    # Each turn holds its message and its reply (the host's), once: about 2
    # texts a turn; a copy of the reply in the channel would make it 3.
    assert per_text < 2.4, f"{per_text:.2f} texts held a turn"
