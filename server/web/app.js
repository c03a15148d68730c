// The agenthost web page: an AHP client over one WebSocket, no build step.
//
// `wire` is the only place that knows AHP's JSON shapes: it builds the
// actions the page dispatches and turns what the server sends into plain
// records the rest of the page uses. The page builds its DOM with
// textContent; the one exception is Markdown, which the server renders and
// sanitizes (POST /render: markdown-it-py with raw HTML off, then nh3), and
// which the page inserts as that sanitized HTML. The Content-Security-Policy
// (index.html) refuses inline scripts and styles besides.
//
// The token never goes in a URL: the WebSocket offers it as a subprotocol
// (`agenthost.bearer.<base64url>`, beside `agenthost`, the one the server
// selects; server/auth.py), /render gets it in its Authorization header.
// Messages written while disconnected wait in the tab's sessionStorage, so a
// reload keeps them; each leaves it once it is handed to the socket.
"use strict";

const ROOT = "ahp-root://";
const SESSION = "ahp-session:/";
const STATUS = { idle: 1, error: 2, working: 8, input: 16, read: 32, archived: 64 };
const RETRY_S = [1, 2, 4, 8, 15];
const DRAFT_MS = 400; // a draft answer goes out once typing pauses this long

const wire = {
  versions: ["1.1.0"],
  sessionUri: (id) => `${SESSION}${id}`,

  // -- actions the page dispatches ------------------------------------------------
  turnStarted: (turnId, text) => ({ type: "chat/turnStarted", turnId, message: { text } }),
  pendingSet: (kind, id, text) => ({ type: "chat/pendingMessageSet", kind, id, message: { text } }),
  pendingRemoved: (kind, id) => ({ type: "chat/pendingMessageRemoved", kind, id }),
  turnCancelled: (turnId) => ({ type: "chat/turnCancelled", turnId }),
  turnResume: (turnId) => ({ type: "chat/turnResume", turnId }),
  // `choice`: {selectedOptionId?, editedToolInput?} (AHP 1.1)
  toolCallConfirmed: (turnId, toolCallId, approved, choice = {}) =>
    ({ type: "chat/toolCallConfirmed", turnId, toolCallId, approved, ...choice }),
  toolCallResultConfirmed: (turnId, toolCallId, approved) =>
    ({ type: "chat/toolCallResultConfirmed", turnId, toolCallId, approved }),
  // `answers`: {questionId: answer} (accept), omitted for decline and cancel
  inputCompleted: (requestId, response, answers) =>
    ({ type: "chat/inputCompleted", requestId, response, ...(answers ? { answers } : {}) }),
  submitted: (kind, value) => ({ state: "submitted", value: { kind, value } }),
  // a draft of one answer, synced to the other clients (`answer` null clears it)
  inputAnswerChanged: (requestId, questionId, answer) =>
    ({ type: "chat/inputAnswerChanged", requestId, questionId, ...(answer ? { answer } : {}) }),
  titleChanged: (title) => ({ type: "session/titleChanged", title }),
  isRead: () => ({ type: "session/isReadChanged", isRead: true }),
  isArchived: (isArchived) => ({ type: "session/isArchivedChanged", isArchived }),
  customizationToggled: (id, enabled) => ({ type: "session/customizationToggled", id, enabled }),

  // -- what the server sends -------------------------------------------------------
  // A session's customizations, flattened: the host's contributions are the
  // hooks of its plugin; `required` says why one stays on.
  hooks: (list) => (list || []).flatMap((c) => [c, ...(c.children || [])])
    .filter((c) => !c.children && c.id)
    .map((c) => ({ id: c.id, name: c.name || c.id, description: c.description || "",
                   enabled: c.enabled !== false, required: (c._meta && c._meta["agenthost.required"]) || "" })),
  summary: (s) => ({
    uri: s.resource, title: s.title || "", status: s.status ?? STATUS.idle,
    turnCount: s.turnCount ?? 0, provider: s.provider || "",
  }),
  changes: (c) => Object.fromEntries(
    [["title", c.title], ["status", c.status], ["turnCount", c.turnCount]].filter(([, v]) => v !== undefined)),
  pending: (p) => ({ id: p.id, kind: p.kind, text: (p.message && p.message.text) || "" }),
  request: (r) => ({
    id: r.requestId, kind: r.kind, turnId: r.turnId, toolCallId: r.toolCallId,
    toolName: r.toolName, args: r.arguments, question: r.question, clientId: r.clientId,
  }),
  options: (list) => (list || []).map((o) => ({ id: o.id, label: o.label || o.id, kind: o.kind })),
  // chat/toolCallAuthRequired's challenge: the protected resource a token is wanted for
  auth: (a) => a ? ({
    resource: (a.resource && a.resource.resource) || "", name: (a.resource && a.resource.resource_name) || "",
    scopes: a.requiredScopes || [], reason: a.reason || "required", description: a.description || "",
  }) : null,
  tool: (t) => ({
    kind: "tool", id: t.toolCallId, name: t.displayName || t.toolName || "a tool",
    input: t.toolInput ?? t.partialInput ?? "", status: t.status || "running",
    success: t.success, confirmed: t.confirmed, reason: t.reason,
    options: wire.options(t.options), editable: t.editable === true,
    chosen: t.selectedOption ? t.selectedOption.label || t.selectedOption.id : null,
    auth: wire.auth(t.auth),
  }),
  // An InputAnswer as words: its value(s) and free text; a skipped one says so.
  answerText: (a) => {
    if (!a || a.state === "skipped") return a ? "(skipped)" : "";
    const value = a.value ? a.value.value : undefined;
    const values = Array.isArray(value) ? value.map(String) : value === undefined ? [] : [String(value)];
    return [...values, ...(a.freeformValues || [])].join(", ");
  },
  // chat/inputRequested's request: a message, its questions and the answers synced so far
  input: (r) => ({
    id: r.id, message: r.message || "", url: r.url || null,
    drafts: Object.fromEntries(Object.entries(r.answers || {})
      .map(([q, a]) => [q, { text: wire.answerText(a), live: false }]).filter(([, d]) => d.text)),
    questions: (r.questions || []).map((q) => ({
      id: q.id, kind: q.kind, message: q.message || "", title: q.title || "", required: q.required === true,
      options: wire.options(q.options), freeform: q.allowFreeformInput !== false,
    })),
  }),
  part: (p) => {
    if (p.kind === "toolCall" && p.toolCall) return wire.tool(p.toolCall);
    return { kind: p.kind === "reasoning" ? "reasoning" : "markdown", id: p.id, text: p.content || "" };
  },
  origin: (message) => (message && message.origin && message.origin.kind) || "user",
  turn: (t, state) => ({
    id: t.id,
    text: (t.message && t.message.text) || "",
    origin: wire.origin(t.message),
    parts: (t.responseParts || []).map(wire.part),
    steering: (t.steering || []).map((p) => wire.pending(p).text),
    state: state || "complete",
    error: (t.error && t.error.message) || null,
    resumable: Boolean((t.error && t.error.resumable)
      || (t.responseParts || []).some((p) => p.kind === "error" && p.resumable)),
    version: 0,
  }),
  chatState: (s) => ({
    turns: (s.turns || []).map((t) => wire.turn(t, t.state)),
    active: s.activeTurn ? wire.turn(s.activeTurn, "running") : null,
    steering: (s.steeringMessages || []).map(wire.pending),
    queued: (s.queuedMessages || []).map(wire.pending),
    requests: (s.openRequests || []).map(wire.request).filter((r) => r.kind !== "user_input"),
    inputs: (s.inputRequests || []).map(wire.input),
  }),
  // An action envelope's action as a record: {type, ...fields the page uses}.
  action: (a) => {
    const text = a.content ?? a.text ?? "";
    switch (a.type) {
      case "chat/turnStarted":
        return { type: "turnStarted", turnId: a.turnId, text: a.message && a.message.text,
                 origin: wire.origin(a.message), pendingId: a.queuedMessageId };
      case "chat/responsePart": return { type: "part", turnId: a.turnId, part: wire.part(a.part || {}) };
      case "chat/delta": return { type: "delta", turnId: a.turnId, partId: a.partId, text, kind: "markdown" };
      case "chat/reasoning":
        return { type: "delta", turnId: a.turnId, partId: a.partId, text, kind: "reasoning" };
      case "chat/turnComplete": return { type: "ended", turnId: a.turnId, state: "complete" };
      case "chat/turnCancelled": return { type: "ended", turnId: a.turnId, state: "cancelled" };
      case "chat/error":
        return { type: "ended", turnId: a.turnId, state: "error",
                 error: (a.error && a.error.message) || "the turn failed",
                 resumable: Boolean((a.error && a.error.resumable) || (a.part && a.part.resumable)) };
      case "chat/turnResume": return { type: "resumed", turnId: a.turnId };
      case "chat/toolCallStart":
        return { type: "tool", turnId: a.turnId, id: a.toolCallId,
                 change: { name: a.displayName || a.toolName || "a tool", status: "streaming" } };
      case "chat/toolCallReady":
        return { type: "tool", turnId: a.turnId, id: a.toolCallId,
                 change: { input: a.toolInput ?? "", status: a.confirmed ? "running" : "pending-confirmation",
                           options: wire.options(a.options), editable: a.editable === true } };
      case "chat/toolCallConfirmed": {
        const chosen = a.selectedOptionId ?? null;
        const edited = a.editedToolInput !== undefined ? { input: a.editedToolInput } : {};
        return { type: "tool", turnId: a.turnId, id: a.toolCallId, chosen,
                 change: a.approved ? { status: "running", confirmed: a.confirmed || "user-action", ...edited }
                   : { status: "cancelled", reason: a.reason || "denied" } };
      }
      case "chat/toolCallComplete": {
        const result = a.result || a;
        const status = a.requiresResultConfirmation ? "pending-result-confirmation" : "completed";
        return { type: "tool", turnId: a.turnId, id: a.toolCallId,
                 change: { status, success: result.success !== false } };
      }
      case "chat/toolCallAuthRequired":
        return { type: "tool", turnId: a.turnId, id: a.toolCallId, change: { status: "auth-required", auth: wire.auth(a.auth) } };
      case "chat/toolCallAuthResolved":
        return { type: "tool", turnId: a.turnId, id: a.toolCallId, change: { status: "running", auth: null } };
      case "chat/toolCallResultConfirmed":
        return { type: "tool", turnId: a.turnId, id: a.toolCallId,
                 change: a.approved ? { status: "completed" } : { status: "cancelled", reason: "result-denied" } };
      case "chat/inputRequested": return { type: "inputRequested", request: wire.input(a.request || {}) };
      case "chat/inputCompleted": return { type: "inputDone", id: a.requestId };
      case "chat/inputAnswerChanged":
        return { type: "inputAnswer", requestId: a.requestId, questionId: a.questionId,
                 text: wire.answerText(a.answer) };
      case "chat/pendingMessageSet": return { type: "pendingSet", pending: wire.pending(a.pending || a) };
      case "chat/pendingMessageRemoved":
        return { type: "pendingRemoved", id: a.pendingId ?? a.id, kind: a.kind, reason: a.reason };
      case "chat/queuedMessagesReordered": return { type: "reordered", order: a.order || [] };
      case "x-chat/requestOpened": return { type: "requestOpened", request: wire.request(a.request || {}) };
      case "x-chat/requestClosed": return { type: "requestClosed", id: a.requestId };
      case "x-chat/steeringRecorded":
        return { type: "steered", turnId: a.turnId, text: wire.pending(a.pending || {}).text };
      case "chat/truncated": return { type: "truncated" };
      case "session/titleChanged": return { type: "title", title: a.title };
      case "session/customizationToggled": {
        const decided = Array.isArray(a.enablement) ? (a.enablement.length ? a.enablement[0].enabled : true) : a.enabled;
        return { type: "customizationToggled", id: a.id, enabled: decided !== false };
      }
      case "session/customizationsChanged": return { type: "customizations", hooks: wire.hooks(a.customizations) };
      default: return { type: "other" };
    }
  },
};

