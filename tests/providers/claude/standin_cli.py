#!/usr/bin/env python3
"""A stand-in for the Claude Code CLI, for the tests: it speaks what the real
CLI speaks on stdio (newline-delimited stream-json with control requests), so
the real claude-agent-sdk drives it. Standard library only.

Arguments as the SDK passes them: --session-id=<id> starts a conversation,
--resume=<id> continues one (kept as a file in the state directory; unknown
ids fail as the real CLI does), --include-partial-messages streams deltas.

Environment:
    CLAUDE_STANDIN_SCRIPT  a JSON file: {"replies": {prompt: [step, ...]},
                           "resume_error": text, "hang_on_initialize": bool,
                           "exit_at_start": {"code": int, "stderr": text}}
                           ("exit_at_start": the text on stderr and exit with
                           the code before answering initialize, as the real
                           CLI does with a setting it cannot read)
    CLAUDE_STANDIN_LOG     a JSON-lines file; every user message received is
                           recorded ({"event": "prompt" | "steering", "text", "uuid"}),
                           and each start ({"event": "started" | "resumed", "session",
                           "pid", "ppid", "sid", "pgid", "tty",
                           "argv"})
    CLAUDE_STANDIN_STATE   the directory of conversations

Steps of a reply (an unscripted prompt is answered "echo: <prompt>"):
    {"say": [chunk, ...]}          one assistant message, streamed chunk by chunk
    {"think": [chunk, ...], "streamed": bool}
                                   the model's thinking: a message whose thinking block
                                   streams chunk by chunk as thinking deltas (with
                                   "streamed": false, only the whole message comes)
    {"tool": name, "input": {..}, "ask": true, "suggestions": [..], "streamed": [..]}
                                   a tool call (asking permission over can_use_tool
                                   first, with those permission suggestions; with
                                   "streamed", its tool_use block streams first, as
                                   input_json_delta pieces joining into the input); a tool
                                   boundary: user messages that arrived meanwhile
                                   are taken into the turn. AskUserQuestion, asked,
                                   is the CLI's question tool: its result is the
                                   answers the allow's updatedInput carries
    {"block": true}                park until a message arrives on stdin (a user
                                   message, or an interrupt), unless one already has
    {"block": "interrupt"}         park until an interrupt (user messages queue up)
    {"error": text}                the turn ends in an error result with this text
    {"retry": {"error_status": int, "error": text}}
                                   an `api_retry` system frame (the model API failed
                                   and the CLI tries again), as the real CLI sends
    {"api_error": text}            the model API gave up: a synthetic assistant message
                                   "API Error: <text>" and an error result (subtype
                                   success, is_error), as the real CLI ends such a turn
    {"crash": code}                exit at once with this code
    {"hang": true}                 stop answering anything, forever
"""

import collections
import json
import os
import queue
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

VERSION = "2.1.332"
MODEL = "claude-standin"


