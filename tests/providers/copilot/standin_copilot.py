#!/usr/bin/env python3
"""A stand-in for the GitHub Copilot CLI: it speaks the CLI's wire protocol on stdio.

JSON-RPC 2.0 with `Content-Length` framing both ways, as the real CLI does
(../shared/reference/provider-protocols.md): `connect`, `session.create`,
`session.resume`, `session.send` (returns a message id at once; the run
follows as `session.event` notifications), `session.abort`,
`session.queue.withdrawMessage`, the permission and tool answers, `ping`,
`session.detach`, `runtime.shutdown`. It prints nothing but frames.

Scripted per test by a JSON file named in COPILOT_STANDIN_SCRIPT:
    record   path of a JSONL file: every request received, {"method", "params"}
    replies  {prompt: [step, ...]}; an unscripted prompt is answered "echo: <prompt>"
    resume   {"code": int, "message": str}: every session.resume fails with it
    outlive_stdin  true: run on after stdin closes (only a signal ends it)
    exit_at_start  true: exit before answering anything
    refuse_sends   text: answer each session.send, then run nothing: a session.error
                   with that text and idle, never echoing the message (as the real
                   CLI does without a GitHub login)
    drop_sends     true: answer each session.send, then go idle without running it
    abort_lag      seconds: session.abort is answered at once and the run unwinds
                   that long after (as the real CLI's does), queueing what comes
                   meanwhile; an abort drops what was queued behind the run
It records its own pid, parent, session, group and terminal first, as method "$process".
Steps: {"say": text} a delta; {"think": text} the model's reasoning, streamed as
assistant.reasoning_delta, then whole as assistant.reasoning (with "streamed":
false only the whole, as a CLI that does not stream it); {"until": signal,
"count": n} wait until `signal` ("steer", "withdraw", "abort") was seen n times
in all; {"tool": name, "permission": bool, "session_approval": bool} a tool
call (asking permission first, a shell request that can take a session
approval where "session_approval"), then steering sent in immediate mode is
injected; {"client_tool": name, "arguments": {...}} an external tool call that
waits for its result; {"ask": question, "choices": [...], "freeform": bool} a
userInput.request to the SDK that waits for the answer; {"error": text} a
session.error; {"crash": true} exit at once; {"hang": true} never answer
anything again.
"""

import datetime
import itertools
import json
import os
import select
import signal
import sys
import time
import uuid
from collections.abc import Generator
from typing import Any

SCRIPT: dict[str, Any] = {}
if os.environ.get("COPILOT_STANDIN_SCRIPT"):
    with open(os.environ["COPILOT_STANDIN_SCRIPT"]) as script_file:
        SCRIPT = json.load(script_file)

Wait = tuple[str, str, int]
Run = Generator[Wait, Any, None]
_turns = itertools.count(1)
_requests = itertools.count(1)


class Frames:
    """The SDK's frames off stdin, with a timeout (a lagging abort unwinds on it)."""

    TIMED_OUT: dict[str, Any] = {}

    def __init__(self) -> None:
        self.fd = sys.stdin.fileno()
        self.buffer = bytearray()

    def next(self, timeout: float | None) -> dict[str, Any] | None:
        """The next frame; None at the end of stdin, TIMED_OUT past `timeout`."""
        while (frame := self.parse()) is None:
            if timeout is not None and not select.select([self.fd], [], [], timeout)[0]:
                return self.TIMED_OUT
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        return frame

    def parse(self) -> dict[str, Any] | None:
        head_end = self.buffer.find(b"\r\n\r\n")
        if head_end < 0:
            return None
        length = int(self.buffer[:head_end].decode().split(":", 1)[1])
        start = head_end + 4
        if len(self.buffer) < start + length:
            return None
        body = bytes(self.buffer[start : start + length])
        del self.buffer[: start + length]
        return json.loads(body)


def write(message: dict[str, Any]) -> None:
    body = json.dumps(message).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()


def record(method: str, params: dict[str, Any]) -> None:
    if SCRIPT.get("record"):
        with open(SCRIPT["record"], "a") as out:
            out.write(json.dumps({"method": method, "params": params}) + "\n")


