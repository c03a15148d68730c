"""completions against a live server: the slash commands the contributions
declare (the built-in /rename and /help, and one a test contribution adds),
matched on the word the caret is in, with its range in UTF-16 units."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenthost.actors import Host
from agenthost.actors.contributions import Command, Contribution
from agenthost.providers.scripted import ScriptedProvider
from agenthost.server.completions import _index, complete
from agenthost.store.sqlite import SqliteStore
from agenthost.testing import FakeClock
from tests.server.ahp_client import OTHER_TOKEN, RpcFailed, Server, action_of
from tests.server.test_ahp import new_session, run

DEPLOY = Command(name="/deploy", usage="<env>", description="ships it")


class Deploys(Contribution):
    id = "deploys"
    order = 900
    commands = (DEPLOY,)


@pytest.fixture
def deploying_host(db_path: Path) -> Iterator[Host]:
    host = Host.start(
        store=SqliteStore(db_path),
        providers={"scripted": ScriptedProvider()},
        clock=FakeClock(),
        contributions=[Deploys],
    )
    yield host
    host.stop()


def inserted(result: dict[str, Any]) -> list[str]:
    return [item["insertText"] for item in result["items"]]


def test_a_slash_lists_every_declared_command_and_a_prefix_narrows_it(
    deploying_host: Host,
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client, server.client(OTHER_TOKEN) as bob:
            hello = await client.initialize()
            assert hello["completionTriggerCharacters"] == ["/"]
            _, chat = await new_session(client)
            ask = {"channel": chat, "kind": "userMessage"}
            every = await client.call("completions", {**ask, "text": "/", "offset": 1})
            assert inserted(every) == ["/rename ", "/help", "/deploy "]
            some = await client.call("completions", {**ask, "text": "/re x", "offset": 3})
            [rename] = some["items"]
            assert (rename["rangeStart"], rename["rangeEnd"]) == (0, 3)
            assert rename["attachment"]["displayKind"] == "command"
            none = await client.call("completions", {**ask, "text": "hi /re", "offset": 6})
            assert none == {"items": []}
            other = await client.call("completions", {**ask, "kind": "x", "text": "/", "offset": 1})
            assert other == {"items": []}
            await bob.initialize(client_id="c2")
            with pytest.raises(RpcFailed) as refused:
                await bob.call("completions", {**ask, "text": "/", "offset": 1})
            assert refused.value.code == -32008

    run(deploying_host, body)


def test_a_session_that_turned_a_contribution_off_is_not_offered_its_commands(
    deploying_host: Host,
) -> None:
    async def body(server: Server) -> None:
        async with server.client() as client:
            await client.initialize()
            session, chat = await new_session(client)
            toggle = {"type": "session/customizationToggled", "id": "local_command"}
            await client.dispatch(session, {**toggle, "enabled": False})
            await client.wait_for(action_of("session/customizationToggled"))
            ask = {"channel": chat, "kind": "userMessage", "text": "/", "offset": 1}
            assert inserted(await client.call("completions", ask)) == ["/deploy "]
            _, elsewhere = await new_session(client)
            offered = await client.call("completions", {**ask, "channel": elsewhere})
            assert inserted(offered) == ["/rename ", "/help", "/deploy "]

    run(deploying_host, body)


def test_the_word_must_open_the_message_and_hold_the_caret() -> None:
    commands = (DEPLOY,)
    [item] = complete(commands, "  /de", 5)
    assert (item.range_start, item.range_end, item.insert_text) == (2, 5, "/deploy ")
    assert complete(commands, "/de", 0) == ()  # the caret before the slash
    assert complete(commands, "😀 /de", 6) == ()  # not the message's first word


def test_offsets_are_utf16_code_units() -> None:
    assert _index("😀x", 2) == 1 and _index("😀x", 3) == 2 and _index("ab", 9) == 2
