#!/usr/bin/env python3
"""A stand-in for `codex app-server --listen stdio://`, written for these tests.

It speaks what the openai-codex SDK speaks: newline-delimited JSON-RPC without
the `jsonrpc` member, requests and notifications both ways (server requests
for approvals). Shapes and error texts follow the real app-server 0.163.0
(../shared/reference/wire/probe_codex2_out.txt). Standard library only.

Scripted per test through the environment:
  CODEX_STANDIN_SCRIPT  a JSON file: {"turns": {prompt: [step, ...]},
                        "resume_error": {"code": int, "message": str},
                        "hang_on": method, "refuse": {prompt: message},
                        "exit_at_initialize": text}
                        (all optional; "refuse": turn/start answers an error;
                        "exit_at_initialize": a warning, then the text, on
                        stderr, and exit 1 unanswered, as the real CLI does
                        with a setting it no longer supports)
  CODEX_STANDIN_RECORD  a file to which every message received is appended
                        (one JSON object a line), so tests see each prompt;
                        first, {"startup": {pid, ppid, sid, pgid}} of the process.
  CODEX_STANDIN_HOME    threads are kept here (one file each), so a resume in a
                        new process finds the threads an earlier one started.

An unscripted prompt is answered "echo: <prompt>" in three deltas. Steps:
  {"say": text}                one agent-message delta
  {"wait": method}             park until that request arrives in this turn
  {"approval": command, "amendment": [prefix, ...]}
                               a command that needs approval (server request), with
                               the execpolicy amendment codex proposes, if any
  {"file_approval": path}      a file change that needs approval
  {"ask": [question, ...]}     request_user_input (a server request) with codex's
                               questions ({id, header, question, options, isOther});
                               the answer is said back ("<id>=<answers>")
  {"reason": text, "summary": bool, "streamed": bool}
                               a reasoning item: its summary (or raw text) streamed
                               as deltas, then completed (with "streamed": false,
                               only completed)
  {"fail": message}            the turn ends with status failed
  {"retry": message, "details": text, "times": n}
                               n (default 1) `error` notifications codex will retry
                               (willRetry true), as the real CLI sends while the
                               model API fails ("Reconnecting... 1/5") or the network
                               is gone ("Reconnecting... waiting for network")
  {"retry_forever": message, "details": text, "times": n}
                               n of those, then the turn waits for an interrupt (the
                               real CLI waits for a network that never comes back)
  {"give_up": message, "completed": bool}
                               an `error` notification it will not retry (willRetry
                               false); the turn is over, and only with "completed" a
                               turn/completed (status failed) follows
  {"crash": true}              exit at once, mid-turn
  {"end_unseen": true}         the turn ends, but its turn/completed is still in
                               flight: it goes out after the next answer
  {"hang": true}               answer nothing from now on
Steering (turn/steer) is taken at once and echoed as a userMessage item at
the next step boundary, as the real CLI takes it at the next tool or model call.
"""

import json
import os
import sys
import time
import uuid

SCRIPT = {}
if os.environ.get("CODEX_STANDIN_SCRIPT"):
    with open(os.environ["CODEX_STANDIN_SCRIPT"]) as f:
        SCRIPT = json.load(f)
RECORD = os.environ.get("CODEX_STANDIN_RECORD")
HOME = os.environ.get("CODEX_STANDIN_HOME")
VERSION = "0.163.0"
hung = False