def out(frame: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()


def record(entry: dict[str, Any]) -> None:
    path = os.environ.get("CLAUDE_STANDIN_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")


def has_terminal() -> bool:
    try:
        os.close(os.open("/dev/tty", os.O_RDONLY))
    except OSError:
        return False
    return True


def hang() -> None:
    threading.Event().wait()


class Cli:
    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.options = dict(self._options(argv))
        self.partial = "--include-partial-messages" in argv
        script_path = os.environ.get("CLAUDE_STANDIN_SCRIPT")
        self.script = json.loads(Path(script_path).read_text()) if script_path else {}
        self.state = Path(os.environ.get("CLAUDE_STANDIN_STATE", "."))
        self.session = (
            self.options.get("resume") or self.options.get("session-id") or str(uuid.uuid4())
        )
        self.frames: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.pending: collections.deque[dict[str, Any]] = collections.deque()
        self.responses: dict[str, dict[str, Any]] = {}
        self.interrupted = False
        self.requests = 0
        self.retries = 0
        threading.Thread(target=self._read_stdin, daemon=True).start()

    @staticmethod
    def _options(argv: list[str]) -> list[tuple[str, str]]:
        found = []
        for arg in argv:
            if arg.startswith("--") and "=" in arg:
                name, value = arg[2:].split("=", 1)
                found.append((name, value))
        return found

    def _read_stdin(self) -> None:
        for line in sys.stdin:
            if line.strip():
                self.frames.put(json.loads(line))
        self.frames.put(None)

    # -- stdin --------------------------------------------------------------------------
    def take(self, block: bool) -> dict[str, Any] | None:
        """The next frame that is not a control request (those are answered here)."""
        while True:
            try:
                frame = self.frames.get(block=block)
            except queue.Empty:
                return None
            if frame is None:
                sys.exit(0)  # stdin closed: the SDK is done with us
            if frame.get("type") == "control_request":
                self.control(frame)
                if frame["request"]["subtype"] == "interrupt":
                    return frame
                continue
            if frame.get("type") == "control_response":
                self.responses[frame["response"]["request_id"]] = frame["response"]
                return frame
            return frame

    def control(self, frame: dict[str, Any]) -> None:
        subtype = frame["request"]["subtype"]
        response: dict[str, Any] = {}
        if subtype == "initialize":
            response = {"commands": [], "output_style": "default", "models": []}
        elif subtype == "interrupt":
            self.interrupted = True
        elif subtype == "mcp_status":
            response = {"mcpServers": []}
        out(
            {
                "type": "control_response",
                "response": {
                    "subtype": "success",
                    "request_id": frame["request_id"],
                    "response": response,
                },
            }
        )

    def park(self) -> None:
        """Wait for the next user message (queued) or interrupt."""
        frame = self.take(block=True)
        while frame is not None and frame.get("type") not in ("user", "control_request"):
            frame = self.take(block=True)
        if frame is not None and frame.get("type") == "user":
            self.pending.append(frame)

    def drain(self) -> None:
        """Read what already arrived, without waiting: user messages queue up."""
        while (frame := self.take(block=False)) is not None:
            if frame.get("type") == "user":
                self.pending.append(frame)

    # -- the session --------------------------------------------------------------------
    def open(self) -> None:
        first = self.frames.get()
        if first is None:
            sys.exit(0)
        resume = self.options.get("resume")
        conversation = self.state / f"{self.session}.json"
        if resume is not None:
            error = self.script.get("resume_error")
            if error is None and not conversation.exists():
                error = f"No conversation found with session ID: {resume}"
            if error is not None:
                sys.stderr.write(error + "\n")
                sys.stderr.flush()
                self.result([], subtype="error_during_execution", errors=[error], turns=0)
                sys.exit(1)
        if self.script.get("hang_on_initialize"):
            hang()
        exit_at_start = self.script.get("exit_at_start")
        if exit_at_start:
            sys.stderr.write(exit_at_start["stderr"] + "\n")
            sys.stderr.flush()
            os._exit(exit_at_start["code"])
        self.control(first)
        if resume is None:
            conversation.write_text("[]")
        record(
            {
                "event": "resumed" if resume else "started",
                "session": self.session,
                "pid": os.getpid(),
                "ppid": os.getppid(),
                "sid": os.getsid(0),
                "pgid": os.getpgid(0),
                "tty": has_terminal(),
                "argv": self.argv,
            }
        )

    def run(self) -> None:
        self.open()
        while True:
            if not self.pending:
                frame = self.take(block=True)
                if frame is not None and frame.get("type") == "user":
                    self.pending.append(frame)
                continue
            self.turn(self.pending.popleft())

    def turn(self, first: dict[str, Any]) -> None:
        """One turn, framed by the session-state frames the SDK asks for."""
        self.session_state("running")
        self.run_turn(first)
        self.session_state("idle")

    def session_state(self, state: str) -> None:
        if os.environ.get("CLAUDE_CODE_SDK_READS_SESSION_STATE") == "1":
            out(
                {
                    "type": "system",
                    "subtype": "session_state_changed",
                    "state": state,
                    "sdk_host_only": True,
                    "uuid": str(uuid.uuid4()),
                    "session_id": self.session,
                }
            )

    def run_turn(self, first: dict[str, Any]) -> None:
        self.interrupted = False
        taken = [first.get("uuid")]
        self.remember(first, "prompt")
        out(
            {
                "type": "system",
                "subtype": "init",
                "cwd": os.getcwd(),
                "session_id": self.session,
                "tools": ["Bash", "Read"],
                "mcp_servers": [],
                "model": MODEL,
                "permissionMode": "default",
                "claude_code_version": VERSION,
                "uuid": str(uuid.uuid4()),
            }
        )
        text = first["message"]["content"]
        steps = self.script.get("replies", {}).get(text) or [{"say": ["echo: ", text]}]
        announced: list[str] | None = None
        said = ""
        for step in steps:
            self.drain()
            if self.interrupted:
                break
            uuids = None if announced == taken else list(taken)
            announced = list(taken)
            if "say" in step:
                said = "".join(step["say"])
                self.say(step["say"], uuids)
            elif "think" in step:
                self.think(step["think"], step.get("streamed", True), uuids)
            elif "tool" in step:
                self.tool(step, uuids)
                self.drain()
                while self.pending:  # a tool boundary: messages sent meanwhile join the turn
                    joined = self.pending.popleft()
                    self.remember(joined, "steering")
                    taken.append(joined.get("uuid"))
            elif step.get("block") == "interrupt":
                while not self.interrupted:
                    self.park()
            elif "block" in step and not self.pending:
                self.park()
            elif "error" in step:
                self.result(taken, subtype="error_during_execution", errors=[step["error"]])
                return
            elif "retry" in step:
                self.api_retry(step["retry"])
            elif "api_error" in step:
                text = f"API Error: {step['api_error']}"
                message = self.assistant(str(uuid.uuid4()), [{"type": "text", "text": text}])
                message["message"]["model"] = "<synthetic>"
                message["error"] = "unknown"
                out(self.tagged(message, uuids))
                self.result(taken, is_error=True, result=text)
                return
            elif "crash" in step:
                os._exit(step["crash"])
            elif "hang" in step:
                hang()
        if self.interrupted:
            out(self.user_text("[Request interrupted by user]"))
            self.result(
                taken, subtype="error_during_execution", errors=[], reason="aborted_streaming"
            )
            return
        self.result(taken, result=said)

    def remember(self, frame: dict[str, Any], event: str) -> None:
        text = frame["message"]["content"]
        record({"event": event, "text": text, "uuid": frame.get("uuid"), "session": self.session})
        conversation = self.state / f"{self.session}.json"
        history = json.loads(conversation.read_text()) if conversation.exists() else []
        conversation.write_text(json.dumps([*history, text]))

    # -- frames -------------------------------------------------------------------------
    def tagged(self, frame: dict[str, Any], uuids: list[str] | None) -> dict[str, Any]:
        if uuids is not None:
            frame["user_message_uuid"] = uuids[0]
            frame["user_message_uuids"] = uuids
        return frame

    def say(self, chunks: list[str], uuids: list[str] | None) -> None:
        message_id = f"msg_{uuid.uuid4().hex[:12]}"
        if self.partial:
            events: list[dict[str, Any]] = [
                {"type": "message_start", "message": {"id": message_id, "model": MODEL}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
                *(
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": c},
                    }
                    for c in chunks
                ),
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
                {"type": "message_stop"},
            ]
            for i, event in enumerate(events):
                frame = self.stream_event(event)
                out(self.tagged(frame, uuids) if i == 0 else frame)
            uuids = None
        content = [{"type": "text", "text": "".join(chunks)}]
        out(self.tagged(self.assistant(message_id, content), uuids))

    def think(self, chunks: list[str], streamed: bool, uuids: list[str] | None) -> None:
        message_id = f"msg_{uuid.uuid4().hex[:12]}"
        if self.partial and streamed:
            events: list[dict[str, Any]] = [
                {"type": "message_start", "message": {"id": message_id, "model": MODEL}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking"}},
                *(
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "thinking_delta", "thinking": c},
                    }
                    for c in chunks
                ),
                {"type": "content_block_stop", "index": 0},
                {"type": "message_stop"},
            ]
            for i, event in enumerate(events):
                frame = self.stream_event(event)
                out(self.tagged(frame, uuids) if i == 0 else frame)
            uuids = None
        block = {"type": "thinking", "thinking": "".join(chunks), "signature": "standin"}
        out(self.tagged(self.assistant(message_id, [block]), uuids))

    def tool(self, step: dict[str, Any], uuids: list[str] | None) -> None:
        call_id = f"toolu_{uuid.uuid4().hex[:12]}"
        block = {
            "type": "tool_use",
            "id": call_id,
            "name": step["tool"],
            "input": step.get("input", {}),
        }
        message_id = f"msg_{uuid.uuid4().hex[:12]}"
        if self.partial and step.get("streamed"):
            start = {"type": "tool_use", "id": call_id, "name": step["tool"], "input": {}}
            events: list[dict[str, Any]] = [
                {"type": "message_start", "message": {"id": message_id, "model": MODEL}},
                {"type": "content_block_start", "index": 0, "content_block": start},
                *(
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    }
                    for piece in step["streamed"]
                ),
                {"type": "content_block_stop", "index": 0},
                {"type": "message_stop"},
            ]
            for i, event in enumerate(events):
                frame = self.stream_event(event)
                out(self.tagged(frame, uuids) if i == 0 else frame)
            uuids = None
        out(self.tagged(self.assistant(message_id, [block]), uuids))
        allowed, message = True, f"ran {step['tool']}"
        if step.get("ask"):
            allowed, message = self.ask(step, call_id)
        out(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": call_id,
                            "content": message,
                            "is_error": not allowed,
                        }
                    ],
                },
                "parent_tool_use_id": None,
                "session_id": self.session,
                "uuid": str(uuid.uuid4()),
            }
        )

    def ask(self, step: dict[str, Any], call_id: str) -> tuple[bool, str]:
        self.requests += 1
        request_id = f"cli_{self.requests}_{uuid.uuid4().hex[:6]}"
        out(
            {
                "type": "control_request",
                "request_id": request_id,
                "request": {
                    "subtype": "can_use_tool",
                    "tool_name": step["tool"],
                    "input": step.get("input", {}),
                    "tool_use_id": call_id,
                    "permission_suggestions": step.get("suggestions", []),
                },
            }
        )
        while request_id not in self.responses:
            frame = self.take(block=True)
            if frame is not None and frame.get("type") == "user":
                self.pending.append(frame)
            if self.interrupted:
                out({"type": "control_cancel_request", "request_id": request_id})
                return False, "interrupted"
        response = self.responses.pop(request_id)
        record({"event": "permission", "tool": step["tool"], "answer": response})
        if response.get("subtype") != "success":
            return False, response.get("error", "error")
        answer = response.get("response", {})
        if answer.get("behavior") == "allow" and step["tool"] == "AskUserQuestion":
            answers = (answer.get("updatedInput") or {}).get("answers") or {}
            return True, "; ".join(f"{q} -> {a}" for q, a in answers.items())
        if answer.get("behavior") == "allow":
            return True, f"ran {step['tool']}"
        return False, answer.get("message", "denied")

    def api_retry(self, retry: dict[str, Any]) -> None:
        self.retries += 1
        out(
            {
                "type": "system",
                "subtype": "api_retry",
                "attempt": self.retries,
                "max_retries": 10,
                "retry_delay_ms": 600,
                "error_status": retry.get("error_status"),
                "error": retry.get("error", "unknown"),
                "session_id": self.session,
                "uuid": str(uuid.uuid4()),
            }
        )

    def stream_event(self, event: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "stream_event",
            "uuid": str(uuid.uuid4()),
            "session_id": self.session,
            "event": event,
            "parent_tool_use_id": None,
        }

    def assistant(self, message_id: str, content: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "type": "assistant",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": content,
                "stop_reason": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
            "parent_tool_use_id": None,
            "session_id": self.session,
            "uuid": str(uuid.uuid4()),
        }

    def user_text(self, text: str) -> dict[str, Any]:
        return {
            "type": "user",
            "message": {"role": "user", "content": [{"type": "text", "text": text}]},
            "parent_tool_use_id": None,
            "session_id": self.session,
            "uuid": str(uuid.uuid4()),
        }

    def result(
        self,
        taken: list[Any],
        *,
        subtype: str = "success",
        errors: list[str] | None = None,
        result: str | None = None,
        reason: str = "completed",
        turns: int = 1,
        is_error: bool | None = None,
    ) -> None:
        is_error = subtype != "success" if is_error is None else is_error
        frame: dict[str, Any] = {
            "type": "result",
            "subtype": subtype,
            "duration_ms": 1,
            "duration_api_ms": 1,
            "is_error": is_error,
            "num_turns": turns,
            "session_id": self.session,
            "stop_reason": None if is_error else "end_turn",
            "total_cost_usd": 0,
            "usage": {"input_tokens": 1, "output_tokens": 1},
            "permission_denials": [],
            "terminal_reason": reason,
            "uuid": str(uuid.uuid4()),
        }
        if errors is not None:
            frame["errors"] = errors
        if result is not None:
            frame["result"] = result
        if taken:
            frame["user_message_uuid"] = taken[0]
            frame["user_message_uuids"] = taken
        out(frame)


if __name__ == "__main__":
    Cli(sys.argv[1:]).run()
