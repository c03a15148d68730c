"""The vendors' real CLIs driven through the host, offline (see conftest.py).

Each scenario runs against Claude Code, codex and the Copilot CLI, each in the
loopback-only namespace, answered by the project's fake model APIs; where the
CLIs differ, the vendor says what to expect (Copilot withdraws steering it
was given; Claude and codex cannot).
"""

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agenthost.actors import Chat, Host, Subscription
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.messages.events import AssistantDelta, RequestOpened
from agenthost.messages.state import RequestKind, TurnState
from agenthost.providers.base import Provider
from tests.integration.conftest import Vendor
from tests.integration.fake_apis import Hold, Text
from tests.integration.netns import LoopbackNamespace

WAIT_S = 60.0
StartHost = Callable[[Provider, str], Host]


def open_chat(vendor: Vendor, start_host: StartHost, **options: Any) -> tuple[Host, Chat]:
    host = start_host(vendor.provider(**options), vendor.name)
    return host, host.create_session(provider=vendor.name).chat()


def next_of(sub: Subscription, kind: type, timeout: float = WAIT_S) -> Any:
    while not isinstance(event := sub.next(timeout), kind):
        pass
    return event


def carried(vendor: Vendor, text: str) -> list[int]:
    """The model requests (by index) that carried `text` anywhere (a CLI may hand
    the model steering inside a tool's result: Claude Code does)."""
    return [i for i, body in enumerate(vendor.api.requests) if text in json.dumps(body)]


def settled(chat: Chat) -> None:
    """Wait until no turn runs and nothing is pending (steering runs on after a turn)."""
    sub = chat.subscribe()
    try:
        while (state := chat.state()).active_turn is not None or state.pending:
            sub.next(WAIT_S)
    finally:
        sub.close()


def test_one_turn(vendor: Vendor, start_host: StartHost) -> None:
    _, chat = open_chat(vendor, start_host)
    outcome = chat.send("hello there").result(timeout=WAIT_S)
    assert (outcome.state, outcome.text) == (OutcomeState.COMPLETE, "echo: hello there")


def test_two_turns_the_second_request_carries_the_first(
    vendor: Vendor, start_host: StartHost
) -> None:
    _, chat = open_chat(vendor, start_host)
    assert chat.send("remember pineapple").result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    second = chat.send("and now?").result(timeout=WAIT_S)
    assert (second.state, second.text) == (OutcomeState.COMPLETE, "echo: and now?")
    last = vendor.api.requests[-1]
    assert vendor.api.user_texts()[-1][-2:] == ["remember pineapple", "and now?"]
    assert "echo: remember pineapple" in "".join(vendor.api.assistant_texts(last))


def test_steer_then_remove(vendor: Vendor, start_host: StartHost) -> None:
    """Copilot takes back steering the model has not read; Claude and codex
    cannot, and say so, and the model then reads it."""
    vendor.api.on("slow turn", Text("working"), Hold("slow"), Text(" on"))
    _, chat = open_chat(vendor, start_host)
    sub = chat.subscribe()
    turn = chat.send("slow turn")
    next_of(sub, AssistantDelta)
    pending = chat.steer("steer me")
    removed: bool | AgentHostError
    try:
        removed = chat.remove_pending(pending.id, timeout=WAIT_S)
    except AgentHostError as refused:
        removed = refused
    vendor.api.open("slow")
    assert turn.result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    settled(chat)
    if vendor.withdraws:
        assert removed is True
        assert carried(vendor, "steer me") == []
    else:
        assert isinstance(removed, AgentHostError)
        assert removed.code is ErrorCode.INVALID_ARGUMENT
        assert carried(vendor, "steer me") != []  # the model read it


def test_steer_during_a_tool_reaches_the_model_after_the_tool(
    vendor: Vendor, start_host: StartHost
) -> None:
    path = vendor.workdir / "steered.txt"
    vendor.api.on("use the tool", vendor.write_file(path, "steered"), after="tool finished")
    _, chat = open_chat(vendor, start_host)
    sub = chat.subscribe()
    turn = chat.send("use the tool")
    request = next_of(sub, RequestOpened).request
    assert request.kind is RequestKind.PERMISSION
    chat.steer("mind the steer")
    chat.answer(request.request_id, approved=True)
    assert turn.result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    settled(chat)
    results = [i for i, body in enumerate(vendor.api.requests) if vendor.api.has_tool_result(body)]
    assert results, "the tool's result went back to the model"
    steered = carried(vendor, "mind the steer")
    assert steered, "the steering reached the model"
    assert min(steered) >= min(results), "with or after the tool's result, not before"
    assert path.read_text() == "steered"
    assert all(t.state is TurnState.COMPLETE for t in chat.state().turns)