// -- the connection --------------------------------------------------------------------
function randomId() {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

// The subprotocol that carries the token: its UTF-8 bytes as unpadded base64url.
function bearerProtocol(token) {
  const binary = Array.from(new TextEncoder().encode(token), (b) => String.fromCharCode(b)).join("");
  return `agenthost.bearer.${btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")}`;
}

class Connection {
  constructor(token, handlers) {
    this.handlers = handlers;
    this.nextId = 1;
    this.clientSeq = 0;
    this.ready = false;
    this.waiting = new Map();
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    this.ws = new WebSocket(`${scheme}//${location.host}/ahp`, ["agenthost", bearerProtocol(token)]);
    this.opened = new Promise((resolve, reject) => {
      this.ws.addEventListener("open", () => resolve());
      this.ws.addEventListener("close", (e) => reject(new Error(`closed (${e.code})`)));
    });
    this.opened.catch(() => {}); // a close before open is reported through `closed`
    this.ws.addEventListener("message", (e) => this.receive(e.data));
    this.ws.addEventListener("close", (e) => {
      for (const { reject } of this.waiting.values()) reject(new Error("the connection closed"));
      this.waiting.clear();
      handlers.closed(this, e);
    });
  }

  get open() { return this.ready && this.ws.readyState === WebSocket.OPEN; }

  receive(text) {
    let message;
    try { message = JSON.parse(text); } catch { return; }
    if (message.id !== undefined && message.method === undefined) {
      const waiter = this.waiting.get(message.id);
      this.waiting.delete(message.id);
      if (!waiter) return;
      if (message.error) waiter.reject(Object.assign(new Error(message.error.message), message.error));
      else waiter.resolve(message.result);
    } else if (message.method) {
      this.handlers.notification(message.method, message.params || {});
    }
  }

  call(method, params = {}) {
    if (this.ws.readyState !== WebSocket.OPEN) return Promise.reject(new Error("not connected"));
    const id = this.nextId++;
    this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    return new Promise((resolve, reject) => this.waiting.set(id, { resolve, reject }));
  }

  notify(method, params) {
    if (this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify({ jsonrpc: "2.0", method, params }));
    return true;
  }

  dispatch(channel, action) {
    this.clientSeq += 1;
    return this.notify("dispatchAction", { channel, clientSeq: this.clientSeq, action });
  }
}

// Why a WebSocket closed, in words.
function closeReason(code) {
  const reasons = {
    1000: "the connection was closed",
    1001: "the server stopped or restarted",
    1002: "the server refused the protocol",
    1006: "the connection dropped (the server or the network went away)",
    1008: "the server cut this page off (it fell behind or broke a limit)",
    1011: "the server hit an internal error",
    1012: "the server is restarting",
  };
  return reasons[code] || "the connection closed";
}

// -- Markdown, rendered and sanitized by the server ----------------------------------------
const markdown = {
  cache: new Map(), // text -> sanitized html (bounded, oldest dropped first)
  timer: null,
  busy: false,

  html(text) { return this.cache.get(text); },

  remember(text, html) {
    this.cache.set(text, html);
    if (this.cache.size > 2000) this.cache.delete(this.cache.keys().next().value);
  },

  // Render what the page shows and has no HTML for, soon (one request at a time).
  want() {
    if (this.timer === null) this.timer = setTimeout(() => this.flush(), 80);
  },

  async flush() {
    this.timer = null;
    if (this.busy || !page.state || !page.token) return;
    const texts = [...new Set(shownMarkdown().filter((t) => t && !this.cache.has(t)))];
    if (!texts.length) return;
    this.busy = true;
    try {
      const response = await fetch("/render", {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${page.token}` },
        body: JSON.stringify({ texts: texts.slice(0, 100) }),
      });
      if (response.ok) {
        const { html } = await response.json();
        texts.slice(0, 100).forEach((text, i) => this.remember(text, html[i]));
        touchTurns((turn) => turn.parts.some((p) => p.kind === "markdown" && this.cache.has(p.text)));
        renderChat();
      }
    } catch {
      // offline: the text stays plain until the next render
    } finally {
      this.busy = false;
    }
    if (shownMarkdown().some((t) => t && !this.cache.has(t))) this.want();
  },
};

function shownMarkdown() {
  const s = page.state;
  if (!s) return [];
  const turns = s.active ? [...s.turns, s.active] : s.turns;
  return turns.flatMap((t) => t.parts.filter((p) => p.kind === "markdown").map((p) => p.text));
}

// -- page state --------------------------------------------------------------------------
const page = {
  conn: null,
  token: null,
  clientId: sessionStorage.getItem("agenthost.client") || randomId(),
  sessions: new Map(), // uri -> summary
  session: null, // the open session's uri
  chat: null, // its default chat's channel
  fromSeq: 0,
  state: null, // wire.chatState(...) of the open chat
  notes: [], // lines the page says in the open chat (a rename, ...)
  outbox: loadOutbox(), // messages written while disconnected: {id, chat, text}
  views: new Map(), // turn id -> {version, node}
  retry: 0,
  retryTimer: null,
  readAsked: new Set(), // sessions the page asked to mark read, until the server says so
  menu: null, // the session whose actions menu is open
  confirmDelete: null, // the session whose deletion waits for a confirmation
  renaming: null, // the session whose title is being edited
  customizations: [], // wire.hooks(...) of the open session
};
sessionStorage.setItem("agenthost.client", page.clientId);

function loadOutbox() {
  try {
    const kept = JSON.parse(sessionStorage.getItem("agenthost.outbox") || "[]");
    return Array.isArray(kept) ? kept.filter((m) => m && m.id && m.chat && typeof m.text === "string") : [];
  } catch {
    return [];
  }
}

function saveOutbox() {
  if (page.outbox.length) sessionStorage.setItem("agenthost.outbox", JSON.stringify(page.outbox));
  else sessionStorage.removeItem("agenthost.outbox");
}

const $ = (id) => document.getElementById(id);

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else if (key === "on") for (const [event, fn] of Object.entries(value)) node.addEventListener(event, fn);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

function statusText(status) {
  if (status & STATUS.archived) return "archived";
  if ((status & (STATUS.working | STATUS.input)) === (STATUS.working | STATUS.input)) return "waiting for you";
  if (status & STATUS.working) return "working";
  if (status & STATUS.error) return "error";
  return (status & STATUS.read) ? "" : "unread";
}

function titleOf(summary) { return (summary && summary.title) || "Untitled session"; }

function notice(text) { $("notice").textContent = text; }

function link(text, online) {
  const node = $("link");
  node.textContent = text;
  node.className = `link-state ${online ? "online" : "offline"}`;
}

function touchTurns(matches) {
  const s = page.state;
  if (!s) return;
  for (const turn of s.active ? [...s.turns, s.active] : s.turns) if (matches(turn)) turn.version += 1;
}

// -- the sidebar ---------------------------------------------------------------------------
function renderSessions() {
  const query = $("search").value.trim().toLowerCase();
  const showArchived = $("show-archived").checked;
  const rows = [];
  for (const s of [...page.sessions.values()].reverse()) {
    const archived = (s.status & STATUS.archived) !== 0;
    if (archived && !showArchived && s.uri !== page.session) continue;
    const id = s.uri.slice(SESSION.length);
    if (query && !titleOf(s).toLowerCase().includes(query) && !id.startsWith(query)) continue;
    rows.push(sessionRow(s));
  }
  $("sessions").replaceChildren(...rows);
  $("sessions-empty").hidden = rows.length > 0;
  $("sessions-empty").textContent = page.sessions.size ? "No session matches." : "No sessions yet.";
}

function sessionRow(s) {
  const status = statusText(s.status);
  const classes = ["session"];
  if (s.uri === page.session) classes.push("current");
  if (!(s.status & STATUS.read)) classes.push("unread");
  if (s.status & STATUS.archived) classes.push("archived");
  if ((s.status & (STATUS.working | STATUS.input)) === (STATUS.working | STATUS.input)) classes.push("needs-input");
  else if (s.status & STATUS.working) classes.push("working");
  else if (s.status & STATUS.error) classes.push("failed");
  const row = el("li", { class: classes.join(" "), "data-session": s.uri });
  if (page.renaming === s.uri) {
    const input = el("input", { class: "rename", value: titleOf(s), "aria-label": "New title" });
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") { e.preventDefault(); finishRename(s.uri, input.value); }
      if (e.key === "Escape") { e.preventDefault(); e.stopPropagation(); finishRename(s.uri, null); }
    });
    input.addEventListener("blur", () => finishRename(s.uri, input.value));
    row.append(input);
    setTimeout(() => { input.focus(); input.select(); });
    return row;
  }
  const open = el("button", {
    type: "button", class: "open", "data-session": s.uri, title: titleOf(s),
    "aria-current": s.uri === page.session ? "true" : null, on: { click: () => openSession(s.uri) },
  }, el("span", { class: "dot", "aria-hidden": "true" }), el("span", { class: "title", text: titleOf(s) }),
  el("span", { class: "status", text: status }));
  const more = el("button", {
    type: "button", class: "icon more", "aria-label": `Actions for ${titleOf(s)}`, "aria-haspopup": "menu",
    "aria-expanded": page.menu === s.uri ? "true" : "false", text: "⋯",
    on: { click: (e) => { e.stopPropagation(); toggleMenu(s.uri); } },
  });
  row.append(open, more);
  if (page.menu === s.uri) row.append(sessionMenu(s));
  return row;
}

function sessionMenu(s) {
  const archived = (s.status & STATUS.archived) !== 0;
  const menu = el("div", { class: "session-menu", role: "menu" });
  if (page.confirmDelete === s.uri) {
    menu.append(
      el("p", { class: "confirm", text: `Delete “${titleOf(s)}” and its history?` }),
      el("button", { type: "button", role: "menuitem", class: "danger", text: "Delete for good",
                     on: { click: () => deleteSession(s.uri) } }),
      el("button", { type: "button", role: "menuitem", text: "Keep it", on: { click: () => closeMenu() } }));
    return menu;
  }
  menu.append(
    el("button", { type: "button", role: "menuitem", text: "Rename",
                   on: { click: () => { page.renaming = s.uri; closeMenu(); } } }),
    el("button", { type: "button", role: "menuitem", text: archived ? "Unarchive" : "Archive",
                   on: { click: () => { closeMenu(); archive(s.uri, !archived); } } }),
    el("button", { type: "button", role: "menuitem", class: "danger", text: "Delete",
                   on: { click: (e) => { e.stopPropagation(); page.confirmDelete = s.uri; renderSessions(); } } }));
  return menu;
}

function toggleMenu(uri) {
  page.menu = page.menu === uri ? null : uri;
  page.confirmDelete = null;
  renderSessions();
}

function closeMenu() {
  if (page.menu === null && page.confirmDelete === null && !page.renaming) return;
  page.menu = null;
  page.confirmDelete = null;
  renderSessions();
}

// -- the conversation --------------------------------------------------------------------
function renderChat() {
  const s = page.state;
  const open = s !== null;
  $("welcome").hidden = open && (s.turns.length > 0 || s.active !== null || page.outbox.length > 0);
  const summary = page.sessions.get(page.session);
  $("chat-title").textContent = open ? titleOf(summary) : "agenthost";
  document.title = open ? `${titleOf(summary)} · agenthost` : "agenthost";
  if (!open) {
    $("turns").replaceChildren();
    $("queue").replaceChildren();
    $("chat-status").textContent = "";
    updateComposer();
    return;
  }
  const scroller = $("scroller");
  const atBottom = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80;

  const nodes = [];
  const seen = new Set();
  for (const turn of s.active ? [...s.turns, s.active] : s.turns) {
    seen.add(turn.id);
    const active = turn === s.active;
    const latest = !s.active && turn === s.turns[s.turns.length - 1]; // may offer Resume
    const key = `${turn.version}:${active}:${latest}:${s.requests.length}:${s.inputs.map((r) => r.id).join(",")}`;
    let view = page.views.get(turn.id);
    if (!view || view.key !== key) {
      view = { key, node: turnNode(turn, active) };
      page.views.set(turn.id, view);
    }
    nodes.push(view.node);
  }
  for (const id of page.views.keys()) if (!seen.has(id)) page.views.delete(id);
  for (const item of page.outbox.filter((m) => m.chat === page.chat)) {
    nodes.push(el("div", { class: "msg user waiting", "data-outbox": item.id },
      el("div", { class: "stack" }, el("div", { class: "bubble", text: item.text }),
        el("div", { class: "note", text: "Not sent yet: it goes out when the connection is back" }))));
  }
  for (const line of page.notes) nodes.push(el("p", { class: "system", text: line }));
  const container = $("turns");
  const current = [...container.childNodes];
  if (current.length !== nodes.length || current.some((node, i) => node !== nodes[i])) {
    container.replaceChildren(...nodes);
  }

  const pending = [...s.steering, ...s.queued].map((p) =>
    el("li", { "data-pending": p.id, "data-kind": p.kind },
      el("span", { class: "kind", text: p.kind === "steering" ? "steering" : "queued" }),
      el("span", { class: "text", text: p.text, title: p.text }),
      el("button", { type: "button", class: "icon", "aria-label": "Remove from queue", title: "Remove",
                     text: "✕", on: { click: () => removePending(p) } })));
  $("queue").replaceChildren(...pending);

  const status = summary ? summary.status : 0;
  $("chat-status").textContent = s.active
    ? (waitsOnUser(s) ? "Waiting for you" : "Working…")
    : (status & STATUS.archived ? "Archived: unarchive it to send" : "Idle");
  updateComposer();
  if (atBottom) scroller.scrollTop = scroller.scrollHeight;
  markdown.want();
}

function turnNode(turn, active) {
  const node = el("article", { class: "turn", "data-turn": turn.id, "data-state": turn.state,
                               id: active ? "active-turn" : null });
  const user = el("div", { class: "msg user" });
  if (turn.origin === "steering") {
    // steering that became a turn of its own (the provider started one for it)
    user.classList.add("steering");
    user.append(el("div", { class: "stack" }, el("span", { class: "origin", text: "Steering" }),
      el("div", { class: "bubble", text: turn.text })));
  } else {
    user.append(el("div", { class: "bubble", text: turn.text }));
  }
  node.append(user);
  const reply = el("div", { class: "reply" });
  for (const text of turn.steering || []) reply.append(el("p", { class: "steered", text: `↳ you steered: ${text}` }));
  for (const part of turn.parts) reply.append(partNode(part, turn, active));
  if (active) {
    for (const r of page.state.requests.filter((r) => r.turnId === turn.id && !toolOf(turn, r))) {
      reply.append(requestCard(r));
    }
    for (const r of page.state.inputs) reply.append(inputCard(r));
    const last = reply.lastElementChild;
    const waiting = waitsOnUser(page.state);
    if (waiting) {
      // the agent waits on the user: no sign of it working
    } else if (!turn.parts.some((p) => p.kind === "markdown" && p.text)) {
      reply.append(el("span", { class: "typing", "aria-label": "The agent is working" }, el("i"), el("i"), el("i")));
    } else if (last && last.classList.contains("md")) {
      streamEnd(last).append(el("span", { class: "cursor", "aria-hidden": "true" }));
    }
  }
  node.append(el("div", { class: "msg assistant" }, el("div", { class: "avatar", "aria-hidden": "true", text: "AI" }), reply));
  if (turn.state === "error") {
    node.append(el("div", { class: "error-box", role: "alert" },
      el("strong", { text: "The turn failed" }), el("span", { class: "error-text", text: turn.error || "the provider gave no reason" }),
      turn.resumable && !active && page.state.active === null && page.state.turns[page.state.turns.length - 1] === turn
        ? el("button", { type: "button", class: "small", text: "Resume", on: { click: () => dispatchChat(wire.turnResume(turn.id)) } })
        : null));
  } else if (turn.state === "cancelled") {
    node.append(el("p", { class: "turn-state", text: "Stopped" }));
  }
  return node;
}

function toolOf(turn, request) {
  return request.toolCallId && ["permission", "authentication"].includes(request.kind)
    ? turn.parts.find((p) => p.kind === "tool" && p.id === request.toolCallId) : undefined;
}

// The running turn waits on the user: a question, a call to confirm, a result to confirm,
// a token a call needs.
function waitsOnUser(s) {
  const asks = (p) => p.kind === "tool"
    && ["pending-confirmation", "pending-result-confirmation", "auth-required"].includes(p.status);
  return s.inputs.length > 0 || s.requests.some((r) => r.kind !== "client_tool")
    || (s.active !== null && s.active.parts.some(asks));
}

function partNode(part, turn, active) {
  if (part.kind === "tool") return toolCard(part, turn, active);
  if (part.kind === "reasoning") {
    return el("details", { class: "reasoning" }, el("summary", { text: "Thinking" }), el("p", { text: part.text }));
  }
  const node = el("div", { class: "md", "data-part": part.id });
  const html = markdown.html(part.text);
  if (html !== undefined) {
    setSanitizedHtml(node, html);
  } else if (active && part.rendered && part.text.startsWith(part.rendered.text)) {
    // streaming: what was rendered, then the rest as text until it is rendered too, inside
    // the last block rendered, so a word cut by a delta flows on in its line
    setSanitizedHtml(node, part.rendered.html);
    streamEnd(node).append(el("span", { class: "tail", text: part.text.slice(part.rendered.text.length) }));
  } else {
    node.classList.add("plain");
    node.textContent = part.text;
  }
  if (active && html !== undefined) part.rendered = { text: part.text, html };
  return node;
}

// Where text still streaming in goes: the innermost last block of what was rendered (the
// last paragraph, list item, cell or code block), or the node itself.
const FLOWS_ON = new Set(["P", "UL", "OL", "LI", "BLOCKQUOTE", "H1", "H2", "H3", "H4", "H5", "H6",
  "TABLE", "THEAD", "TBODY", "TR", "TD", "TH", "DIV", "PRE", "CODE"]);

function streamEnd(node) {
  let at = node;
  while (at.lastElementChild && FLOWS_ON.has(at.lastElementChild.tagName)) at = at.lastElementChild;
  return at;
}

// HTML from POST /render only: markdown-it-py with raw HTML off, then nh3's allow-list.
function setSanitizedHtml(node, html) {
  const template = document.createElement("template");
  template.innerHTML = html;
  for (const pre of template.content.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    const language = code && /language-(\S+)/.exec(code.className || "");
    const copy = el("button", { type: "button", class: "small copy", text: "Copy",
      on: { click: () => copyText(copy, (code || pre).textContent) } });
    const head = el("div", { class: "code-head" }, el("span", { text: language ? language[1] : "code" }), copy);
    const block = el("div", { class: "codeblock" });
    pre.replaceWith(block);
    block.append(head, pre);
  }
  node.replaceChildren(template.content);
}

async function copyText(button, text) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Copy failed";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
}

function toolCard(part, turn, active) {
  const labels = {
    "streaming": ["preparing", ""], "pending-confirmation": ["needs approval", ""],
    "running": ["running", ""], "pending-result-confirmation": ["result to confirm", ""],
    "auth-required": ["needs authorization", ""],
    "completed": part.success === false ? ["failed", "failed"] : ["done", "done"],
    "cancelled": [part.reason === "denied" ? "denied" : "cancelled", "denied"],
  };
  const [label, tone] = labels[part.status] || [part.status, ""];
  const card = el("div", { class: "card tool", "data-tool": part.id },
    el("div", { class: "card-head" }, el("span", { "aria-hidden": "true", text: "⚙" }),
      el("span", { class: "card-title", text: part.name }), el("span", { class: `badge ${tone}`, text: label })));
  const asking = active && part.status === "pending-confirmation";
  let edited = null;
  if (asking && part.editable) {
    edited = el("textarea", { class: "tool-input", rows: 3, "aria-label": `Input for ${part.name}`, spellcheck: "false" });
    edited.value = part.input || "{}";
    card.append(edited);
  } else if (part.input && part.input !== "{}") {
    card.append(el("pre", { text: part.input }));
  }
  if (part.chosen) card.append(el("p", { class: "chosen", text: `Chosen: ${part.chosen}` }));
  if (asking) {
    card.classList.add("request");
    const decide = (approved, optionId) => confirmTool(turn.id, part, approved, optionId, edited);
    const buttons = part.options.length
      ? part.options.map((o) => el("button", { type: "button", class: o.kind === "approve" ? "primary small" : "small",
          "data-option": o.id, text: o.label, on: { click: () => decide(o.kind === "approve", o.id) } }))
      : [el("button", { type: "button", class: "primary small", text: "Approve", on: { click: () => decide(true) } }),
         el("button", { type: "button", class: "small", text: "Deny", on: { click: () => decide(false) } })];
    card.append(el("div", { class: "actions" }, ...buttons));
  } else if (active && part.status === "auth-required" && part.auth) {
    card.classList.add("request");
    card.append(authForm(part.auth));
  } else if (active && part.status === "pending-result-confirmation") {
    card.classList.add("request");
    const decide = (approved) => dispatchChat(wire.toolCallResultConfirmed(turn.id, part.id, approved));
    card.append(el("div", { class: "actions" },
      el("span", { class: "hint", text: "Let the model see this result?" }),
      el("button", { type: "button", class: "primary small", text: "Share result", on: { click: () => decide(true) } }),
      el("button", { type: "button", class: "small", text: "Keep it back", on: { click: () => decide(false) } })));
  }
  return card;
}

// A tool call waits for a token for a protected resource: what it is, and a field for the
// token, sent with `authenticate` (a request, never a dispatched action: it is not kept in
// the offline queue, and the field is cleared as it goes).
function authForm(auth) {
  const form = el("form", { class: "auth", "data-resource": auth.resource });
  const scopes = auth.scopes.length ? ` (scopes: ${auth.scopes.join(", ")})` : "";
  form.append(el("p", { class: "hint", text: `Needs authorization for ${auth.name || auth.resource}${scopes}` }));
  if (auth.description) form.append(el("p", { class: "hint", text: auth.description }));
  const token = el("input", { type: "password", name: "token", autocomplete: "off",
    "aria-label": `Token for ${auth.resource}`, placeholder: "Token" });
  form.append(el("div", { class: "actions" }, token,
    el("button", { type: "submit", class: "primary small", text: "Authorize" })));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const value = token.value;
    if (!value) return;
    token.value = "";
    authorize(auth.resource, value);
  });
  return form;
}

async function authorize(resource, token) {
  notice("");
  if (!page.conn || !page.conn.open) { notice("Not connected: try again once the connection is back."); return; }
  try {
    await page.conn.call("authenticate", { channel: page.chat || ROOT, resource, token });
  } catch (e) {
    notice(`Could not authorize: ${e.message}`);
  }
}

// An input request as a form: one field per question (text, number, yes/no, one or several
// of its choices, with free text where the question takes it); submit accepts, decline declines.
function inputCard(r) {
  const card = el("form", { class: "card request input", "data-input": r.id });
  const questions = r.questions.length ? r.questions : [{ id: "answer", kind: "text", message: r.message, options: [] }];
  const title = r.message || (questions.length === 1 ? questions[0].message : "") || "The agent asks";
  card.append(el("div", { class: "card-head" }, el("span", { class: "card-title", text: title })));
  if (r.url) card.append(el("p", {}, el("a", { href: r.url, target: "_blank", rel: "noopener noreferrer", text: r.url })));
  const readers = questions.map((q) => questionField(card, q, questions.length > 1 || q.message !== title, r));
  const drafting = draftSender(r, readers);
  card.addEventListener("input", drafting.changed);
  card.addEventListener("change", drafting.changed);
  const submit = (e) => {
    e.preventDefault();
    drafting.stop();
    const answers = {};
    for (const [q, read] of readers) {
      const value = read();
      if (value !== null) answers[q.id] = value;
    }
    if (questions.some((q) => q.required && !(q.id in answers))) { notice("Answer the questions marked required."); return; }
    if (!Object.keys(answers).length) return;
    dispatchChat(wire.inputCompleted(r.id, "accept", answers));
  };
  card.addEventListener("submit", submit);
  card.append(el("div", { class: "actions" },
    el("button", { type: "submit", class: "primary small", text: "Answer" }),
    el("button", { type: "button", class: "small", text: "Decline", on: { click: () => dispatchChat(wire.inputCompleted(r.id, "decline")) } })));
  return card;
}

// Drafts go out as the user types (chat/inputAnswerChanged, once typing pauses for
// DRAFT_MS), one question at a time, only when the answer changed; an emptied field
// clears its draft. The other clients show them (showDraft).
function draftSender(r, readers) {
  const timers = new Map();
  const sent = new Map();
  const flush = (q, read) => {
    timers.delete(q.id);
    const value = read();
    const answer = value === null ? null : { ...value, state: "draft" };
    const key = JSON.stringify(answer);
    if (sent.get(q.id) === key || (answer === null && !sent.has(q.id))) return;
    sent.set(q.id, key);
    dispatchChat(wire.inputAnswerChanged(r.id, q.id, answer));
  };
  return {
    changed: (e) => {
      const box = e.target.closest && e.target.closest("fieldset.question");
      const found = box && readers.find(([q]) => q.id === box.dataset.question);
      if (!found) return;
      const [q, read] = found;
      clearTimeout(timers.get(q.id));
      timers.set(q.id, setTimeout(() => flush(q, read), DRAFT_MS));
    },
    stop: () => { for (const timer of timers.values()) clearTimeout(timer); timers.clear(); },
  };
}

// Another client's draft answer to one question, under it (textContent only). A
// snapshot's synced answers say nothing of whose they are: "Draft so far".
function draftLine(r, questionId) {
  const draft = r.drafts[questionId];
  const label = draft && draft.live ? "Another client's draft" : "Draft so far";
  return el("p", { class: "draft", "data-draft": questionId, hidden: !draft,
                   text: draft ? `${label}: ${draft.text}` : "" });
}

function showDraft(r, questionId) {
  const card = document.querySelector(`form[data-input="${CSS.escape(r.id)}"]`);
  const line = card && card.querySelector(`[data-draft="${CSS.escape(questionId)}"]`);
  if (line) line.replaceWith(draftLine(r, questionId));
}

// One question's field in `form`; returns [question, read], read giving its answer or null.
function questionField(form, q, labelled, r) {
  const name = `q-${q.id}`;
  const box = el("fieldset", { class: "question", "data-question": q.id });
  if (labelled) box.append(el("legend", { text: `${q.message}${q.required ? " (required)" : ""}` }));
  form.append(box);
  form.append(draftLine(r, q.id));
  const textField = (type, label) => {
    const input = el("input", { type, name, "aria-label": label, placeholder: "Your answer" });
    box.append(input);
    return input;
  };
  if (q.kind === "boolean") {
    const yes = el("input", { type: "checkbox", name });
    box.append(el("label", {}, yes, " Yes"));
    return [q, () => wire.submitted("boolean", yes.checked)];
  }
  if (q.kind === "number" || q.kind === "integer") {
    const input = textField("number", `Answer: ${q.message}`);
    return [q, () => (input.value === "" ? null : wire.submitted("number", Number(input.value)))];
  }
  if (q.kind === "single-select" || q.kind === "multi-select") {
    const several = q.kind === "multi-select";
    const boxes = q.options.map((o) => {
      const input = el("input", { type: several ? "checkbox" : "radio", name, value: o.id });
      box.append(el("label", { class: "choice" }, input, ` ${o.label}`));
      return input;
    });
    const other = q.freeform ? textField("text", `Other answer: ${q.message}`) : null;
    if (other) other.placeholder = "Or write your own";
    return [q, () => {
      const picked = boxes.filter((b) => b.checked).map((b) => b.value);
      const free = other && other.value.trim();
      if (several && (picked.length || free)) {
        return { state: "submitted", value: { kind: "selected-many", value: picked, ...(free ? { freeformValues: [free] } : {}) } };
      }
      if (picked.length) return wire.submitted("selected", picked[0]);
      return free ? wire.submitted("text", free) : null;
    }];
  }
  const input = textField("text", `Answer: ${q.message}`);
  return [q, () => (input.value.trim() ? wire.submitted("text", input.value) : null)];
}

function requestCard(r) {
  const card = el("div", { class: "card request", "data-request": r.id });
  if (r.kind === "permission") {
    card.append(el("div", { class: "card-head" }, el("span", { class: "card-title", text: `Allow ${r.toolName || "a tool"}?` })));
    if (r.args && r.args !== "{}") card.append(el("pre", { text: r.args }));
    card.append(el("div", { class: "actions" },
      el("button", { type: "button", class: "primary small", text: "Approve", on: { click: () => confirmRequest(r, true) } }),
      el("button", { type: "button", class: "small", text: "Deny", on: { click: () => confirmRequest(r, false) } })));
  } else {
    card.append(el("div", { class: "card-head" },
      el("span", { class: "card-title", text: `Waiting for ${r.clientId || "a client"} to run ${r.toolName || "a tool"}` })));
  }
  return card;
}

const narrow = window.matchMedia("(max-width: 760px)");

function updateComposer() {
  const s = page.state;
  const running = s !== null && s.active !== null;
  $("steer").hidden = !running;
  $("cancel").hidden = !running;
  $("send").textContent = running ? "Queue" : "Send";
  $("message").placeholder = narrow.matches ? (running ? "Queue or steer" : "Message")
    : s === null ? "Message a new session (Enter to send, Shift+Enter for a new line)"
      : running ? "Queue a message, or steer the running turn (Ctrl+Enter)"
        : "Message (Enter to send, Shift+Enter for a new line)";
}

// -- reducing what the server sends ----------------------------------------------------------
function onChatAction(envelope) {
  if (envelope.rejectionReason !== undefined) {
    if (!envelope.origin || envelope.origin.clientId === page.clientId) notice(refusal(envelope));
    return;
  }
  if (typeof envelope.serverSeq === "number" && envelope.serverSeq <= page.fromSeq) return;
  const s = page.state;
  const a = wire.action(envelope.action || {});
  const turn = s.active && s.active.id === a.turnId ? s.active : null;
  const dropPending = (id) => {
    s.queued = s.queued.filter((p) => p.id !== id);
    s.steering = s.steering.filter((p) => p.id !== id);
  };
  switch (a.type) {
    case "turnStarted":
      if (s.active) { s.active.state = "complete"; s.turns.push(s.active); }
      s.active = { id: a.turnId, text: a.text || "", origin: a.origin, parts: [], steering: [],
                   state: "running", error: null, version: 0 };
      if (a.pendingId) dropPending(a.pendingId);
      markWorking(true);
      break;
    case "part":
      if (turn) { turn.parts.push(a.part); turn.version += 1; }
      break;
    case "delta": {
      if (!turn) break;
      let part = turn.parts.find((p) => p.id === a.partId);
      if (!part) { part = { id: a.partId, kind: a.kind, text: "" }; turn.parts.push(part); }
      part.text += a.text;
      turn.version += 1;
      break;
    }
    case "tool": {
      if (!turn) break;
      let part = turn.parts.find((p) => p.kind === "tool" && p.id === a.id);
      if (!part) { part = { kind: "tool", id: a.id, name: "a tool", input: "", status: "streaming" }; turn.parts.push(part); }
      Object.assign(part, a.change);
      if (a.chosen) part.chosen = (part.options || []).find((o) => o.id === a.chosen)?.label || a.chosen;
      turn.version += 1;
      break;
    }
    case "steered":
      if (turn) { turn.steering.push(a.text); turn.version += 1; }
      break;
    case "ended":
      if (turn) {
        turn.state = a.state;
        turn.error = a.error || null;
        turn.resumable = a.resumable === true;
        turn.version += 1;
        s.turns.push(turn);
        s.active = null;
      }
      s.requests = s.requests.filter((r) => r.turnId !== a.turnId);
      s.inputs = []; // a turn's end ends what it asked
      markWorking(false);
      break;
    case "resumed": {
      const last = s.turns[s.turns.length - 1];
      if (s.active || !last || last.id !== a.turnId) break;
      s.turns.pop();
      Object.assign(last, { state: "running", error: null, resumable: false });
      last.version += 1;
      s.active = last;
      markWorking(true);
      break;
    }
    case "pendingSet": {
      const list = a.pending.kind === "steering" ? s.steering : s.queued;
      const at = list.findIndex((p) => p.id === a.pending.id);
      if (at >= 0) list[at] = a.pending; else list.push(a.pending);
      break;
    }
    case "pendingRemoved": dropPending(a.id); break;
    case "reordered": {
      const byId = new Map(s.queued.map((p) => [p.id, p]));
      const listed = a.order.map((id) => byId.get(id)).filter(Boolean);
      s.queued = [...listed, ...s.queued.filter((p) => !a.order.includes(p.id))];
      break;
    }
    case "requestOpened": if (a.request.kind !== "user_input") s.requests.push(a.request); break;
    case "inputRequested": {
      const at = s.inputs.findIndex((r) => r.id === a.request.id);
      if (at >= 0) s.inputs[at] = a.request; else s.inputs.push(a.request);
      break;
    }
    case "inputDone": s.inputs = s.inputs.filter((r) => r.id !== a.id); break;
    case "inputAnswer": {
      // Another client's draft is shown beside the question, in place: the form
      // is not rebuilt, so what this user is typing stays. Our own echo is not shown.
      const r = s.inputs.find((x) => x.id === a.requestId);
      if (!r || (envelope.origin && envelope.origin.clientId === page.clientId)) return;
      if (a.text) r.drafts[a.questionId] = { text: a.text, live: true }; else delete r.drafts[a.questionId];
      showDraft(r, a.questionId);
      return;
    }
    case "requestClosed": s.requests = s.requests.filter((r) => r.id !== a.id); break;
    case "truncated": openChat(page.chat); return;
    default: return;
  }
  renderChat();
}

function refusal(envelope) {
  const what = {
    "chat/turnStarted": "Could not send", "chat/pendingMessageSet": "Could not queue",
    "chat/pendingMessageRemoved": "Could not remove the message", "chat/turnCancelled": "Could not stop the turn",
    "chat/toolCallConfirmed": "Could not answer", "chat/inputCompleted": "Could not answer",
    "chat/toolCallResultConfirmed": "Could not answer", "chat/turnResume": "Could not resume",
    "session/titleChanged": "Could not rename", "session/isArchivedChanged": "Could not archive",
    "session/customizationToggled": "Could not change it",
  }[envelope.action && envelope.action.type] || "Refused";
  return `${what}: ${envelope.rejectionReason}`;
}

// The open session's status as its chat shows it, until the server's summary says more.
function markWorking(working) {
  const summary = page.sessions.get(page.session);
  if (!summary) return;
  summary.status = working ? (summary.status | STATUS.working) & ~STATUS.idle
    : (summary.status & ~(STATUS.working | STATUS.input)) | STATUS.idle;
  renderSessions();
}

function onSummary(summary) {
  const previous = page.sessions.get(summary.uri);
  page.sessions.set(summary.uri, { ...(previous || {}), ...summary });
  if (summary.status & STATUS.read) page.readAsked.delete(summary.uri);
  markReadIfViewed();
  renderSessions();
  if (summary.uri === page.session) renderChat();
}

// Unread is cleared for the session the user is looking at.
function markReadIfViewed() {
  const s = page.sessions.get(page.session);
  if (!s || (s.status & STATUS.read) || document.visibilityState !== "visible") return;
  if (page.readAsked.has(s.uri) || !page.conn || !page.conn.open) return;
  page.readAsked.add(s.uri);
  page.conn.dispatch(s.uri, wire.isRead());
}

function onNotification(method, params) {
  if (method === "action") {
    if (params.channel === page.chat && page.state) onChatAction(params);
    else if (params.channel === page.session) {
      if (params.rejectionReason !== undefined) {
        if (!params.origin || params.origin.clientId === page.clientId) notice(refusal(params));
        renderCustomizations(); // a refused toggle's switch goes back
        return;
      }
      const a = wire.action(params.action || {});
      const s = page.sessions.get(page.session);
      if (a.type === "title" && s) { s.title = a.title; renderSessions(); renderChat(); }
      if (a.type === "customizationToggled") {
        page.customizations = page.customizations.map((c) => (c.id === a.id ? { ...c, enabled: a.enabled } : c));
        renderCustomizations();
      }
      if (a.type === "customizations") { page.customizations = a.hooks; renderCustomizations(); }
    }
  } else if (method === "root/sessionAdded") {
    onSummary(wire.summary(params.summary || {}));
  } else if (method === "root/sessionSummaryChanged") {
    const previous = page.sessions.get(params.session);  // changes carry only what changed
    if (previous) onSummary({ ...previous, ...wire.changes(params.changes || {}), uri: params.session });
  } else if (method === "root/sessionRemoved") {
    page.sessions.delete(params.resource);
    if (params.resource === page.session) closeChat();
    renderSessions();
  }
}

// -- what the user does ----------------------------------------------------------------------
async function refreshSessions() {
  const items = [];
  let cursor;
  do {
    const listed = await page.conn.call("listSessions", cursor ? { limit: 1000, cursor } : { limit: 1000 });
    items.push(...listed.items);
    cursor = listed.nextCursor;
  } while (cursor);
  page.sessions = new Map(items.map((i) => [i.resource, wire.summary(i)]));
  renderSessions();
}

async function newSession() {
  if (!page.conn || !page.conn.open) { notice("Not connected: the session can be created once the connection is back."); return; }
  const uri = wire.sessionUri(randomId());
  try {
    const created = await page.conn.call("createSession", { channel: uri });
    onSummary(wire.summary({ resource: uri, ...created.state }));
    await openSession(uri);
    $("message").focus();
  } catch (error) {
    notice(`Could not create a session: ${error.message}`);
  }
}

async function openSession(uri) {
  closeNav();
  const previous = [page.session, page.chat];
  try {
    const subscribed = await page.conn.call("subscribe", { channel: uri });
    page.session = uri;
    sessionStorage.setItem("agenthost.session", uri);
    page.notes = [];
    notice("");
    page.customizations = wire.hooks(subscribed.snapshot.state.customizations);
    renderCustomizations();
    await openChat(subscribed.snapshot.state.defaultChat);
  } catch (error) {
    notice(`Could not open the session: ${error.message}`);
    return;
  }
  for (const channel of previous) {
    if (channel && channel !== page.session && channel !== page.chat) page.conn.notify("unsubscribe", { channel });
  }
  markReadIfViewed();
  renderSessions();
}

async function openChat(chat) {
  page.chat = chat;
  const subscribed = await page.conn.call("subscribe", { channel: chat });
  page.fromSeq = subscribed.snapshot.fromSeq || 0;
  page.state = wire.chatState(subscribed.snapshot.state);
  page.views.clear();
  renderChat();
  $("scroller").scrollTop = $("scroller").scrollHeight;
}

// The open session's customizations: a switch each; one that must stay on says why.
function renderCustomizations() {
  $("customize").hidden = !page.session || !page.customizations.length;
  $("customization-list").replaceChildren(...page.customizations.map((c) => {
    const box = el("input", { type: "checkbox", role: "switch", "data-id": c.id, checked: c.enabled,
                              disabled: Boolean(c.required), title: c.required ? `Always on: ${c.required}` : null,
                              on: { change: (e) => toggleCustomization(c.id, e.target.checked) } });
    return el("li", { "data-id": c.id },
      el("label", {}, box, c.name),
      el("p", { class: "why muted", text: c.required ? `${c.description} Always on: ${c.required}.` : c.description }));
  }));
}

function toggleCustomization(id, enabled) {
  if (!page.conn || !page.conn.open || !page.conn.dispatch(page.session, wire.customizationToggled(id, enabled))) {
    notice("Not connected: nothing was changed.");
    renderCustomizations(); // the switch goes back to what the session has
  }
}

function showCustomizations(shown) {
  $("customizations").hidden = !shown;
  if (shown) { renderCustomizations(); $("customizations-close").focus(); } else $("message").focus();
}

function closeChat() {
  page.session = null;
  page.customizations = [];
  renderCustomizations();
  page.chat = null;
  page.state = null;
  page.views.clear();
  sessionStorage.removeItem("agenthost.session");
  renderChat();
}

function dispatchChat(action) {
  return page.conn !== null && page.conn.open && page.conn.dispatch(page.chat, action);
}

function send(text) {
  notice("");
  const item = { id: randomId(), chat: page.chat, text };
  if (!deliver(item)) {
    page.outbox.push(item);
    saveOutbox();
    renderChat();
  }
}

// The first message with no session open starts a session for it.
async function sendInNewSession(text) {
  await newSession();
  if (page.state) submit(text, false);
}

// Send one message now (a turn when the chat is idle, else queued); false when offline.
function deliver(item) {
  if (!page.conn || !page.conn.open) return false;
  const idle = item.chat === page.chat && page.state && !page.state.active;
  const action = idle ? wire.turnStarted(item.id, item.text) : wire.pendingSet("queued", item.id, item.text);
  return page.conn.dispatch(item.chat, action);
}

function flushOutbox() {
  const left = page.outbox.filter((item) => !deliver(item));
  const sent = page.outbox.length - left.length;
  page.outbox = left;
  saveOutbox();
  if (sent) renderChat();
}

function steer(text) {
  notice("");
  if (!dispatchChat(wire.pendingSet("steering", randomId(), text))) notice("Not connected: steering needs the connection.");
}

function removePending(p) {
  notice("");
  if (!dispatchChat(wire.pendingRemoved(p.kind, p.id))) notice("Not connected: try again once the connection is back.");
}

function confirmTool(turnId, part, approved, optionId, edited) {
  const choice = optionId ? { selectedOptionId: optionId } : {};
  if (approved && edited && edited.value.trim() !== (part.input || "{}").trim()) {
    try {
      JSON.parse(edited.value);
    } catch {
      notice("The tool's input must stay JSON: fix it, or approve it as it was.");
      return;
    }
    choice.editedToolInput = edited.value;
  }
  dispatchChat(wire.toolCallConfirmed(turnId, part.id, approved, choice));
}

// A permission the page knows only from x-chat/requestOpened (no tool call part of its own).
function confirmRequest(r, approved) {
  dispatchChat(wire.toolCallConfirmed(r.turnId, r.toolCallId || r.id, approved));
}

function cancelTurn() {
  if (page.state && page.state.active) dispatchChat(wire.turnCancelled(page.state.active.id));
}

function finishRename(uri, title) {
  if (page.renaming !== uri) return;
  page.renaming = null;
  renderSessions();
  if (title !== null && title.trim()) rename(uri, title.trim());
}

function rename(uri, title) {
  if (!page.conn || !page.conn.open || !page.conn.dispatch(uri, wire.titleChanged(title))) {
    notice("Not connected: renaming needs the connection.");
    return false;
  }
  const s = page.sessions.get(uri);
  if (s) { s.title = title; renderSessions(); renderChat(); }
  return true;
}

function archive(uri, archived) {
  if (!page.conn || !page.conn.open || !page.conn.dispatch(uri, wire.isArchived(archived))) {
    notice("Not connected: archiving needs the connection.");
  }
}

async function deleteSession(uri) {
  closeMenu();
  try {
    await page.conn.call("disposeSession", { channel: uri });
    page.sessions.delete(uri);
    if (uri === page.session) closeChat();
    renderSessions();
  } catch (error) {
    notice(`Could not delete the session: ${error.message}`);
  }
}

// A line the user typed: a local command (unless the session turned the
// host's commands off: then the model gets it), or a message.
function submit(text, steering) {
  const commandsOff = page.customizations.some((c) => c.id === "local_command" && !c.enabled);
  const command = commandsOff ? null : /^\/(\w+)\s*(.*)$/s.exec(text.trim());
  if (command && command[1] === "help") { showHelp(true); return; }
  if (command && command[1] === "rename") {
    if (!command[2].trim()) { notice("/rename needs a title: /rename Q3 report"); return; }
    if (rename(page.session, command[2].trim())) {
      page.notes.push(`Renamed this session “${command[2].trim()}”`);
      renderChat();
    }
    return;
  }
  if (steering) steer(text);
  else send(text);
}

// -- connecting -------------------------------------------------------------------------------
function connect(token) {
  clearTimeout(page.retryTimer);
  page.token = token;
  const first = page.conn === null;
  if (first) {
    $("connection").textContent = "Connecting…";
    $("connection").classList.remove("refused");
  }
  const conn = new Connection(token, { notification: onNotification, closed: onClosed });
  page.conn = conn;
  conn.opened.then(async () => {
    const result = await conn.call("initialize", {
      protocolVersions: wire.versions, clientId: page.clientId, initialSubscriptions: [ROOT],
    });
    conn.ready = true;
    page.retry = 0;
    sessionStorage.setItem("agenthost.token", token);
    $("connection").textContent = `Connected (AHP ${result.protocolVersion})`;
    link("Connected", true);
    $("banner").hidden = true;
    $("login").hidden = true;
    $("app").hidden = false;
    page.readAsked.clear(); // what was asked before may never have arrived
    await refreshSessions();
    const wanted = page.session || sessionStorage.getItem("agenthost.session");
    if (wanted && page.sessions.has(wanted)) await openSession(wanted);
    else if (page.session) closeChat();
    flushOutbox();
    renderChat();
  }).catch((error) => {
    if (conn.ws.readyState === WebSocket.OPEN) link(`Could not start: ${error.message}`, false);
  });
}

function onClosed(conn, event) {
  if (page.conn !== conn) return;
  if (!conn.ready && $("app").hidden) {
    // never in: a wrong token, no server at all, or a server that could not take it now
    // (a browser does not say why an upgrade failed: /render, which wants the same token, does)
    page.conn = null;
    $("login").hidden = false;
    const token = page.token;
    fetch("/render", { method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` },
                       body: JSON.stringify({ texts: [] }) }).then(
      (response) => {
        if (response.status === 401) {
          sessionStorage.removeItem("agenthost.token");
          refused("Connection refused: check the token");
        } else {
          retrySignIn(token, "The server did not take the connection.");
        }
      },
      () => retrySignIn(token, "Cannot reach the server: is agenthost serve running?"));
    return;
  }
  conn.ready = false;
  const wait = RETRY_S[Math.min(page.retry, RETRY_S.length - 1)];
  page.retry += 1;
  const why = conn === page.conn && event.code ? `Disconnected (${event.code}): ${closeReason(event.code)}.` : "Disconnected.";
  const kept = page.outbox.length ? " Messages you send meanwhile are kept and sent then." : " What you send meanwhile is kept and sent then.";
  $("banner-text").textContent = `${why} Reconnecting in ${wait} s…${kept}`;
  $("banner").hidden = false;
  link("Offline", false);
  page.retryTimer = setTimeout(() => connect(page.token), wait * 1000);
  renderChat();
}

// Try the same token again later (what was written offline waits for it).
function retrySignIn(token, why) {
  const wait = RETRY_S[Math.min(page.retry, RETRY_S.length - 1)];
  page.retry += 1;
  refused(`${why} Trying again in ${wait} s…`);
  clearTimeout(page.retryTimer);
  page.retryTimer = setTimeout(() => { if (page.conn === null) connect(token); }, wait * 1000);
}

function refused(text) {
  $("connection").textContent = text;
  $("connection").classList.add("refused");
  $("token").select();
}

function signOut() {
  sessionStorage.removeItem("agenthost.token");
  sessionStorage.removeItem("agenthost.session");
  sessionStorage.removeItem("agenthost.outbox"); // another identity could not send them
  location.reload();
}

// -- the frame: navigation, help, keys --------------------------------------------------------
function openNav() { $("app").classList.add("nav-open"); $("menu").setAttribute("aria-expanded", "true"); }
function closeNav() { $("app").classList.remove("nav-open"); $("menu").setAttribute("aria-expanded", "false"); }

function showHelp(shown) {
  $("help").hidden = !shown;
  if (shown) $("help-close").focus();
  else $("message").focus();
}

function typing(target) {
  return target instanceof HTMLElement && (target.isContentEditable || ["INPUT", "TEXTAREA"].includes(target.tagName));
}

function onKey(e) {
  if (e.key === "Escape") {
    if (!$("help").hidden) { e.preventDefault(); showHelp(false); return; }
    if (!$("customizations").hidden) { e.preventDefault(); showCustomizations(false); return; }
    if (page.menu || page.confirmDelete) { e.preventDefault(); closeMenu(); return; }
    if ($("app").classList.contains("nav-open")) { e.preventDefault(); closeNav(); return; }
    if (page.state && page.state.active) { e.preventDefault(); cancelTurn(); }
    return;
  }
  if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === "k") {
    e.preventDefault();
    if (narrow.matches) openNav();
    $("search").focus();
    $("search").select();
  } else if (e.altKey && e.key.toLowerCase() === "n") {
    e.preventDefault();
    newSession();
  } else if (e.key === "?" && !typing(e.target)) {
    e.preventDefault();
    showHelp(true);
  }
}

