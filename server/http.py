"""The server's HTTP side (aiohttp): the app, its routes, and the WebSocket
upgrade that hands an authenticated socket to a `Connection`.

Routes: `/ahp` (AHP over WebSocket: a bearer token in the upgrade request,
`Authorization: Bearer`, the page's `agenthost.bearer.<token>` subprotocol
or `?token=`, mapped to an identity), `/healthz`,
`/metrics` (Prometheus text), and with a static folder the web page (`/`,
`/static/`, and server/web_routes.py's `/render` and `/favicon.ico`).

Invariants:
1. Every response (pages, files, /healthz, /metrics, 404s, refused upgrades)
   carries SECURITY_HEADERS: the page's Content-Security-Policy (with
   `frame-ancestors 'none'`), nosniff, no referrer, no framing.
2. A request whose Host header names another server is refused (421) before
   any route runs (DNS rebinding: server/hosts.py).
3. An upgrade without a valid token is refused (401) before anything else is
   read; one carrying an Origin the allowlist does not name is refused (403);
   a stopping server refuses new ones (503).
4. Tokens are never logged (the access log is off: a `?token=` query would
   be in it).

What else bounds a request is the runner's: headers must arrive within
`Limits.header_timeout_s` (aiohttp's keepalive_timeout, which also runs
from a connection's start: serve.py sets it).
"""

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from agenthost.server.auth import PROTOCOLS, bearer_token
from agenthost.server.connection import Connection
from agenthost.server.web_routes import add_web_routes

if TYPE_CHECKING:
    from agenthost.server.ahp import AhpServer

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self';"
    " img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",  # frame-ancestors, for browsers older than CSP 2
}


async def _secured(request: web.Request, response: web.StreamResponse) -> None:
    """(on every response, as it is prepared) The security headers."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


def build_app(server: "AhpServer") -> web.Application:
    """The aiohttp application serving `server`."""
    routes = Routes(server)

    @web.middleware
    async def known_host(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not server.hosts.allows_host(request.headers.get("Host")):
            raise web.HTTPMisdirectedRequest(text="this server does not answer to that host")
        return await handler(request)

    app = web.Application(client_max_size=server.limits.frame_bytes, middlewares=[known_host])
    app.on_response_prepare.append(_secured)
    app.router.add_get("/ahp", routes.websocket)
    app.router.add_get("/healthz", routes.healthz)
    app.router.add_get("/metrics", routes.metrics)
    if server.static_dir is not None:
        app.router.add_get("/", routes.index)
        app.router.add_static("/static/", server.static_dir)
        add_web_routes(app, server.static_dir, server.tokens)
    app.on_startup.append(routes.startup)
    app.on_shutdown.append(routes.shutdown)
    return app


class Routes:
    """The request handlers of one server's app."""

    def __init__(self, server: "AhpServer") -> None:
        self.server = server

    async def index(self, request: web.Request) -> web.StreamResponse:
        assert self.server.static_dir is not None
        return web.FileResponse(f"{self.server.static_dir}/index.html")

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "accepting": self.server.accepting})

    async def metrics(self, request: web.Request) -> web.Response:
        server = self.server
        counters = await server.host.counters()
        text = server.metrics.render(
            counters, chat_channels=len(server.channels), tables=server.tables()
        )
        tasks = len(asyncio.all_tasks())  # the server loop's: what a long run watches grow
        text += f"# TYPE agenthost_asyncio_tasks gauge\nagenthost_asyncio_tasks {tasks}\n"
        return web.Response(text=text, content_type="text/plain")

    def identity(self, request: web.Request) -> str | None:
        token = bearer_token(request)  # the header, the page's subprotocol, or ?token=
        return self.server.tokens.get(token) if token else None

    def origin_allowed(self, origin: str) -> bool:
        """From the allowlist (or `AhpServer(origins=...)`), never from the
        request's own Host header."""
        return origin in self.server.origins or self.server.hosts.allows_origin(origin)

    async def websocket(self, request: web.Request) -> web.StreamResponse:
        server = self.server
        if not server.accepting:
            raise web.HTTPServiceUnavailable(text="the server is stopping")
        origin = request.headers.get("Origin")
        if origin is not None and not self.origin_allowed(origin):
            raise web.HTTPForbidden(text="origin not allowed")
        identity = self.identity(request)
        if identity is None:
            raise web.HTTPUnauthorized(
                text="a bearer token is required", headers={"WWW-Authenticate": "Bearer"}
            )
        ws = web.WebSocketResponse(
            max_msg_size=server.limits.frame_bytes, heartbeat=30.0, protocols=PROTOCOLS
        )
        await ws.prepare(request)
        connection = Connection(server, ws, identity)
        server.connected(connection)
        try:
            await connection.run()
        finally:
            server.disconnected(connection)
        return ws

    async def startup(self, app: web.Application) -> None:
        await self.server.start()

    async def shutdown(self, app: web.Application) -> None:
        await self.server.shutdown()
