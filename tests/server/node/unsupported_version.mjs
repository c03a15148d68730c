// Node's own WebSocket (the official AHP transport's) offers a version the
// server does not speak; prints one JSON line per event it sees.
const [url, token] = process.argv.slice(2);
const ws = new WebSocket(`${url}?token=${encodeURIComponent(token)}`);
const say = (event) => console.log(JSON.stringify(event));
const timer = setTimeout(() => { say({ event: "timeout" }); process.exit(2); }, 10000);
ws.onopen = () => ws.send(JSON.stringify({
  jsonrpc: "2.0", id: 1, method: "initialize",
  params: { channel: "ahp-root://", protocolVersions: ["9.0.0"], clientId: "node" },
}));
ws.onmessage = (e) => say({ event: "message", data: JSON.parse(e.data) });
ws.onclose = (e) => { say({ event: "close", code: e.code }); clearTimeout(timer); };
