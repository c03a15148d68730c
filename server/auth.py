"""Where a WebSocket upgrade request carries its bearer token.

- `Authorization: Bearer <token>`: any client that can set a header (the
  terminal client, the load generator, SDKs).
- A browser cannot set headers on a WebSocket, but it can offer subprotocols:
  the web page offers `agenthost` and `agenthost.bearer.<token>` (the token's
  UTF-8 bytes as unpadded base64url, as a subprotocol must be an HTTP token).
  The server selects `agenthost` (`PROTOCOLS`), so the token is never echoed
  back, and it stays out of the URL.
- `?token=<token>` on the URL, for older clients. URLs end up in proxies'
  logs and browser history, so nothing of ours sends it any more; the
  server's access log is off, so agenthost itself never logs it.

Nothing here logs a token, or says which of them was wrong.
"""

import base64
import binascii

from aiohttp import web

PROTOCOL = "agenthost"
"""The subprotocol the server selects when a client offers it."""
PROTOCOLS = (PROTOCOL,)
BEARER_PREFIX = "agenthost.bearer."


def bearer_token(request: web.Request) -> str:
    """The token the request carries ("" if none): the header first, then the
    subprotocol, then the query."""
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        return header[7:]
    for offered in request.headers.getall("Sec-WebSocket-Protocol", ()):
        for protocol in offered.split(","):
            protocol = protocol.strip()
            if protocol.startswith(BEARER_PREFIX):
                return _decoded(protocol[len(BEARER_PREFIX) :])
    return request.query.get("token", "")


def bearer_protocol(token: str) -> str:
    """The subprotocol that carries `token` (what the web page offers)."""
    encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    return f"{BEARER_PREFIX}{encoded}"


def _decoded(text: str) -> str:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError):
        return ""
