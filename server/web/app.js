// The agenthost web page: an AHP client over one WebSocket, no build step.
//
// `wire` is the only place that knows AHP's JSON shapes: it builds the
// actions the page dispatches and turns what the server sends into plain
// records the rest of the page uses. Everything is rendered with textContent
// (never innerHTML), so nothing a model or a user writes becomes markup.
"use strict";

const ROOT = "ahp-root://";

const wire = {
  versions: ["1.1.0"],
  sessionUri: (id) => `ahp-session:/${id}`,

  // -- actions the page dispatches ------------------------------------------------
  turnStarted: (turnId, text) => ({ type: "chat/turnStarted", turnId, message: { text } }),
  pendingSet: (kind, id, text) => ({ type: "chat/pendingMessageSet", kind, id, message: { text } }),
  pendingRemoved: (kind, id) => ({ type: "chat/pendingMessageRemoved", kind, id }),
  turnCancelled: (turnId) => ({ type: "chat/turnCancelled", turnId }),
  toolCallConfirmed: (turnId, toolCallId, approved) =>
    ({ type: "chat/toolCallConfirmed", turnId, toolCallId, approved }),
  inputCompleted: (requestId, answer) => ({ type: "chat/inputCompleted", requestId, answer }),

  // -- what the server sends -------------------------------------------------------
  summary: (s) => ({
    uri: s.resource, title: s.title || "", status: s.status ?? 0, turnCount: s.turnCount,
  }),
  pending: (p) => ({ id: p.id, kind: p.kind, text: (p.message && p.message.text) || "" }),
  request: (r) => ({
    id: r.requestId, kind: r.kind, turnId: r.turnId, toolCallId: r.toolCallId,
    toolName: r.toolName, args: r.arguments, question: r.question,
  }),
  part: (p) => ({ id: p.id, kind: p.kind, text: p.content || "" }),
  turn: (t, state) => ({
    id: t.id, text: (t.message && t.message.text) || "",
    parts: (t.responseParts || []).map(wire.part), state,
  }),
  chatState: (s) => ({
    turns: (s.turns || []).map((t) => wire.turn(t, t.state)),
    active: s.activeTurn ? wire.turn(s.activeTurn, "running") : null,
    steering: (s.steeringMessages || []).map(wire.pending),
    queued: (s.queuedMessages || []).map(wire.pending),
    requests: (s.openRequests || []).map(wire.request),
  }),
  // An action envelope's action as a record: {type, ...fields the page uses}.
  action: (a) => {
    switch (a.type) {
      case "chat/turnStarted":
        return { type: "turnStarted", turnId: a.turnId, text: a.message && a.message.text,
                 pendingId: a.queuedMessageId };
      case "chat/responsePart":
        return { type: "part", turnId: a.turnId, part: wire.part(a.part || {}) };
      case "chat/delta":
        return { type: "delta", turnId: a.turnId, partId: a.partId, text: a.text ?? a.content ?? "" };
      case "chat/turnComplete": return { type: "ended", turnId: a.turnId, state: "complete" };
      case "chat/turnCancelled": return { type: "ended", turnId: a.turnId, state: "cancelled" };
      case "chat/error":
        return { type: "ended", turnId: a.turnId,
                 state: `error: ${(a.error && a.error.message) || "the turn failed"}` };
      case "chat/toolCallStart":
        return { type: "part", turnId: a.turnId,
                 part: { id: a.toolCallId, kind: "tool", text: `[tool: ${a.displayName || a.toolName}]` } };
      case "chat/pendingMessageSet":
        return { type: "pendingSet", pending: wire.pending(a.pending || a) };
      case "chat/pendingMessageRemoved":
        return { type: "pendingRemoved", id: a.pendingId ?? a.id, kind: a.kind };
      case "chat/queuedMessagesReordered": return { type: "reordered", order: a.order || [] };
      case "x-chat/requestOpened": return { type: "requestOpened", request: wire.request(a.request || {}) };
      case "x-chat/requestClosed": return { type: "requestClosed", id: a.requestId };
      case "chat/truncated": return { type: "truncated" };
      case "session/titleChanged": return { type: "title", title: a.title };
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

class Connection {
  constructor(token, handlers) {
    this.handlers = handlers;
    this.nextId = 1;
    this.clientSeq = 0;
    this.waiting = new Map();
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    this.ws = new WebSocket(`${scheme}//${location.host}/ahp?token=${encodeURIComponent(token)}`);
    this.opened = new Promise((resolve, reject) => {
      this.ws.addEventListener("open", () => resolve());
      this.ws.addEventListener("close", (e) => reject(new Error(`closed (${e.code})`)));
    });
    this.ws.addEventListener("message", (e) => this.receive(e.data));
    this.ws.addEventListener("close", (e) => {
      for (const { reject } of this.waiting.values()) reject(new Error("connection closed"));
      this.waiting.clear();
      handlers.closed(e);
    });
  }

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
    const id = this.nextId++;
    this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    return new Promise((resolve, reject) => this.waiting.set(id, { resolve, reject }));
  }

  notify(method, params) {
    this.ws.send(JSON.stringify({ jsonrpc: "2.0", method, params }));
  }

  dispatch(channel, action) {
    this.clientSeq += 1;
    this.notify("dispatchAction", { channel, clientSeq: this.clientSeq, action });
  }
}

// -- page state --------------------------------------------------------------------------
const page = {
  conn: null,
  clientId: randomId(),
  sessions: new Map(), // uri -> summary
  session: null, // the open session's uri
  chat: null, // its default chat's channel
  fromSeq: 0,
  state: null, // wire.chatState(...) of the open chat
  token: null,
};

const $ = (id) => document.getElementById(id);

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "text") node.textContent = value;
    else if (key === "on") for (const [event, fn] of Object.entries(value)) node.addEventListener(event, fn);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function statusText(status) {
  if (status & 64) return "archived";
  if ((status & 24) === 24) return "waiting for input";
  if (status & 8) return "working";
  if (status & 2) return "error";
  return (status & 32) ? "idle" : "idle, unread";
}

function say(text) { $("connection").textContent = text; }
function notice(text) { $("notice").textContent = text; }

// -- rendering ----------------------------------------------------------------------------
function renderSessions() {
  const list = $("sessions");
  list.replaceChildren();
  for (const s of page.sessions.values()) {
    const name = s.title || `Session ${s.uri.slice(-8)}`;
    const button = el("button", { type: "button", "data-session": s.uri, on: { click: () => openSession(s.uri) } },
      el("span", { class: "title", text: name }), " ",
      el("span", { class: "status", text: `(${statusText(s.status)})` }));
    if (s.uri === page.session) button.setAttribute("aria-current", "true");
    list.append(el("li", {}, button));
  }
}

function replyText(turn) { return turn.parts.map((p) => p.text).join(""); }

function renderTurn(turn, active) {
  const li = el("li", { class: "turn", "data-turn": turn.id },
    el("p", { class: "user", text: turn.text }),
    el("p", { class: "reply", text: replyText(turn) }),
    el("p", { class: "turn-state", text: turn.state }));
  if (active) li.id = "active-turn";
  return li;
}

function render() {
  const s = page.state;
  if (!s) return;
  const turns = s.turns.map((t) => renderTurn(t, false));
  if (s.active) turns.push(renderTurn(s.active, true));
  $("turns").replaceChildren(...turns);

  const pending = [...s.steering, ...s.queued].map((p) =>
    el("li", { "data-pending": p.id, "data-kind": p.kind },
      el("span", { class: "kind", text: p.kind === "steering" ? "steering" : "queued" }),
      el("span", { class: "text", text: p.text }), " ",
      el("button", { type: "button", on: { click: () => removePending(p) } , text: "Remove from Queue" })));
  $("queue").replaceChildren(...pending);
  $("queue-empty").hidden = pending.length > 0;

  const prompts = s.requests.map((r) => {
    if (r.kind === "permission") {
      return el("li", { "data-request": r.id },
        el("span", { text: `Allow ${r.toolName || "a tool"} ${r.args || ""}? ` }),
        el("button", { type: "button", on: { click: () => confirmTool(r, true) }, text: "Approve" }), " ",
        el("button", { type: "button", on: { click: () => confirmTool(r, false) }, text: "Deny" }));
    }
    if (r.kind === "user_input" || r.question) {
      const input = el("input", { "aria-label": `Answer: ${r.question || ""}` });
      return el("li", { "data-request": r.id }, el("span", { text: `${r.question || "Question"} ` }), input,
        el("button", { type: "button", on: { click: () => answer(r, input.value) }, text: "Answer" }));
    }
    return el("li", { "data-request": r.id, text: `Waiting on ${r.kind} (${r.toolName || r.id})` });
  });
  $("permissions").replaceChildren(...prompts);
  $("permissions-section").hidden = prompts.length === 0;

  const running = s.active !== null;
  $("steer-form").hidden = !running;
  $("composer-mode").textContent = running ? "(queued until the running turn ends)" : "(starts a turn)";
  $("chat-status").textContent = running ? "A turn is running" : "Idle";
}

// -- reducing what the server sends ----------------------------------------------------------
function onChatAction(envelope) {
  if (envelope.rejectionReason !== undefined) {
    if (!envelope.origin || envelope.origin.clientId === page.clientId) {
      const type = (envelope.action && envelope.action.type) || "action";
      notice(`Refused ${type}: ${envelope.rejectionReason}`);
    }
    return;
  }
  if (typeof envelope.serverSeq === "number" && envelope.serverSeq <= page.fromSeq) return;
  const s = page.state;
  const a = wire.action(envelope.action || {});
  const dropPending = (id) => {
    s.queued = s.queued.filter((p) => p.id !== id);
    s.steering = s.steering.filter((p) => p.id !== id);
  };
  switch (a.type) {
    case "turnStarted":
      s.active = { id: a.turnId, text: a.text || "", parts: [], state: "running" };
      if (a.pendingId) dropPending(a.pendingId);
      markWorking(true);
      break;
    case "part":
      if (s.active && s.active.id === a.turnId) s.active.parts.push(a.part);
      break;
    case "delta": {
      if (!s.active || s.active.id !== a.turnId) break;
      let part = s.active.parts.find((p) => p.id === a.partId);
      if (!part) { part = { id: a.partId, kind: "markdown", text: "" }; s.active.parts.push(part); }
      part.text += a.text;
      break;
    }
    case "ended":
      if (s.active && s.active.id === a.turnId) {
        s.turns.push({ ...s.active, state: a.state });
        s.active = null;
      }
      s.requests = s.requests.filter((r) => r.turnId !== a.turnId);
      markWorking(false);
      refreshSessions();
      break;
    case "pendingSet": {
      const list = a.pending.kind === "steering" ? s.steering : s.queued;
      const at = list.findIndex((p) => p.id === a.pending.id);
      if (at >= 0) list[at] = a.pending; else list.push(a.pending);
      break;
    }
    case "pendingRemoved": dropPending(a.id); break;
    case "reordered": {
      const byId = new Map(s.queued.map((p) => [p.id, p]));
      s.queued = a.order.map((id) => byId.get(id)).filter(Boolean);
      break;
    }
    case "requestOpened": s.requests.push(a.request); break;
    case "requestClosed": s.requests = s.requests.filter((r) => r.id !== a.id); break;
    case "truncated": openChat(page.chat); return;
    default: return;
  }
  render();
}

// The open session's status as its chat shows it, until listSessions says more.
function markWorking(working) {
  const summary = page.sessions.get(page.session);
  if (!summary) return;
  summary.status = working ? (summary.status | 8) & ~1 : (summary.status & ~8) | 1;
  renderSessions();
}

function onNotification(method, params) {
  if (method === "action") {
    if (params.channel === page.chat && page.state) onChatAction(params);
    else if (params.channel === page.session) {
      const a = wire.action(params.action || {});
      const s = page.sessions.get(page.session);
      if (a.type === "title" && s) { s.title = a.title; renderSessions(); }
    }
  } else if (method === "root/sessionAdded" || method === "root/sessionSummaryChanged") {
    const s = wire.summary(params.summary || {});
    page.sessions.set(s.uri, { ...(page.sessions.get(s.uri) || {}), ...s });
    renderSessions();
  } else if (method === "root/sessionRemoved") {
    page.sessions.delete(params.resource);
    renderSessions();
  }
}

// -- what the user does ----------------------------------------------------------------------
async function refreshSessions() {
  const listed = await page.conn.call("listSessions", { limit: 1000 });
  page.sessions = new Map(listed.items.map((i) => [i.resource, wire.summary(i)]));
  renderSessions();
}

async function newSession() {
  const uri = wire.sessionUri(randomId());
  try {
    const created = await page.conn.call("createSession", { channel: uri });
    page.sessions.set(uri, wire.summary({ resource: uri, ...created.state }));
    renderSessions();
    await openSession(uri);
  } catch (error) {
    notice(`Could not create a session: ${error.message}`);
  }
}

async function openSession(uri) {
  const previous = [page.session, page.chat];
  const subscribed = await page.conn.call("subscribe", { channel: uri });
  page.session = uri;
  await openChat(subscribed.snapshot.state.defaultChat);
  for (const channel of previous) {
    if (channel && channel !== page.session && channel !== page.chat) page.conn.notify("unsubscribe", { channel });
  }
  const s = page.sessions.get(uri);
  $("chat-title").textContent = (s && s.title) || `Session ${uri.slice(-8)}`;
  $("chat").hidden = false;
  notice("");
  renderSessions();
}

async function openChat(chat) {
  page.chat = chat;
  page.state = null;
  const subscribed = await page.conn.call("subscribe", { channel: chat });
  page.fromSeq = subscribed.snapshot.fromSeq || 0;
  page.state = wire.chatState(subscribed.snapshot.state);
  render();
}

function send(text) {
  notice("");
  if (page.state.active) page.conn.dispatch(page.chat, wire.pendingSet("queued", randomId(), text));
  else page.conn.dispatch(page.chat, wire.turnStarted(randomId(), text));
}

function steer(text) {
  notice("");
  page.conn.dispatch(page.chat, wire.pendingSet("steering", randomId(), text));
}

function removePending(p) {
  notice("");
  page.conn.dispatch(page.chat, wire.pendingRemoved(p.kind, p.id));
}

function confirmTool(r, approved) {
  page.conn.dispatch(page.chat, wire.toolCallConfirmed(r.turnId, r.toolCallId || r.id, approved));
}

function answer(r, text) {
  page.conn.dispatch(page.chat, wire.inputCompleted(r.id, text));
}

function cancelTurn() {
  if (page.state.active) page.conn.dispatch(page.chat, wire.turnCancelled(page.state.active.id));
}

async function connect(token) {
  say("Connecting…");
  $("reconnect").hidden = true;
  page.token = token; // kept in memory only, for Reconnect
  const conn = new Connection(token, {
    notification: onNotification,
    closed: (e) => {
      if (page.conn !== conn) return;
      if (conn.ready) {
        say(`Disconnected (${e.code})`);
        $("reconnect").hidden = false;
      } else {
        say("Connection refused: check the token");
        $("login").hidden = false;
      }
    },
  });
  page.conn = conn;
  try {
    await conn.opened;
    const result = await conn.call("initialize", {
      protocolVersions: wire.versions, clientId: page.clientId, initialSubscriptions: [ROOT],
    });
    conn.ready = true;
    say(`Connected (AHP ${result.protocolVersion})`);
    $("login").hidden = true;
    $("app").hidden = false;
    await refreshSessions();
    if (page.session) await openSession(page.session);
  } catch (error) {
    // a closed socket was reported by `closed`; anything else is said here
    if (conn.ws.readyState !== WebSocket.CLOSED) say(`Could not connect: ${error.message}`);
  }
}

function start() {
  $("login").addEventListener("submit", (e) => {
    e.preventDefault();
    connect($("token").value.trim());
  });
  $("new-session").addEventListener("click", newSession);
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("message").value;
    if (!text.trim() || !page.state) return;
    $("message").value = "";
    send(text);
  });
  $("message").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("steer-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("steer").value;
    if (!text.trim() || !page.state) return;
    $("steer").value = "";
    steer(text);
  });
  $("cancel").addEventListener("click", cancelTurn);
  $("reconnect").addEventListener("click", () => connect(page.token));
  // A token in the fragment (#token=...) is used once and removed from the address bar.
  const fragment = new URLSearchParams(location.hash.slice(1));
  const token = fragment.get("token");
  if (token) {
    history.replaceState(null, "", location.pathname + location.search);
    connect(token);
  }
}

start();
