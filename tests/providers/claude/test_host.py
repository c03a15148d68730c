"""Claude end to end: the public host surface, the real SDK, the stand-in CLI."""

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("claude_agent_sdk")

from agenthost.actors import Host
from agenthost.messages import ErrorCode, OutcomeState, RequestKind, TurnState
from agenthost.messages.events import AssistantDelta, RequestOpened
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.fakes.events import drain_events
from tests.providers.claude.standin import WAIT_S, StandIn
from tests.providers.processes import guarded, wait_gone


@pytest.fixture
def standin(tmp_path: Path) -> StandIn:
    return StandIn(tmp_path / "cli")


@pytest.fixture
def start(db_path: Path, clock: FakeClock, standin: StandIn) -> Iterator[Callable[[], Host]]:
    hosts: list[Host] = []

    def started() -> Host:
        host = Host.start(
            store=SqliteStore(db_path), providers={"claude": standin.provider()}, clock=clock
        )
        hosts.append(host)
        return host

    yield started
    for host in hosts:
        host.stop()


def test_a_turn_completes_and_its_reply_is_stored(start: Callable[[], Host]) -> None:
    host = start()
    session = host.create_session(provider="claude")
    chat = session.chat()
    outcome = chat.send("hi").result(timeout=WAIT_S)
    assert outcome.state is OutcomeState.COMPLETE
    assert outcome.text == "echo: hi"
    host.stop()

    restarted = start()
    [turn] = restarted.open_session(session.id).chat(chat.id).state().turns
    assert (turn.user_text, turn.assistant_text, turn.state) == (
        "hi",
        "echo: hi",
        TurnState.COMPLETE,
    )


def test_steering_is_folded_into_the_running_turn(
    start: Callable[[], Host], standin: StandIn
) -> None:
    standin.script({"first": [{"say": ["a"]}, {"block": True}, {"tool": "Bash"}, {"say": ["b"]}]})
    chat = start().create_session(provider="claude").chat()
    sub = chat.subscribe()
    first = chat.send("first")
    while not isinstance(sub.next(WAIT_S), AssistantDelta):
        pass
    steering = chat.steer("steer me")
    assert first.result(timeout=WAIT_S).text == "ab"
    drain_events(chat.subscribe(), turns=1)
    [turn] = chat.state().turns
    assert [(m.id, m.text) for m in turn.steering] == [(steering.id, "steer me")]
    assert chat.state().pending == ()
    assert standin.received() == ["first", "steer me"]


def test_steering_with_no_tool_boundary_left_becomes_the_next_turn(
    start: Callable[[], Host], standin: StandIn
) -> None:
    standin.script({"first": [{"say": ["a"]}, {"block": True}, {"say": ["b"]}]})
    chat = start().create_session(provider="claude").chat()
    sub = chat.subscribe()
    first = chat.send("first")
    while not isinstance(sub.next(WAIT_S), AssistantDelta):
        pass
    steering = chat.steer("then this")
    assert first.result(timeout=WAIT_S).text == "ab"
    drain_events(chat.subscribe(), turns=2)
    assert [(t.user_text, t.assistant_text, t.state) for t in chat.state().turns] == [
        ("first", "ab", TurnState.COMPLETE),
        ("then this", "echo: then this", TurnState.COMPLETE),
    ]
    assert chat.state().pending == ()
    assert steering.id not in [m.id for m in chat.state().turns[0].steering]


def test_a_permission_is_asked_of_the_user_and_answered(
    start: Callable[[], Host], standin: StandIn
) -> None:
    standin.script(
        {"go": [{"tool": "Bash", "input": {"command": "ls"}, "ask": True}, {"say": ["ok"]}]}
    )
    chat = start().create_session(provider="claude").chat()
    sub = chat.subscribe()
    turn = chat.send("go")
    event = sub.next(WAIT_S)
    while not isinstance(event, RequestOpened):
        event = sub.next(WAIT_S)
    assert (event.request.kind, event.request.tool_name) == (RequestKind.PERMISSION, "Bash")
    chat.answer(event.request.request_id, approved=True)
    assert turn.result(timeout=WAIT_S).text == "ok"
    [permission] = standin.log("permission")
    assert permission["answer"]["response"]["behavior"] == "allow"


def test_no_prompt_carries_an_earlier_user_message(
    start: Callable[[], Host], standin: StandIn
) -> None:
    standin.script({"fails": [{"error": "API Error: 500"}]})
    chat = start().create_session(provider="claude").chat()
    states = [chat.send(text).result(timeout=WAIT_S).state for text in ("one", "fails", "three")]
    assert states == [OutcomeState.COMPLETE, OutcomeState.ERROR, OutcomeState.COMPLETE]
    # The stored history ends in a user message after the failed turn; the next
    # prompt is still only its own text.
    assert standin.received() == ["one", "fails", "three"]
    assert chat.state().turns[1].error is not None
    assert chat.state().turns[1].error.message == "API Error: 500"


def test_a_crashed_cli_is_restarted_and_resumes_the_conversation(
    start: Callable[[], Host], standin: StandIn
) -> None:
    standin.script({"boom": [{"say": ["x"]}, {"crash": 3}]})
    chat = start().create_session(provider="claude").chat()
    crashed = chat.send("boom").result(timeout=WAIT_S)
    assert crashed.error is not None and crashed.error.code is ErrorCode.EXECUTION_ABANDONED
    after = chat.send("fine").result(timeout=WAIT_S)
    assert (after.state, after.text) == (OutcomeState.COMPLETE, "echo: fine")
    [started] = standin.log("started")
    [resumed] = standin.log("resumed")
    assert resumed["session"] == started["session"]
    assert standin.received() == ["boom", "fine"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux's")
def test_the_cli_has_no_terminal_and_dies_with_a_host_killed_by_sigkill(tmp_path: Path) -> None:
    host = subprocess.Popen(
        [sys.executable, "-m", "tests.providers.claude.killed_host", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[3],
    )
    cli_pid = None
    try:
        assert host.stdout is not None
        assert host.stdout.readline().strip() == "running"
        [started] = StandIn(tmp_path).log("started")
        cli_pid = started["pid"]
        assert guarded(started), "the CLI runs in the guard's own session"
        assert started["tty"] is False
        os.kill(host.pid, signal.SIGKILL)
        assert wait_gone(cli_pid), "the CLI outlived its host"
    finally:
        host.kill()
        host.wait(timeout=WAIT_S)
        if cli_pid is not None and not wait_gone(cli_pid):
            os.kill(cli_pid, signal.SIGKILL)


def test_a_cancelled_turn_is_interrupted_and_the_next_one_runs(
    start: Callable[[], Host], standin: StandIn
) -> None:
    standin.script({"long": [{"say": ["a"]}, {"block": "interrupt"}, {"say": ["never"]}]})
    chat = start().create_session(provider="claude").chat()
    sub = chat.subscribe()
    long = chat.send("long")
    while not isinstance(sub.next(WAIT_S), AssistantDelta):
        pass
    assert chat.cancel() is True
    assert long.result(timeout=WAIT_S).state is OutcomeState.CANCELLED
    after = chat.send("after").result(timeout=WAIT_S)
    assert (after.state, after.text) == (OutcomeState.COMPLETE, "echo: after")
    assert standin.received() == ["long", "after"]
