"""A session's customizations: its contributions, turned off and on per session."""

import asyncio
import sqlite3
from pathlib import Path
from typing import ClassVar

import pytest

from agenthost.actors.contributions import Contribution, Dispatcher, TurnEnd, build_dispatcher
from agenthost.actors.contributions.builtin import BUILTINS
from agenthost.actors.contributions.customizations import (
    PLUGIN_ID,
    REQUIRED_META,
    customizations,
    disabled,
    toggled,
)
from agenthost.messages import AgentHostError, ErrorCode
from agenthost.messages.customizations import (
    Customization,
    CustomizationType,
    Enablement,
    EnablementKind,
)
from agenthost.messages.reducers import reduce_session
from agenthost.messages.session_events import CustomizationToggled
from agenthost.messages.state import SessionState
from agenthost.providers.scripted import ScriptedProvider
from tests.actors.contributions.conftest import Start, settled


class Counter(Contribution):
    """Counts turn ends by session (class-level: one instance per host)."""

    id = "test_counter"
    order = 900
    description = "Counts turns."
    ends: ClassVar[list[str]] = []

    def on_turn_end(self, end: TurnEnd) -> None:
        Counter.ends.append(end.chat.session_id)


class Guard(Contribution):
    id = "test_guard"
    required = "it keeps the quota"


@pytest.fixture
def counter() -> type[Counter]:
    Counter.ends = []
    return Counter


def hooks(session: object) -> dict[str, Customization]:
    [plugin] = session.state().customizations  # type: ignore[attr-defined]
    assert isinstance(plugin, Customization) and plugin.children is not None
    return {c.id: c for c in plugin.children if isinstance(c, Customization)}


def test_a_session_lists_each_contribution_as_a_hook_of_the_hosts_plugin(start: Start) -> None:
    host = start(ScriptedProvider(), contributions=[Counter, Guard])
    [plugin] = host.create_session().state().customizations or ()
    assert isinstance(plugin, Customization)
    assert (plugin.type, plugin.id, plugin.enabled) == (CustomizationType.PLUGIN, PLUGIN_ID, True)
    children = [c for c in plugin.children or () if isinstance(c, Customization)]
    assert [c.id for c in children][:3] == ["local_command", "turn_admission", "queue_drain"]
    assert {c.type for c in children} == {CustomizationType.HOOK}
    assert all(c.enabled is True and c.enablement is None for c in children)
    by_id = {c.id: c for c in children}
    assert by_id["test_counter"].description == "Counts turns."
    guard = by_id["test_guard"].meta
    assert guard is not None and guard.value == {REQUIRED_META: "it keeps the quota"}
    assert by_id["mark_unread"].meta is None


def test_a_disabled_contribution_stops_running_for_its_session_only(
    start: Start, counter: type[Counter]
) -> None:
    host = start(ScriptedProvider(), contributions=[counter])
    off, on = host.create_session(), host.create_session()
    applied = off.toggle_customization("test_counter", False)
    assert applied.enablement == (Enablement(kind=EnablementKind.SESSION, enabled=False),)
    assert hooks(off)["test_counter"].enabled is False
    assert hooks(on)["test_counter"].enabled is True
    for session in (off, on):
        session.chat().send("hi").result(timeout=10)
    assert counter.ends == [on.id]
    off.toggle_customization("test_counter", True)
    off.chat().send("again").result(timeout=10)
    assert counter.ends == [on.id, off.id]
    assert hooks(off)["test_counter"].enablement is None


def test_a_disabled_mark_unread_leaves_its_session_read_and_another_is_marked(
    start: Start,
) -> None:
    host = start(ScriptedProvider())
    quiet, loud = host.create_session(), host.create_session()
    quiet.toggle_customization("mark_unread", False)
    for session in (quiet, loud):
        chat = session.chat()
        chat.send("hi").result(timeout=10)
        settled(chat)
    assert not quiet.summary().unread
    assert loud.summary().unread


def test_a_chat_created_after_the_toggle_runs_without_the_contribution(
    start: Start, counter: type[Counter]
) -> None:
    session = start(ScriptedProvider(), contributions=[counter]).create_session()
    session.toggle_customization("test_counter", False)
    session.create_chat().send("hi").result(timeout=10)
    assert counter.ends == []


