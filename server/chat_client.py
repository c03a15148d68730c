"""`agenthost chat`: a terminal AHP client (asyncio + aiohttp).

`ChatClient` speaks AHP over one WebSocket: it initializes, creates or opens a
session, subscribes to the session's default chat and prints the reply as it
streams. Each input line is a message or a command:

    text          a message: a new turn when idle, queued while a turn runs
    /steer text   steer the running turn
    /queue        list the pending messages, numbered
    /remove N     remove the Nth pending message
    /cancel       cancel the running turn
    /approve [option], /deny   answer the oldest permission prompt (an option
                  the tool call offers, by number, id or label)
    /edit JSON    approve it with this tool input instead (an editable call)
    /answer text  answer the oldest question (a choice by number or label, or
                  text; several questions: answers separated by ";")
    /decline      decline the oldest question
    /authorize TOKEN  give the token for the resource the oldest tool call
                  waiting for authorization names (sent with `authenticate`)
    /resume       run again the latest turn, stopped at a resumable error
    /thinking     show the latest turn's reasoning, which streams collapsed
    /sessions     list your sessions
    /open ID      open a session (its id, or the start of it), with its history
    /new          create a session
    /quit         leave
    /rename title, and any other /command: the host's (sent as a message)

The open session is marked read when it is opened and whenever a turn left it
unread while it was open: what the user sees is read.

The client's view of the chat comes from the snapshot it subscribed with and
the actions that follow; server/chat_view.py is the only code that knows
AHP's JSON shapes. The model's reasoning (chat/reasoning) is shown collapsed,
one "[thinking: N chars]" line where a run of it ends; tool calls waiting for
confirmation list the options they offer; questions list their choices; a
tool call waiting for authorization names the resource and its scopes. The
token goes in the upgrade request's Authorization header, never on the
command line's output or in a log; a token /authorize gives goes in an
`authenticate` request and nowhere else.

`run_chat` (server/chat_terminal.py) connects it to a terminal.
"""

import asyncio
import itertools
import json
import uuid
from collections.abc import Callable
from typing import Any

import aiohttp

from agenthost.server.chat_customize import Hook, hooks_of, listed, toggle_action, toggled
from agenthost.server.chat_view import (
    ChatError,
    ChatView,
    Pending,
    Request,
    Seen,
    draft_line,
    how_to_answer,
    option_of,
    read_action,
    same,
    wire_confirmed,
    wire_input_completed,
    wire_input_declined,
    wire_pending_removed,
    wire_pending_set,
    wire_turn_started,
    wire_view,
)

__all__ = ["ChatClient", "ChatError"]

ROOT = "ahp-root://"
SESSION_PREFIX = "ahp-session:/"
VERSIONS = ["1.1.0"]
CALL_TIMEOUT_S = 30.0

HELP = """\
text          send a message (queued while a turn runs)
/steer text   steer the running turn
/queue        list pending messages
/remove N     remove the Nth pending message
/cancel       cancel the running turn
/approve [option]  approve the oldest permission prompt, with an option it
              offers (number, id or label); /deny refuses it
/edit JSON    approve the oldest permission prompt with this tool input (where
              the call is editable)
/answer text  answer the oldest question the model asked (a choice's number or
              label, or text; several questions: answers separated by ";")
/decline      decline the oldest question
/authorize TOKEN  give the token a tool call waiting for authorization needs
              (for the resource it names)
/resume       run again the latest turn, stopped at a resumable error
/thinking     show the latest turn's reasoning in full
/sessions     list your sessions
/open ID      open a session and show its history
/new          create a session
/rename title name this session (the host's command)
/customize    list what the host does in this session; /customize NAME on|off
              turns one off or on for this session
/quit         leave (or Ctrl+D)
Any other /command goes to the host, which hands what it does not know to the model."""
OWN_COMMANDS = frozenset(
    {
        "/help", "/sessions", "/open", "/new", "/steer", "/queue", "/remove", "/cancel",
        "/approve", "/deny", "/edit", "/resume", "/answer", "/decline", "/thinking",
        "/authorize", "/customize",
        "/quit", "/exit",
    }
)  # fmt: skip
"""The commands this client handles itself; any other line goes to the host."""
READ = 32  # a session summary's status bit: the user has seen it
TOGGLED = "session/customizationToggled"