function growComposer() {
  const box = $("message");
  box.style.height = "auto";
  box.style.height = `${Math.min(box.scrollHeight, 192)}px`;
}

function start() {
  $("login").addEventListener("submit", (e) => {
    e.preventDefault();
    page.conn = null;
    connect($("token").value.trim());
  });
  $("new-session").addEventListener("click", newSession);
  $("search").addEventListener("input", renderSessions);
  $("search").addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      const first = $("sessions").querySelector("button.open");
      if (first) { e.preventDefault(); first.click(); }
    }
  });
  $("show-archived").addEventListener("change", renderSessions);
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("message").value;
    if (!text.trim()) return;
    $("message").value = "";
    growComposer();
    if (page.state) submit(text, false);
    else sendInNewSession(text);
  });
  $("message").addEventListener("input", growComposer);
  $("message").addEventListener("keydown", (e) => {
    if (e.key !== "Enter" || e.shiftKey || e.isComposing) return;
    e.preventDefault();
    if ((e.ctrlKey || e.metaKey) && page.state && page.state.active) $("steer").click();
    else $("composer").requestSubmit();
  });
  $("steer").addEventListener("click", () => {
    const text = $("message").value;
    if (!text.trim() || !page.state) return;
    $("message").value = "";
    growComposer();
    submit(text, true);
  });
  $("cancel").addEventListener("click", cancelTurn);
  $("reconnect").addEventListener("click", () => connect(page.token));
  $("menu").addEventListener("click", () => ($("app").classList.contains("nav-open") ? closeNav() : openNav()));
  $("scrim").addEventListener("click", closeNav);
  $("help-button").addEventListener("click", () => showHelp(true));
  $("help-close").addEventListener("click", () => showHelp(false));
  $("help").addEventListener("click", (e) => { if (e.target === $("help")) showHelp(false); });
  $("customize").addEventListener("click", () => showCustomizations(true));
  $("customizations-close").addEventListener("click", () => showCustomizations(false));
  $("customizations").addEventListener("click", (e) => { if (e.target === $("customizations")) showCustomizations(false); });
  $("sign-out").addEventListener("click", signOut);
  document.addEventListener("keydown", onKey);
  document.addEventListener("click", (e) => { if (!e.target.closest(".session-menu, .more")) closeMenu(); });
  document.addEventListener("visibilitychange", markReadIfViewed);
  narrow.addEventListener("change", updateComposer);
  renderChat();
  // A token in the fragment (#token=...) is used once and removed from the address bar;
  // it is kept for this tab (sessionStorage), so a reload stays signed in.
  const fragment = new URLSearchParams(location.hash.slice(1));
  const token = fragment.get("token") || sessionStorage.getItem("agenthost.token");
  if (fragment.has("token")) history.replaceState(null, "", location.pathname + location.search);
  if (token) connect(token);
  else $("token").focus();
}

start();