def out(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def notify(method, params):
    out({"method": method, "params": params})


def record(message):
    if RECORD:
        with open(RECORD, "a") as f:
            f.write(json.dumps(message) + "\n")


def new_id():
    return str(uuid.uuid4())


def thread_json(thread_id):
    return {
        "id": thread_id,
        "sessionId": thread_id,
        "cliVersion": VERSION,
        "createdAt": 1796077947,
        "updatedAt": 1796077947,
        "cwd": os.getcwd(),
        "ephemeral": False,
        "modelProvider": "openai",
        "preview": "",
        "source": "vscode",
        "status": {"type": "idle"},
        "turns": [],
    }


def thread_result(thread_id, model):
    return {
        "thread": thread_json(thread_id),
        "model": model or "standin-model",
        "modelProvider": "openai",
        "cwd": os.getcwd(),
        "approvalPolicy": "on-request",
        "approvalsReviewer": "user",
        "sandbox": {"type": "readOnly", "networkAccess": False},
    }


def turn_json(turn_id, status, error=None):
    return {"id": turn_id, "items": [], "status": status, "error": error}


def text_of(inputs):
    return "\n".join(i.get("text", "") for i in inputs if i.get("type") == "text")


class Turn:
    """One running turn: its steps run until one parks on something."""

    def __init__(self, thread_id, prompt, client_id):
        self.thread_id = thread_id
        self.id = new_id()
        self.prompt = prompt
        self.client_id = client_id
        steps = SCRIPT.get("turns", {}).get(prompt)
        if steps is None:
            reply = f"echo: {prompt}"
            third = max(1, -(-len(reply) // 3))
            steps = [{"say": reply[i : i + third]} for i in range(0, len(reply), third)]
        self.steps = list(steps)
        self.steering = []  # (text, client id) taken, not yet echoed
        self.seen = {}  # method -> count of requests during this turn
        self.waiting_for = None  # a method, or ("approval", request id)
        self.message_id = None
        self.message = []
        self.active = True

    def ids(self):
        return {"threadId": self.thread_id, "turnId": self.id}

    def user_message(self, text, client_id):
        item = {
            "type": "userMessage",
            "id": new_id(),
            "clientId": client_id,
            "content": [{"type": "text", "text": text, "text_elements": []}],
        }
        notify("item/started", {"item": item, **self.ids()})
        notify("item/completed", {"item": item, **self.ids()})

    def begin(self):
        notify(
            "thread/status/changed",
            {"threadId": self.thread_id, "status": {"type": "active", "activeFlags": []}},
        )
        notify(
            "turn/started", {"threadId": self.thread_id, "turn": turn_json(self.id, "inProgress")}
        )
        self.user_message(self.prompt, self.client_id)
        self.advance()

    def end_message(self):
        if self.message_id is None:
            return
        item = {
            "type": "agentMessage",
            "id": self.message_id,
            "text": "".join(self.message),
            "phase": "final_answer",
        }
        notify("item/completed", {"item": item, **self.ids()})
        self.message_id, self.message = None, []

    def boundary(self):
        for text, client_id in self.steering:
            self.end_message()
            self.user_message(text, client_id)
        self.steering = []

    def advance(self):
        """Run steps until one parks (a wait, an approval) or the turn ends."""
        global hung
        while self.active and self.waiting_for is None:
            self.boundary()
            if not self.steps:
                self.finish("completed")
                return
            step = self.steps.pop(0)
            if "say" in step:
                if self.message_id is None:
                    self.message_id = new_id()
                    item = {"type": "agentMessage", "id": self.message_id, "text": ""}
                    notify("item/started", {"item": item, **self.ids()})
                self.message.append(step["say"])
                notify(
                    "item/agentMessage/delta",
                    {"delta": step["say"], "itemId": self.message_id, **self.ids()},
                )
            elif "wait" in step:
                if self.seen.get(step["wait"], 0) == 0:
                    self.waiting_for = step["wait"]
            elif "approval" in step:
                self.end_message()
                item_id = new_id()
                command = step["approval"]
                item = {
                    "type": "commandExecution",
                    "id": item_id,
                    "command": command,
                    "cwd": os.getcwd(),
                    "status": "inProgress",
                    "commandActions": [],
                }
                notify("item/started", {"item": item, **self.ids()})
                request_id = new_id()
                self.waiting_for = ("approval", request_id, item)
                params = {
                    "itemId": item_id,
                    "command": command,
                    "cwd": os.getcwd(),
                    "reason": "needs approval",
                    **self.ids(),
                }
                if step.get("amendment"):
                    params["proposedExecpolicyAmendment"] = step["amendment"]
                out(
                    {
                        "id": request_id,
                        "method": "item/commandExecution/requestApproval",
                        "params": params,
                    }
                )
            elif "file_approval" in step:
                self.end_message()
                item_id = new_id()
                changes = [{"path": step["file_approval"], "kind": {"type": "add"}, "diff": ""}]
                item = {
                    "type": "fileChange",
                    "id": item_id,
                    "changes": changes,
                    "status": "inProgress",
                }
                notify("item/started", {"item": item, **self.ids()})
                request_id = new_id()
                self.waiting_for = ("approval", request_id, item)
                params = {
                    "itemId": item_id,
                    "reason": "write a file",
                    "startedAtMs": 0,
                    **self.ids(),
                }
                out(
                    {
                        "id": request_id,
                        "method": "item/fileChange/requestApproval",
                        "params": params,
                    }
                )
            elif "ask" in step:
                self.end_message()
                request_id = new_id()
                self.waiting_for = ("input", request_id, None)
                params = {
                    "itemId": new_id(),
                    "isBlocking": True,
                    "questions": step["ask"],
                    **self.ids(),
                }
                out({"id": request_id, "method": "item/tool/requestUserInput", "params": params})
            elif "reason" in step:
                self.end_message()
                item_id = new_id()
                field = "summary" if step.get("summary", True) else "content"
                notify("item/started", {"item": {"type": "reasoning", "id": item_id}, **self.ids()})
                if step.get("streamed", True):
                    method = (
                        "item/reasoning/summaryTextDelta"
                        if field == "summary"
                        else "item/reasoning/textDelta"
                    )
                    delta = {"delta": step["reason"], "itemId": item_id, **self.ids()}
                    delta["summaryIndex" if field == "summary" else "contentIndex"] = 0
                    notify(method, delta)
                item = {"type": "reasoning", "id": item_id, field: [step["reason"]]}
                notify("item/completed", {"item": item, **self.ids()})
            elif "fail" in step:
                self.finish("failed", {"message": step["fail"]})
            elif "retry" in step or "retry_forever" in step:
                message = step.get("retry") or step.get("retry_forever")
                for _ in range(step.get("times", 1)):
                    self.error(message, step.get("details"), will_retry=True)
                if "retry_forever" in step:
                    self.waiting_for = "an interrupt"  # only turn/interrupt ends it
            elif "give_up" in step:
                self.end_message()
                self.error(step["give_up"], None, will_retry=False)
                if step.get("completed"):
                    self.finish("failed", {"message": step["give_up"]})
                self.active = False
                return
            elif "end_unseen" in step:
                self.end_message()
                self.active = False
                SERVER.in_flight.append(
                    (
                        "turn/completed",
                        {"threadId": self.thread_id, "turn": turn_json(self.id, "completed")},
                    )
                )
                return
            elif "crash" in step:
                sys.stdout.flush()
                os._exit(3)
            elif "hang" in step:
                hung = True
                return

    def error(self, message, details, will_retry):
        error = {
            "message": message,
            "additionalDetails": details,
            "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": None}},
        }
        notify("error", {"error": error, "willRetry": will_retry, **self.ids()})

    def answered(self, request_id, result):
        """The answer to a server request of this turn (an approval, or questions)."""
        if not (isinstance(self.waiting_for, tuple) and self.waiting_for[1] == request_id):
            return
        if self.waiting_for[0] == "approval":
            self.approved(request_id, result.get("decision", "decline"))
            return
        self.waiting_for = None
        if not self.active:
            return
        said = [
            f"{k}={','.join(v.get('answers', []))}" for k, v in result.get("answers", {}).items()
        ]
        self.steps.insert(0, {"say": "; ".join(said) or "no answers"})
        self.advance()

    def approved(self, request_id, decision):
        if not (isinstance(self.waiting_for, tuple) and self.waiting_for[1] == request_id):
            return
        item = dict(self.waiting_for[2])
        self.waiting_for = None
        if not self.active:
            return  # interrupted before the answer came
        amended = isinstance(decision, dict) and "acceptWithExecpolicyAmendment" in decision
        accepted = amended or decision in ("accept", "acceptForSession")
        item["status"] = "completed" if accepted else "declined"
        item["aggregatedOutput"] = "ran" if accepted else None
        item["exitCode"] = 0 if accepted else None
        notify("item/completed", {"item": item, **self.ids()})
        if decision == "cancel":
            return  # an interrupt follows
        self.advance()

    def requested(self, method):
        self.seen[method] = self.seen.get(method, 0) + 1
        if self.waiting_for == method:
            self.waiting_for = None
            self.advance()

    def finish(self, status, error=None):
        self.boundary()
        self.end_message()
        self.active = False
        notify("thread/status/changed", {"threadId": self.thread_id, "status": {"type": "idle"}})
        notify(
            "turn/completed",
            {"threadId": self.thread_id, "turn": turn_json(self.id, status, error)},
        )


class Server:
    def __init__(self):
        self.turn = None
        self.in_flight = []  # notifications sent after the next answer

    def request(self, rid, method, params):
        def ok(result):
            out({"id": rid, "result": result})

        def error(code, message):
            out({"error": {"code": code, "message": message}, "id": rid})

        if method == "initialize":
            ok(
                {
                    "userAgent": f"codex_standin/{VERSION} (Linux; x86_64) standin",
                    "codexHome": HOME or "",
                    "platformFamily": "unix",
                    "platformOs": "linux",
                }
            )
        elif method == "thread/start":
            thread_id = new_id()
            if HOME:
                open(os.path.join(HOME, thread_id), "w").close()
            ok(thread_result(thread_id, params.get("model")))
            notify("thread/started", {"thread": thread_json(thread_id)})
        elif method == "thread/resume":
            thread_id = params.get("threadId", "")
            failure = SCRIPT.get("resume_error")
            if failure:
                error(failure["code"], failure["message"])
            elif HOME and os.path.exists(os.path.join(HOME, thread_id)):
                ok(thread_result(thread_id, params.get("model")))
            else:
                error(-32600, f"no rollout found for thread id {thread_id}")
        elif method == "turn/start" and text_of(params["input"]) in SCRIPT.get("refuse", {}):
            error(-32600, SCRIPT["refuse"][text_of(params["input"])])
        elif method == "turn/start":
            if self.turn is not None and self.turn.active:
                ok({"turn": turn_json(self.turn.id, "inProgress")})  # joins the running turn
                self.turn.steering.append(
                    (text_of(params["input"]), params.get("clientUserMessageId"))
                )
                return
            self.turn = Turn(
                params["threadId"], text_of(params["input"]), params.get("clientUserMessageId")
            )
            ok({"turn": turn_json(self.turn.id, "inProgress")})
            self.turn.begin()
        elif method == "turn/steer":
            turn = self.turn
            if turn is None or not turn.active:
                error(-32600, "no active turn to steer")
                return
            expected = params.get("expectedTurnId")
            if expected != turn.id:
                error(-32600, f"expected active turn id `{expected}` but found `{turn.id}`")
                return
            turn.steering.append((text_of(params["input"]), params.get("clientUserMessageId")))
            ok({"turnId": turn.id})
            turn.requested(method)
        elif method == "turn/interrupt":
            ok({})
            turn = self.turn
            if turn is not None and turn.active:
                turn.end_message()
                turn.steering = []
                turn.active = False
                notify(
                    "thread/status/changed",
                    {"threadId": turn.thread_id, "status": {"type": "idle"}},
                )
                notify(
                    "turn/completed",
                    {"threadId": turn.thread_id, "turn": turn_json(turn.id, "interrupted")},
                )
        else:
            error(-32601, f"method not found: {method}")

    def handle(self, message):
        global hung
        record(message)
        if hung:
            return
        method = message.get("method")
        if method is not None and "id" in message:
            if method == SCRIPT.get("hang_on"):
                hung = True
                return
            if method == "initialize" and SCRIPT.get("exit_at_initialize"):
                # As the real CLI: its stdout closes before its last words reach stderr.
                sys.stderr.write(
                    "WARNING: proceeding, even though we could not create PATH aliases\n"
                )
                sys.stderr.flush()
                os.close(1)
                time.sleep(0.3)
                error = SCRIPT["exit_at_initialize"]
                sys.stderr.write(f"Error: {error}\n\nStack backtrace:\n   0: <unknown>\n")
                sys.stderr.flush()
                os._exit(1)
            in_flight, self.in_flight = self.in_flight, []
            self.request(message["id"], method, message.get("params") or {})
            for name, params in in_flight:
                notify(name, params)
        elif method is None and self.turn is not None:  # the answer to a server request
            self.turn.answered(message.get("id"), message.get("result") or {})


SERVER = Server()


def main():
    if sys.argv[1:] != ["app-server", "--listen", "stdio://"]:
        sys.exit(f"standin_codex: unexpected arguments {sys.argv[1:]}")
    startup = {"pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "pgid": os.getpgid(0)}
    record({"startup": startup})
    for line in sys.stdin:
        if line.strip():
            SERVER.handle(json.loads(line))


if __name__ == "__main__":
    main()