# What became of a pending message, by the reason the server gave for its removal.
REMOVED = {
    "client": "[removed] {text}",
    "withdrawn": "[steering withdrawn: the model never saw it] {text}",
    "consumed": "[steering taken: it runs as the next turn] {text}",
    "cancelled": "[dropped with the cancelled turn] {text}",
    "requeued": "[steering queued: the provider could not take it mid-turn] {text}",
    "rejected": "[refused when its turn came] {text}",
}


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def not_one_session(matches: list[str]) -> str:
    """Why a wanted id opens no session: none matches, or several do."""
    if not matches:
        return "no session of yours has this id or starts with it (/sessions lists them)"
    ids = [m.removeprefix(SESSION_PREFIX) for m in matches]
    listed = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
    return f"{len(ids)} sessions start with it: {listed}"


def status_text(status: int) -> str:
    if status & 64:
        return "archived"
    if status & 24 == 24:
        return "waiting for input"
    if status & 8:
        return "working"
    if status & 2:
        return "error"
    return "idle" if status & READ else "idle, unread"


class ChatClient:
    """One terminal's AHP connection. Runs on the caller's event loop.

    Args:
        ws: an open WebSocket to /ahp (authenticated in its upgrade request).
        write: prints text as is (the client adds its own newlines).
    """

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, write: Callable[[str], None]) -> None:
        self.ws = ws
        self.write = write
        self.client_id = str(uuid.uuid4())
        self.session: str | None = None
        self.chat: str | None = None
        self.view = ChatView()
        self.hooks: list[Hook] = []  # the open session's customizations (server/chat_customize.py)
        self._from_seq = 0
        self._ids = itertools.count(1)
        self._seq = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._streaming = False
        self._background: set[asyncio.Task[None]] = set()
        self._reply_due = False  # a turn started and its reply has not begun on screen
        self._reader = asyncio.get_running_loop().create_task(self._read())
        self.closed = asyncio.Event()

    # -- the connection ------------------------------------------------------------------
    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                if frame.type is aiohttp.WSMsgType.TEXT:
                    self._receive(json.loads(frame.data))
        finally:
            self.closed.set()
            for future in self._waiting.values():
                if not future.done():
                    future.set_exception(ChatError("the connection closed"))
            self._waiting.clear()

    def _receive(self, message: dict[str, Any]) -> None:
        if "id" in message and "method" not in message:
            future = self._waiting.pop(message["id"], None)
            if future is None or future.done():
                return
            if "error" in message:
                future.set_exception(ChatError(message["error"].get("message", "refused")))
            else:
                future.set_result(message.get("result"))
        elif message.get("method") == "action":
            self._on_action(message.get("params") or {})
        elif (
            message.get("method") == "root/sessionRemoved"
            and (message.get("params") or {}).get("resource") == self.session
        ):
            self._line("[this session was removed]")
        elif message.get("method") == "root/sessionSummaryChanged":
            params = message.get("params") or {}
            status = (params.get("changes") or {}).get("status")  # only what changed
            if params.get("session") == self.session and status is not None and not status & READ:
                self._mark_read()  # a turn ended while the user watched: seen

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        await self.ws.send_json(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        )
        return await asyncio.wait_for(future, CALL_TIMEOUT_S)

    async def dispatch(self, action: dict[str, Any], channel: str | None = None) -> None:
        """Dispatch an action to the open chat (or to `channel`)."""
        params = {"channel": channel or self.chat, "clientSeq": next(self._seq), "action": action}
        await self.ws.send_json({"jsonrpc": "2.0", "method": "dispatchAction", "params": params})

    def _mark_read(self) -> None:
        if self.session is not None and not self.ws.closed:
            action = {"type": "session/isReadChanged", "isRead": True}
            task = asyncio.get_running_loop().create_task(self.dispatch(action, self.session))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()

    # -- output ----------------------------------------------------------------------------
    def _line(self, text: str, *, before_reply: bool = False) -> None:
        """A line of its own; one `before_reply` goes ahead of the reply's "assistant: "."""
        if self._reply_due and not before_reply:
            self._reply_due = False
            self.write("assistant: ")
        if self._streaming:
            self.write("\n")
            self._streaming = False
        self.write(text + "\n")

    def _on_action(self, envelope: dict[str, Any]) -> None:
        action = envelope.get("action") or {}
        if envelope.get("channel") == self.session and self.session is not None:
            if "rejectionReason" in envelope and action.get("type") == TOGGLED:
                self._line(f"[refused] {TOGGLED}: {envelope['rejectionReason']}")
            elif action.get("type") == TOGGLED and (said := toggled(self.hooks, action)):
                self._line(said)
            renamed = (
                action.get("type") == "session/titleChanged" and "rejectionReason" not in envelope
            )
            if renamed and action.get("byUser") is not False:  # not a title the host derived
                self._line(f"[renamed: {action.get('title') or 'untitled'}]")  # by another client
            return
        if envelope.get("channel") != self.chat:
            return
        if "rejectionReason" in envelope:
            origin = envelope.get("origin") or {}
            if origin.get("clientId") in (None, self.client_id):
                self._line(f"[refused] {action.get('type')}: {envelope['rejectionReason']}")
            return
        seq = envelope.get("serverSeq")
        if isinstance(seq, int) and seq <= self._from_seq:
            return
        what, fields = read_action(action)
        view = self.view
        if what is Seen.REASONING_PART or what is Seen.REASONING:
            self._reasoning(what, fields)
            return
        self._announce_thinking()
        if what is Seen.RESUMED:
            view.active_turn, view.resumable = fields["turn_id"], None
            self._line("[resumed]")
            self._reply_due = True
        elif what == "started":
            view.resumable = None
            view.active_turn = fields["turn_id"]
            view.thinking = []
            self._drop_pending(fields["pending_id"])
            self._line(f"you: {fields['text']}")
            self._reply_due = True  # "assistant: " goes with the reply's first text
        elif what == "delta" and fields["turn_id"] == view.active_turn:
            if self._reply_due:
                self._reply_due = False
                self.write("assistant: ")
            self.write(fields["text"])
            self._streaming = True
        elif what == "ended" and fields["turn_id"] == view.active_turn:
            view.active_turn = None
            view.turns += 1
            view.requests = [r for r in view.requests if r.turn_id != fields["turn_id"]]
            detail = f": {fields['error']}" if fields["error"] else ""
            view.resumable = fields["turn_id"] if fields["resumable"] else None
            hint = "; /resume runs it again" if view.resumable else ""
            self._line(f"[turn {fields['outcome']}{detail}{hint}]")
        elif what == "pending_set":
            pending: Pending = fields["pending"]
            queue = view.steering if pending.kind == "steering" else view.queued
            for index, existing in enumerate(queue):
                if existing.id == pending.id:
                    queue[index] = pending
                    break
            else:
                queue.append(pending)
            self._line(f"[{pending.kind}] {pending.text}")
        elif what == "pending_removed":
            removed = self._drop_pending(fields["id"])
            if removed is not None:
                reason = fields["reason"]
                if removed.kind == "queued" and reason == "consumed":  # ran without a turn
                    said = "[taken from the queue] {text}"
                else:
                    said = REMOVED.get(reason, "[removed ({reason})] {text}")
                self._line(said.format(text=removed.text, reason=reason))
        elif what == "steering_folded":
            folded = self._drop_pending(fields["pending"].id) or fields["pending"]
            self._line(f"[steering folded into the running turn] {folded.text}")
        elif what is Seen.RENAMED:
            self._line(f"[renamed: {fields['title']}]")
        elif what == "tool":
            self._line(f"[tool] {fields['name']}")
        elif what == "request_opened":
            request: Request = fields["request"]
            known = next((r for r in view.requests if same(r, request)), None)
            if known is None:
                view.requests.append(request)
                self._request_line(request)
            elif request.questions and not known.questions:  # the AHP form says more
                known.questions = request.questions
        elif what is Seen.DRAFT:  # another client's draft answer (ours is not echoed)
            if (envelope.get("origin") or {}).get("clientId") != self.client_id:
                self._line(draft_line(view.requests, fields))
        elif what == "request_closed":
            closed = fields["id"]
            view.requests = [r for r in view.requests if closed not in (r.id, r.tool_call_id)]

    def _reasoning(self, what: Seen, fields: dict[str, Any]) -> None:
        """Reasoning streams collapsed: counted, shown once its run ends."""
        view = self.view
        if fields["turn_id"] != view.active_turn:
            return
        if what is Seen.REASONING_PART or not view.thinking:
            view.thinking.append("")
        if what is Seen.REASONING:
            view.thinking[-1] += fields["text"]
            view.unannounced += len(fields["text"])

    def _announce_thinking(self) -> None:
        if self.view.unannounced:
            count, self.view.unannounced = self.view.unannounced, 0
            self._line(
                f"[thinking: {plural(count, 'char')}; /thinking shows it]", before_reply=True
            )

    def _request_line(self, request: Request) -> None:
        self._line(f"[{request.kind}] {request.label} ({how_to_answer(request)})")

    def _drop_pending(self, pending_id: str | None) -> Pending | None:
        for queue in (self.view.steering, self.view.queued):
            for pending in queue:
                if pending.id == pending_id:
                    queue.remove(pending)
                    return pending
        return None

    # -- sessions ----------------------------------------------------------------------------
    async def initialize(self) -> str:
        result = await self.call(
            "initialize",
            {
                "protocolVersions": VERSIONS,
                "clientId": self.client_id,
                "initialSubscriptions": [ROOT],
            },
        )
        return str(result["protocolVersion"])

    async def create_session(self) -> str:
        uri = f"{SESSION_PREFIX}{uuid.uuid4()}"
        await self.call("createSession", {"channel": uri})
        await self.open_session(uri)
        return uri

    async def sessions(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": 100}
            if cursor is not None:
                params["cursor"] = cursor
            page = await self.call("listSessions", params)
            items += page.get("items") or []
            cursor = page.get("nextCursor")
            if cursor is None:
                return items

    async def open_session(self, uri: str) -> None:
        snapshot = (await self.call("subscribe", {"channel": uri}))["snapshot"]
        chat = snapshot["state"]["defaultChat"]
        subscribed = (await self.call("subscribe", {"channel": chat}))["snapshot"]
        for previous in (self.session, self.chat):
            if previous is not None and previous not in (uri, chat):
                await self.ws.send_json(
                    {"jsonrpc": "2.0", "method": "unsubscribe", "params": {"channel": previous}}
                )
        self.session, self.chat = uri, chat
        self.hooks = hooks_of(snapshot["state"].get("customizations"))
        self._from_seq = int(subscribed.get("fromSeq") or 0)
        if not int(snapshot["state"].get("status") or 0) & READ:
            self._mark_read()  # opened: what it shows is seen
        view = self.view = wire_view(subscribed["state"])
        title = snapshot["state"].get("title") or "untitled"
        pending = f"{len(view.pending)} pending" if view.pending else "nothing pending"
        running = ", a turn is running" if view.active_turn else ""
        self._line(
            f"[session {uri.removeprefix(SESSION_PREFIX)} ({title}):"
            f" {plural(view.turns, 'turn')}, {pending}{running}]"
        )
        self._history(view)

    def _history(self, view: ChatView) -> None:
        """The turns the session had when opened, then what is pending and running."""
        if view.turns > len(view.history):
            self._line(f"[{plural(view.turns - len(view.history), 'earlier turn')} not shown]")
        for turn in view.history:
            self._line(f"you: {turn.text}")
            self._line(f"assistant: {turn.reply}")
            if turn.state != "complete":
                detail = f": {turn.error}" if turn.error else ""
                self._line(f"[turn {turn.state}{detail}]")
        for number, pending in enumerate(view.pending, start=1):
            self._line(f"{number}. [{pending.kind}] {pending.text}")
        if view.active_turn is not None:
            self._line(f"you: {view.active_text}")
            self.write(f"assistant: {view.active_reply}")
            self._streaming = True
        for request in view.requests:
            self._request_line(request)

    async def matching(self, wanted: str) -> list[str]:
        """The sessions (URIs) `wanted` names: the one with this id, else those
        whose id starts with it."""
        wanted = wanted.strip().removeprefix(SESSION_PREFIX)
        if not wanted:
            return []
        ids = [str(s["resource"]).removeprefix(SESSION_PREFIX) for s in await self.sessions()]
        matches = [i for i in ids if i == wanted] or [i for i in ids if i.startswith(wanted)]
        return [f"{SESSION_PREFIX}{i}" for i in matches]

    # -- input -------------------------------------------------------------------------------
    async def handle_line(self, line: str) -> bool:
        """Act on one input line; False when the user asked to leave."""
        line = line.strip()
        if not line:
            return True
        command, _, rest = line.partition(" ") if line.startswith("/") else ("", "", line)
        rest = rest.strip()
        try:
            return await self._command(command, rest)
        except ChatError as error:
            self._line(f"[error] {error}")
        except TimeoutError:
            self._line("[error] the server did not answer in time")
        return True

    async def _command(self, command: str, rest: str) -> bool:
        view = self.view
        if command in ("/quit", "/exit"):
            return False
        if command == "/help":
            self._line(HELP)
        elif command == "/sessions":
            for item in await self.sessions():
                uri = str(item["resource"])
                mark = "*" if uri == self.session else " "
                title = item.get("title") or "(untitled)"
                status = status_text(int(item.get("status") or 0))
                turns = plural(int(item.get("turnCount") or 0), "turn")
                self._line(f"{mark} {uri.removeprefix(SESSION_PREFIX)}  {status}  {turns}  {title}")
        elif command == "/open":
            found = await self.matching(rest) if rest else []
            if not rest:
                self._line("[error] /open ID: give a session's id or the start of it (/sessions)")
            elif len(found) != 1:
                self._line(f"[error] /open {rest}: {not_one_session(found)}")
            else:
                await self.open_session(found[0])
        elif command == "/new":
            await self.create_session()
        elif self.chat is None:
            self._line("[error] no session is open: /new or /open ID")
        elif command not in OWN_COMMANDS:  # a message, or the host's command (/rename ...)
            text = f"{command} {rest}".strip()  # the host queues a command as it queues a send
            if view.active_turn is None:
                await self.dispatch(wire_turn_started(uuid.uuid4().hex, text))
            else:
                await self.dispatch(wire_pending_set("queued", uuid.uuid4().hex, text))
        elif command == "/steer":
            if not rest:
                self._line("[error] /steer needs text")
            elif view.active_turn is None:
                self._line("[error] no turn is running: type the text to send it")
            else:
                await self.dispatch(wire_pending_set("steering", uuid.uuid4().hex, rest))
        elif command == "/queue":
            if not view.pending:
                self._line("[queue empty]")
            for number, pending in enumerate(view.pending, start=1):
                self._line(f"{number}. [{pending.kind}] {pending.text}")
        elif command == "/remove":
            pending_list = view.pending
            if not pending_list:
                self._line("[error] nothing is pending to remove")
            elif not rest.isdigit() or not 1 <= int(rest) <= len(pending_list):
                self._line(f"[error] /remove N, N from 1 to {len(pending_list)} (see /queue)")
            else:
                chosen = pending_list[int(rest) - 1]
                await self.dispatch(wire_pending_removed(chosen.kind, chosen.id))
        elif command == "/cancel":
            if view.active_turn is None:
                self._line("[error] no turn is running")
            else:
                await self.dispatch({"type": "chat/turnCancelled", "turnId": view.active_turn})
        elif command in ("/approve", "/deny"):
            prompts = [r for r in view.requests if r.kind == "permission"]
            if not prompts:
                self._line("[error] no permission prompt is open")
                return True
            request = prompts[0]
            option = option_of(request, rest) if rest else None
            if rest and option is None:
                offered = ", ".join(o.id for o in request.options) or "none"
                self._line(f"[error] no option {rest!r} (it offers: {offered})")
                return True
            approved = command == "/approve" if option is None else option.kind != "deny"
            await self.dispatch(wire_confirmed(request, approved, option))
        elif command == "/edit":
            prompts = [r for r in view.requests if r.kind == "permission"]
            if not prompts:
                self._line("[error] no permission prompt is open")
            elif not prompts[0].editable:
                self._line("[error] this tool call takes no edited input: /approve or /deny")
            elif not _json_object(rest):
                self._line(
                    '[error] /edit JSON: the tool\'s input as a JSON object, e.g. {"path": "a"}'
                )
            else:
                await self.dispatch(wire_confirmed(prompts[0], True, None, rest))
        elif command in ("/answer", "/decline"):
            questions = [r for r in view.requests if r.kind == "user_input"]
            if not questions:
                self._line("[error] no question is open")
            elif command == "/decline":
                await self.dispatch(wire_input_declined(questions[0]))
            else:
                answers = [a.strip() for a in rest.split(";")] if rest else [""]
                await self.dispatch(wire_input_completed(questions[0], answers))
        elif command == "/authorize":
            waiting = [r for r in view.requests if r.kind == "authentication"]
            if not waiting or not rest:
                self._line(
                    "[error] " + ("/authorize TOKEN" if waiting else "nothing waits for a token")
                )
            else:  # the server routes it to the call (server/tool_tokens.py)
                params = {"channel": self.chat, "resource": waiting[0].resource, "token": rest}
                await self.call("authenticate", params)
        elif command == "/resume":
            if view.resumable is None:
                self._line("[error] no turn stopped at a resumable error")
            else:
                await self.dispatch({"type": "chat/turnResume", "turnId": view.resumable})
        elif command == "/customize":
            action = toggle_action(rest, self.hooks) if rest else None
            for line in listed(self.hooks) if action is None else []:
                self._line(line)
            if isinstance(action, str):
                self._line(f"[error] {action}")
            elif action is not None:
                await self.dispatch(action, self.session)
        elif command == "/thinking":
            shown = "\n\n".join(t for t in view.thinking if t)
            self._line(f"[thinking] {shown}" if shown else "[error] no thinking to show")
        return True


def _json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False
