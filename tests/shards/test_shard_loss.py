"""A shard lost and started again (in this process: its server stops, a new Host
on a new store object takes its name, the old one lingers like a zombie)."""

import asyncio
import threading
from collections.abc import Callable

import pytest

from agenthost.actors.context import Departure
from agenthost.messages import AgentHostError, ErrorCode
from agenthost.messages.events import ChatSnapshot, Lagged
from agenthost.messages.state import TurnState
from agenthost.providers import ScriptedProvider
from agenthost.providers.scripted import Gate, Say
from agenthost.shards import ShardedHost
from agenthost.shards.front import Address
from agenthost.shards.router import rendezvous
from tests.fakes.stores import StoreFactory
from tests.shards.conftest import LocalShards

Start = Callable[..., ShardedHost]


def session_on(host: ShardedHost, shard: str, shards: list[str]) -> str:
    """A new session id that hashes to `shard`."""
    n = 0
    while rendezvous(f"s{n}", shards) != shard:
        n += 1
    return host.create_session(session_id=f"s{n}").id


def turn_rows(pg: StoreFactory) -> list[tuple[str, str | None, str | None]]:
    return [
        (r[0], r[1], r[2])
        for r in pg.query("SELECT user_text, state, error_code FROM turns ORDER BY started_at, seq")
    ]


def test_a_turn_running_on_a_lost_shard_ends_once_as_execution_abandoned(
    local_shards: LocalShards, pg: StoreFactory
) -> None:
    held = ScriptedProvider().on("work", Say("part"), Gate("done"), Say("rest"))
    local_shards.start("a", held)
    host = local_shards.front("a")
    try:
        chat = host.open_session(session_on(host, "a", ["a"])).chat()
        running = chat.send("work")
        held.wait_reached("done")
        zombie = local_shards.crash("a")
        local_shards.start("a")  # as Ray would: a new epoch
        outcome = running.result(timeout=10)
        assert outcome.state.value == "error"
        assert outcome.error is not None and outcome.error.code is ErrorCode.EXECUTION_ABANDONED
        held.open("done")  # the zombie finishes its turn: its end is fenced
        zombie.host.counters()  # (a round trip on its host)
        assert chat.send("again").result(timeout=10).text == "echo: again"
        assert turn_rows(pg) == [
            ("work", "error", "execution_abandoned"),
            ("again", "complete", None),
        ]
    finally:
        host.stop()


def test_a_stale_shards_late_writes_are_fenced_and_it_drops_the_session(
    local_shards: LocalShards, pg: StoreFactory
) -> None:
    held = ScriptedProvider().on("work", Gate("done"), Say("late"))
    local_shards.start("a", held)
    host = local_shards.front("a")
    try:
        chat = host.open_session(session_on(host, "a", ["a"])).chat()
        chat.send("work")
        held.wait_reached("done")
        zombie = local_shards.crash("a")
        on_zombie = zombie.host.open_session(chat.session.id).chat().subscribe()
        local_shards.start("a")
        assert chat.state().turns[-1].state is TurnState.ERROR  # the new "a" took it over
        held.open("done")
        for _ in on_zombie:  # ends when the zombie drops the session
            pass
        assert zombie.host.counters()["leases_lost"] == 1
        with pytest.raises(AgentHostError) as caught:  # and it cannot take it back
            zombie.host.open_session(chat.session.id)
        assert caught.value.code is ErrorCode.LEASE_HELD
        assert turn_rows(pg) == [("work", "error", "execution_abandoned")]
    finally:
        host.stop()


def test_a_subscription_fed_by_a_lost_shard_gets_lagged_and_a_new_one_starts_from_a_snapshot(
    local_shards: LocalShards,
) -> None:
    held = ScriptedProvider().on("work", Gate("done"))
    local_shards.start("a", held)
    host = local_shards.front("a")
    try:
        chat = host.open_session(session_on(host, "a", ["a"])).chat()
        events = chat.subscribe()
        assert isinstance(events.next(timeout=10), ChatSnapshot)
        chat.send("work")
        held.wait_reached("done")
        local_shards.crash("a")
        local_shards.start("a")
        while not isinstance(event := events.next(timeout=10), Lagged):
            pass
        assert event.dropped == 0 and events.closed
        again = chat.subscribe().next(timeout=10)
        assert isinstance(again, ChatSnapshot)
        assert again.state.turns[-1].error is not None
        assert again.state.turns[-1].error.code is ErrorCode.EXECUTION_ABANDONED
    finally:
        host.stop()


def test_a_call_made_while_its_shard_is_away_waits_for_it(local_shards: LocalShards) -> None:
    local_shards.start("a")
    back = asyncio.Event()
    loops: list[asyncio.AbstractEventLoop] = []

    async def where() -> Address:
        loops.append(asyncio.get_running_loop())
        await back.wait()
        return local_shards.shards["a"].address

    back.set()
    host = ShardedHost.connect({"a": where}, local_shards.secret)
    try:
        chat = host.create_session().chat()
        back.clear()
        local_shards.crash("a")
        local_shards.start("a")
        loops[-1].call_soon_threadsafe(back.set)  # the link waits for it in `where`
        assert chat.send("hi").result(timeout=10).text == "echo: hi"  # not SHARD_LOST
    finally:
        host.stop()


def test_a_session_another_shard_holds_is_followed_there(
    sharded: Start, local_shards: LocalShards
) -> None:
    only_b = sharded("b")
    session_id = session_on(only_b, "a", ["a", "b"])  # hashes to "a", but made on "b"
    only_b.open_session(session_id).chat().send("hi").result(timeout=10)
    both = sharded("a", "b")
    assert both.open_session(session_id).chat().state().turns[0].assistant_text == "echo: hi"
    assert local_shards.shards["a"].host.counters()["resident"] == 0


def test_the_sessions_of_a_lost_shard_leave_the_fronts_tables(
    local_shards: LocalShards,
) -> None:
    """A shard that dies tells nobody: the front's link says its sessions left
    (failed), as the shard would have, so an AHP server's tables and quotas
    let go of them."""
    local_shards.start("a")
    host = local_shards.front("a")
    left: list[tuple[str, Departure]] = []
    heard = threading.Event()

    def departed(session_id: str, why: Departure) -> None:  # on the front's loop thread
        left.append((session_id, why))
        heard.set()

    unwatch = host.on_session_left(departed)
    try:
        session = host.create_session(session_id="lost-one")
        assert session.chat().send("hi").result(timeout=10).text == "echo: hi"
        local_shards.crash("a")
        assert heard.wait(10)
        assert left == [("lost-one", Departure.FAILED)]
    finally:
        unwatch()
        host.stop()