@pytest.mark.parametrize(
    ("action", "code", "reason"),
    [
        (CustomizationToggled(id="nope", enabled=False), ErrorCode.NOT_FOUND, "no customization"),
        (
            CustomizationToggled(id="turn_admission", enabled=False),
            ErrorCode.INVALID_ARGUMENT,
            "cannot be turned off: it enforces archived sessions",
        ),
        (
            CustomizationToggled(id="test_guard", enabled=False),
            ErrorCode.INVALID_ARGUMENT,
            "cannot be turned off: it keeps the quota",
        ),
        (CustomizationToggled(id=PLUGIN_ID, enabled=False), ErrorCode.INVALID_ARGUMENT, "one by"),
        (
            CustomizationToggled(
                id="mark_unread",
                enablement=(Enablement(kind=EnablementKind.GLOBAL, enabled=False),),
            ),
            ErrorCode.INVALID_ARGUMENT,
            "one decision per session",
        ),
        (CustomizationToggled(id="mark_unread"), ErrorCode.INVALID_ARGUMENT, "says enabled"),
    ],
)
def test_a_toggle_the_host_cannot_apply_is_refused_saying_why_and_changes_nothing(
    start: Start, action: CustomizationToggled, code: ErrorCode, reason: str
) -> None:
    session = start(ScriptedProvider(), contributions=[Guard]).create_session()
    before = session.state().customizations
    with pytest.raises(AgentHostError, match=reason) as raised:
        asyncio.run(session.aio.apply_customization_toggle(action))
    assert raised.value.code is code
    assert session.state().customizations == before


def test_a_toggle_survives_a_restart_and_turning_it_on_again_clears_the_row(
    start: Start, db_path: Path, counter: type[Counter]
) -> None:
    host = start(ScriptedProvider(), contributions=[counter])
    session = host.create_session()
    session.toggle_customization("test_counter", False)
    session_id = session.id
    host.stop()
    host = start(ScriptedProvider(), contributions=[counter])
    restored = host.open_session(session_id)
    assert hooks(restored)["test_counter"].enabled is False
    restored.chat().send("hi").result(timeout=10)
    assert counter.ends == []
    restored.toggle_customization("test_counter", True)
    host.stop()
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT customizations FROM sessions").fetchall() == [(None,)]


def test_a_decision_for_a_contribution_no_longer_registered_is_forgotten(
    start: Start, counter: type[Counter]
) -> None:
    host = start(ScriptedProvider(), contributions=[counter])
    session = host.create_session()
    session.toggle_customization("test_counter", False)
    session.toggle_customization("mark_unread", False)
    session_id = session.id
    host.stop()
    restored = start(ScriptedProvider()).open_session(session_id)
    assert "test_counter" not in hooks(restored)
    assert hooks(restored)["mark_unread"].enabled is False


def test_a_session_that_turned_nothing_off_runs_the_hosts_own_dispatcher() -> None:
    """The hot path costs nothing more: no filtering per hook call, and one
    dispatcher per set of ids turned off, built once."""
    root = Dispatcher([Counter(), Guard()])
    assert root.without(frozenset()) is root
    fewer = root.without(frozenset({"test_counter"}))
    assert fewer is root.without(frozenset({"test_counter"}))
    assert fewer.ids() == ["test_guard"]


def test_the_hosts_toggle_reduces_to_the_list_the_host_builds_from_the_decision() -> None:
    """What a subscriber reduces (the host's action) is what a restored session
    lists (its decisions taken back by id), and turning it on again is the
    list as it was: for every contribution that can be turned off."""
    services = {name: lambda _id: None for name in ("mementos", "sessions", "chats")}
    root = build_dispatcher(BUILTINS, services)  # (never called here: no services needed)
    listed = customizations(root)
    optional = [c.id for c in root.contributions if not c.required]
    assert optional == ["local_command", "session_instructions", "mark_unread", "chat_draft"]
    for ident in optional:
        state = SessionState(customizations=listed)
        off = toggled(listed, CustomizationToggled(id=ident, enabled=False))
        reduced = reduce_session(state, off)
        assert reduced.customizations == customizations(root, reduced.customizations)
        assert disabled(reduced.customizations) == {ident}
        on = toggled(reduced.customizations, CustomizationToggled(id=ident, enablement=()))
        assert reduce_session(reduced, on) == state


def test_sessions_that_turned_the_same_contributions_off_share_one_list(start: Start) -> None:
    host = start(ScriptedProvider())
    first, second, third = (host.create_session() for _ in range(3))
    assert first.state().customizations is second.state().customizations
    third.toggle_customization("mark_unread", False)
    assert third.state().customizations != first.state().customizations
