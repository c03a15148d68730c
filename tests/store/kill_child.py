"""A host under load that prints what it acknowledged; the durability test kills it.

Usage: python kill_child.py STORE CHATS (STORE as --store takes it). Prints `create` before each
create_session call, `session <id>` once created, `ack <session> <turn> <text>`
once a turn's outcome was delivered (so committed), forever.
"""

import asyncio
import itertools
import logging
import sys

import structlog

from agenthost.actors import Host
from agenthost.providers import ScriptedProvider
from agenthost.store import store_from_spec


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def chat_loop(host: Host, index: int) -> None:
    say("create")
    session = await host.aio.create_session()
    say(f"session {session.id}")
    chat = await session.chat()
    for turn in itertools.count():
        text = f"c{index}t{turn}"
        handle = await chat.send(text, timeout=60)
        outcome = await handle.outcome(timeout=60)
        say(f"ack {session.id} {outcome.turn_id} {text} {outcome.state.value}")


async def main(store: str, chats: int) -> None:
    host = Host.start(
        store=store_from_spec(store),
        providers={"scripted": ScriptedProvider(echo_deltas=4, delta_s=0.001)},
    )
    await asyncio.gather(*(chat_loop(host, i) for i in range(chats)))


if __name__ == "__main__":
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