def test_cancel_then_the_next_turn_runs(vendor: Vendor, start_host: StartHost) -> None:
    vendor.api.on("slow turn", Text("working"), Hold("cancel"), Text(" never"))
    _, chat = open_chat(vendor, start_host)
    sub = chat.subscribe()
    turn = chat.send("slow turn")
    next_of(sub, AssistantDelta)
    assert chat.cancel() is True
    assert turn.result(timeout=WAIT_S).state is OutcomeState.CANCELLED
    vendor.api.open("cancel")
    after = chat.send("after the cancel").result(timeout=WAIT_S)
    assert (after.state, after.text) == (OutcomeState.COMPLETE, "echo: after the cancel")


def test_a_restarted_host_resumes_and_the_cli_still_has_the_history(
    vendor: Vendor, start_host: StartHost
) -> None:
    host, chat = open_chat(vendor, start_host)
    session_id = chat.session.id
    assert chat.send("remember mango").result(timeout=WAIT_S).state is OutcomeState.COMPLETE
    host.stop(timeout=30)
    again = start_host(vendor.provider(), vendor.name)  # a new provider: no memory of the first
    chat = again.open_session(session_id, timeout=WAIT_S).chat()
    outcome = chat.send("what did I say?").result(timeout=WAIT_S)
    assert (outcome.state, outcome.text) == (OutcomeState.COMPLETE, "echo: what did I say?")
    assert vendor.api.user_texts()[-1][-2:] == ["remember mango", "what did I say?"]


def test_a_tool_permission_approved_makes_the_file(vendor: Vendor, start_host: StartHost) -> None:
    path = vendor.workdir / "made.txt"
    vendor.api.on("make the file", vendor.write_file(path, "made"), after="made it")
    _, chat = open_chat(vendor, start_host)
    sub = chat.subscribe()
    turn = chat.send("make the file")
    request = next_of(sub, RequestOpened).request
    assert request.kind is RequestKind.PERMISSION
    assert not path.exists(), "nothing is written before the user approves"
    chat.answer(request.request_id, approved=True)
    outcome = turn.result(timeout=WAIT_S)
    assert (outcome.state, outcome.text) == (OutcomeState.COMPLETE, "made it")
    assert path.read_text() == "made"


def test_a_cli_killed_mid_turn_ends_the_turn_and_the_next_send_works(
    vendor: Vendor, start_host: StartHost
) -> None:
    vendor.api.on("slow turn", Text("working"), Hold("kill"), Text(" never"))
    _, chat = open_chat(vendor, start_host)
    sub = chat.subscribe()
    turn = chat.send("slow turn")
    next_of(sub, AssistantDelta)
    [cli] = vendor.cli_processes()
    os.kill(cli.pid, signal.SIGKILL)
    outcome = turn.result(timeout=WAIT_S)
    assert outcome.state is OutcomeState.ERROR
    assert outcome.error is not None and outcome.error.code is ErrorCode.EXECUTION_ABANDONED
    vendor.api.open("kill")
    after = chat.send("after the kill").result(timeout=WAIT_S)
    assert (after.state, after.text) == (OutcomeState.COMPLETE, "echo: after the kill")
    assert cli.pid not in [p.pid for p in vendor.cli_processes()]


@pytest.mark.parametrize("vendor", ["copilot"], indirect=True)
def test_copilot_without_a_login_says_so(vendor: Vendor, start_host: StartHost) -> None:
    _, chat = open_chat(vendor, start_host, byok=None)
    outcome = chat.send("hello").result(timeout=WAIT_S)
    assert outcome.state is OutcomeState.ERROR
    assert outcome.error is not None
    assert outcome.error.code is ErrorCode.PROVIDER_LOGIN_REQUIRED
    assert "No GitHub OAuth token or Copilot HMAC key provided" in outcome.error.message
    assert vendor.api.requests == []


def test_nothing_but_loopback_is_reachable_from_where_the_clis_run(
    netns: LoopbackNamespace, tmp_path: Path
) -> None:
    """The wrapper every CLI runs through, running a probe instead of a CLI: an
    address outside loopback is unreachable there; loopback is the one interface."""
    probe = tmp_path / "probe"
    probe.write_text(
        "#!/bin/sh\n"
        "cat /proc/net/dev\n"
        'exec python3 -c "import socket\n'
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 443), timeout=5)\n"
        "    print('connected')\n"
        "except OSError as exc:\n"
        '    print(exc)"\n'
    )
    probe.chmod(0o755)
    wrapper = netns.wrap(probe, tmp_path / "probe-in-netns")
    ran = subprocess.run([str(wrapper)], capture_output=True, text=True, timeout=WAIT_S)
    assert ran.returncode == 0, ran.stderr
    assert "Network is unreachable" in ran.stdout
    interfaces = [line.split(":")[0].strip() for line in ran.stdout.splitlines() if ":" in line]
    assert interfaces == ["lo"]