class Session:
    def __init__(self, session_id: str) -> None:
        self.id = session_id
        self.queue: list[tuple[str, str, str]] = []  # (message id, prompt, mode)
        self.run: Run | None = None
        self.waiting: Wait | None = None
        self.seen: dict[str, int] = {}
        self.unwound_at: float | None = None  # an abort answered, still unwinding

    def event(self, kind: str, data: dict[str, Any], ephemeral: bool = False) -> None:
        event = {
            "id": str(uuid.uuid4()),
            "timestamp": datetime.datetime.now(datetime.UTC).isoformat(),
            "type": kind,
            "data": data,
            "parentId": None,
        }
        if ephemeral:
            event["ephemeral"] = True
        write(
            {
                "jsonrpc": "2.0",
                "method": "session.event",
                "params": {"sessionId": self.id, "event": event},
            }
        )

    # -- runs ----------------------------------------------------------------------------
    def start(self, message_id: str, prompt: str) -> None:
        self.run = self.runs(message_id, prompt)
        self.advance(None)

    def advance(self, value: Any) -> None:
        """Drive the run until it waits for something that has not happened yet."""
        while self.run is not None:
            wait = self.waiting
            if wait is not None and wait[0] == "signal" and self.seen.get(wait[1], 0) >= wait[2]:
                value = None
            elif wait is not None and value is None:
                return
            try:
                self.waiting = self.run.send(value) if wait is not None else next(self.run)
            except StopIteration:
                self.run, self.waiting = None, None
                return
            value = None

    def runs(self, message_id: str, prompt: str) -> Run:
        delivery = "idle"
        while True:
            yield from self.turn(message_id, prompt, delivery)
            if not self.queue:
                break
            message_id, prompt, _ = self.queue.pop(0)
            delivery = "queued"
        self.event("session.idle", {}, ephemeral=True)

    def turn(self, message_id: str, prompt: str, delivery: str) -> Run:
        self.event(
            "user.message", {"content": prompt, "messageId": message_id, "delivery": delivery}
        )
        turn = str(next(_turns))
        self.event("assistant.turn_start", {"turnId": turn})
        reply_id, said = str(uuid.uuid4()), []
        steps = SCRIPT.get("replies", {}).get(prompt) or [{"say": "echo: "}, {"say": prompt}]
        for step in steps:
            if "say" in step:
                said.append(step["say"])
                delta = {"deltaContent": step["say"], "messageId": reply_id}
                self.event("assistant.message_delta", delta, ephemeral=True)
            elif "think" in step:
                reasoning_id = str(uuid.uuid4())
                if step.get("streamed", True):
                    delta = {"deltaContent": step["think"], "reasoningId": reasoning_id}
                    self.event("assistant.reasoning_delta", delta, ephemeral=True)
                whole = {"content": step["think"], "reasoningId": reasoning_id}
                self.event("assistant.reasoning", whole)
            elif "until" in step:
                yield ("signal", step["until"], step.get("count", 1))
            elif "tool" in step:
                call_id = str(uuid.uuid4())
                request = {"toolCallId": call_id, "name": step["tool"], "arguments": {}}
                message = {
                    "content": "".join(said),
                    "messageId": reply_id,
                    "toolRequests": [request],
                }
                self.event("assistant.message", message)
                reply_id, said = str(uuid.uuid4()), []
                approved = True
                if step.get("permission"):
                    approved = yield from self.ask_permission(
                        call_id, step["tool"], step.get("session_approval", False)
                    )
                if approved:
                    self.event(
                        "tool.execution_start", {"toolCallId": call_id, "toolName": step["tool"]}
                    )
                result = {"content": "done" if approved else "denied"}
                complete = {"toolCallId": call_id, "success": approved, "result": result}
                self.event("tool.execution_complete", complete)
                self.inject_steering()
            elif "client_tool" in step:
                yield from self.client_tool(step["client_tool"], step.get("arguments", {}))
            elif "ask" in step:
                request_id = next(_requests)
                question = {
                    "sessionId": self.id,
                    "question": step["ask"],
                    "allowFreeform": step.get("freeform", True),
                }
                if "choices" in step:
                    question["choices"] = step["choices"]
                write(
                    {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "method": "userInput.request",
                        "params": question,
                    }
                )
                answer = yield ("response", str(request_id), 0)
                said.append(f"you said {answer.get('answer')}")
            elif "error" in step:
                self.event("session.error", {"errorType": "model", "message": step["error"]})
            elif step.get("crash"):
                os._exit(3)
            elif step.get("hang"):
                global hung
                hung = True
                yield ("never", "", 0)
        message = {"content": "".join(said), "messageId": reply_id, "toolRequests": []}
        self.event("assistant.message", message)
        self.event("assistant.turn_end", {"turnId": turn})

    def ask_permission(
        self, call_id: str, tool: str, session_approval: bool = False
    ) -> Generator[Wait, Any, bool]:
        request_id = str(uuid.uuid4())
        permission = {
            "kind": "shell",
            "canOfferSessionApproval": session_approval,
            "commands": [{"identifier": tool, "readOnly": False}],
            "fullCommandText": tool,
            "hasWriteFileRedirection": False,
            "intention": f"run {tool}",
            "possiblePaths": [],
            "possibleUrls": [],
            "toolCallId": call_id,
        }
        self.event(
            "permission.requested", {"requestId": request_id, "permissionRequest": permission}
        )
        decision = yield ("permission", request_id, 0)
        return bool(decision["result"]["kind"].startswith("approve"))

    def client_tool(self, tool: str, arguments: dict[str, Any]) -> Run:
        call_id, request_id = str(uuid.uuid4()), str(uuid.uuid4())
        self.event(
            "tool.execution_start",
            {"toolCallId": call_id, "toolName": tool, "arguments": arguments},
        )
        requested = {
            "requestId": request_id,
            "sessionId": self.id,
            "toolCallId": call_id,
            "toolName": tool,
            "arguments": arguments,
        }
        self.event("external_tool.requested", requested)
        answer = yield ("tool", request_id, 0)
        self.event("external_tool.completed", {"requestId": request_id})
        text = (answer.get("result") or {}).get("textResultForLlm") or answer.get("error") or ""
        complete = {
            "toolCallId": call_id,
            "success": "error" not in answer,
            "result": {"content": text},
        }
        self.event("tool.execution_complete", complete)

    def inject_steering(self) -> None:
        """At a tool boundary the model reads steering sent in immediate mode."""
        for item in [item for item in self.queue if item[2] == "immediate"]:
            self.queue.remove(item)
            content = {"content": item[1], "messageId": item[0], "delivery": "steering"}
            self.event("user.message", content)

    def abort(self) -> None:
        """As the real CLI: what was queued behind the aborted run goes with it."""
        self.unwound_at = None
        self.seen["abort"] = self.seen.get("abort", 0) + 1
        if self.run is None:
            return
        self.run.close()
        self.run, self.waiting = None, None
        self.event("abort", {"reason": "user_initiated"})
        if self.queue:
            self.queue.clear()
            self.event("pending_messages.modified", {}, ephemeral=True)
        self.event("session.idle", {"aborted": True}, ephemeral=True)


