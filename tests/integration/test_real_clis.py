"""The vendors' real CLIs driven through the host, offline (see conftest.py).

Each scenario runs against Claude Code, codex and the Copilot CLI, each in the
loopback-only namespace, answered by the project's fake model APIs; where the
CLIs differ, the vendor says what to expect (Copilot withdraws steering it
was given; Claude and codex cannot).
"""

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agenthost.actors import Chat, Host, Subscription
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.messages.common import ConfirmationOptionKind
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


def cancel_then_send(vendor: Vendor, start_host: StartHost, *, open_gate: bool) -> None:
    """Cancel a turn mid-stream, then the next turn runs to its end (`open_gate`:
    the cancelled stream is let go before the next send)."""
    vendor.api.on("slow turn", Text("working"), Hold("cancel"), Text(" never"))
    _, chat = open_chat(vendor, start_host)
    sub = chat.subscribe()
    turn = chat.send("slow turn")
    next_of(sub, AssistantDelta)
    assert chat.cancel() is True
    assert turn.result(timeout=WAIT_S).state is OutcomeState.CANCELLED
    if open_gate:
        vendor.api.open("cancel")
    after = chat.send("after the cancel").result(timeout=WAIT_S)
    assert (after.state, after.text) == (OutcomeState.COMPLETE, "echo: after the cancel")


def test_cancel_then_the_next_turn_runs(vendor: Vendor, start_host: StartHost) -> None:
    cancel_then_send(vendor, start_host, open_gate=True)


@pytest.mark.parametrize("vendor", ["copilot"], indirect=True)
def test_a_message_sent_while_copilot_unwinds_an_abort_waits_for_it(
    vendor: Vendor, start_host: StartHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI drops what it is sent while an abort unwinds (queued behind the
    aborted run). Here the abort goes out only once the next turn's send reached
    the adapter: that turn's message waits for the abort's idle and runs."""
    from copilot.session import CopilotSession

    from agenthost.providers.copilot import CopilotAdapter

    abort, send = CopilotSession.abort, CopilotAdapter.send
    sending = threading.Event()

    async def next_send(self: CopilotAdapter, message: Any) -> Any:
        if message.text == "after the cancel":
            sending.set()
        return await send(self, message)

    async def late_abort(self: CopilotSession) -> Any:
        await asyncio.to_thread(sending.wait, WAIT_S)  # the interleaving: the send goes first
        return await abort(self)

    monkeypatch.setattr(CopilotAdapter, "send", next_send)
    monkeypatch.setattr(CopilotSession, "abort", late_abort)
    cancel_then_send(vendor, start_host, open_gate=False)


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
    # The CLI's own decisions are the options; the first that approves is "once".
    [once, *_] = [o for o in request.options if o.kind == ConfirmationOptionKind.APPROVE]
    assert any(o.kind == ConfirmationOptionKind.DENY for o in request.options)
    chat.answer(request.request_id, option=once.id)
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


@pytest.mark.parametrize("vendor", ["claude"], indirect=True)
def test_a_real_cli_cannot_reach_an_address_outside_loopback(
    vendor: Vendor, start_host: StartHost
) -> None:
    """Claude Code pointed at a model API outside loopback (TEST-NET-1, which no
    network routes) tries to reach it and fails, in its own words. (Copilot
    through byok says as much, "Network is unreachable (os error 101)", after
    five retries over 23 s; Claude Code's retries are an environment variable.)"""
    env = {
        **vendor.env,
        "ANTHROPIC_BASE_URL": "http://192.0.2.1:80",
        "CLAUDE_CODE_MAX_RETRIES": "0",
    }
    _, chat = open_chat(vendor, start_host, env=env)
    outcome = chat.send("hello").result(timeout=WAIT_S)
    assert outcome.state is OutcomeState.ERROR
    assert outcome.error is not None and "ENETUNREACH" in outcome.error.message
    assert vendor.api.requests == []


def test_a_process_outside_the_namespace_is_found_and_one_inside_is_not(
    netns: LoopbackNamespace, tmp_path: Path
) -> None:
    """The check every vendor test ends with (conftest.py), on a stand-in binary
    (this Python, never a real CLI): started outside the namespace it is
    reported, started through the wrapper it is not."""
    python = Path(sys.executable).resolve()
    probe = Vendor(
        name="probe",
        api=None,  # type: ignore[arg-type]
        binary=python,
        make=lambda **_: None,  # type: ignore[arg-type,return-value]
        write_file=lambda path, text: None,  # type: ignore[arg-type,return-value]
        withdraws=False,
        workdir=tmp_path,
        env={},
        namespace=netns.path,
    )
    wrapper = netns.wrap(python, tmp_path / "python-in-netns")
    program = "import sys; print('ready', flush=True); sys.stdin.read()"
    started = [
        subprocess.Popen([str(path), "-c", program], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for path in (wrapper, python)
    ]
    try:
        for process in started:
            assert process.stdout is not None and process.stdout.readline() == b"ready\n"
        inside, outside = started
        assert {inside.pid, outside.pid} <= {p.pid for p in probe.cli_tree()}
        found = probe.outside_the_namespace()
        assert [entry.split()[0] for entry in found] == [str(outside.pid)]
    finally:
        for process in started:
            assert process.stdin is not None
            process.stdin.close()
            process.wait(WAIT_S)