sessions: dict[str, Session] = {}
hung = False


def handle(message: dict[str, Any]) -> Any:
    """Answer one request; returns its result (an exception becomes an error reply)."""
    method, params = message.get("method", ""), message.get("params") or {}
    session = sessions.get(params.get("sessionId", ""))
    if method == "connect":
        return {"ok": True, "protocolVersion": 3, "version": "0.0.0-standin"}
    if method == "ping":
        return {"message": "pong", "timestamp": 0, "protocolVersion": 3}
    if method == "session.create":
        sessions[params["sessionId"]] = Session(params["sessionId"])
        return {"sessionId": params["sessionId"]}
    if method == "session.resume":
        failure = SCRIPT.get("resume")
        if failure:
            raise RpcError(failure["code"], failure["message"])
        sessions[params["sessionId"]] = Session(params["sessionId"])
        return {"sessionId": params["sessionId"]}
    if method == "runtime.shutdown":
        return None
    if session is None:
        raise RpcError(-32603, f"Session not found: {params.get('sessionId')}")
    if method == "session.send":
        message_id = str(uuid.uuid4())
        mode = params.get("mode", "enqueue")
        if SCRIPT.get("refuse_sends") or SCRIPT.get("drop_sends"):
            reply(message["id"], {"messageId": message_id})
            session.event("pending_messages.modified", {}, ephemeral=True)
            if SCRIPT.get("refuse_sends"):
                error = {"errorType": "query", "message": SCRIPT["refuse_sends"]}
                session.event("session.error", error)
            session.event("assistant.idle", {}, ephemeral=True)
            session.event("session.idle", {"mode": "interactive"}, ephemeral=True)
            return NO_REPLY
        if mode == "immediate":
            session.seen["steer"] = session.seen.get("steer", 0) + 1
        if session.run is None:
            reply(message["id"], {"messageId": message_id})
            session.start(message_id, params["prompt"])
            return NO_REPLY
        session.queue.append((message_id, params["prompt"], mode))
        reply(message["id"], {"messageId": message_id})
        session.advance(None)
        return NO_REPLY
    if method == "session.queue.withdrawMessage":
        session.seen["withdraw"] = session.seen.get("withdraw", 0) + 1
        queued = [
            i for i in session.queue if i[:2] == (params["messageId"], params["expectedPrompt"])
        ]
        for item in queued:
            session.queue.remove(item)
        reply(message["id"], {"interrupted": False, "removed": bool(queued)})
        session.advance(None)
        return NO_REPLY
    if method == "session.abort":
        reply(message["id"], {"success": True})
        if SCRIPT.get("abort_lag") and session.run is not None:
            session.unwound_at = time.monotonic() + SCRIPT["abort_lag"]
        else:
            session.abort()
        return NO_REPLY
    if method == "session.permissions.handlePendingPermissionRequest":
        return answer_wait(message, session, "permission", params)
    if method == "session.tools.handlePendingToolCall":
        return answer_wait(message, session, "tool", params)
    if method == "session.detach":
        return {"success": True}
    raise RpcError(-32601, f"Unhandled method {method}")


def answer_wait(
    message: dict[str, Any], session: Session, kind: str, params: dict[str, Any]
) -> Any:
    wait = session.waiting
    if wait is None or wait[:2] != (kind, params["requestId"]):
        return {"success": False}
    reply(message["id"], {"success": True})
    session.advance(params)
    return NO_REPLY


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


NO_REPLY = object()


def reply(request_id: Any, result: Any) -> None:
    write({"jsonrpc": "2.0", "id": request_id, "result": result})


def report_process() -> None:
    """Record who we are: pid, session, process group, whether we have a terminal."""
    try:
        os.close(os.open("/dev/tty", os.O_RDONLY))
        tty = True
    except OSError:
        tty = False
    process = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "sid": os.getsid(0),
        "pgid": os.getpgid(0),
        "tty": tty,
    }
    record("$process", process)


def main() -> None:
    report_process()
    if SCRIPT.get("exit_at_start"):
        sys.exit("standin: told to exit at start")
    frames = Frames()
    while True:
        due = [s.unwound_at for s in sessions.values() if s.unwound_at is not None]
        message = frames.next(max(min(due) - time.monotonic(), 0.0) if due else None)
        for session in sessions.values():
            if session.unwound_at is not None and session.unwound_at <= time.monotonic():
                session.abort()
        if message is None:
            break
        if message is Frames.TIMED_OUT:
            continue
        if hung:
            continue  # a hung CLI reads on and answers nothing
        if "method" not in message:  # the SDK's answer to our request
            answered = message.get("result") or {"error": message.get("error")}
            record("response", answered)
            for session in sessions.values():
                if session.waiting == ("response", str(message["id"]), 0):
                    session.advance(answered)
            continue
        record(message["method"], message.get("params") or {})
        if "id" not in message:
            continue  # a notification
        try:
            result = handle(message)
        except RpcError as exc:
            error = {"code": exc.code, "message": exc.message}
            write({"jsonrpc": "2.0", "id": message["id"], "error": error})
            continue
        if result is not NO_REPLY:
            reply(message["id"], result)
    if SCRIPT.get("outlive_stdin"):  # deaf to its host going away: only a signal ends it
        signal.pause()


if __name__ == "__main__":
    main()
