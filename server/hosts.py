"""Which Host headers and Origins the server answers: the defence against DNS
rebinding (a page on evil.example whose name now points at 127.0.0.1 sends
`Host: evil.example` and `Origin: http://evil.example:8765`).

`HostAllowlist` holds the names the server answers to: the loopback names,
the address it is bound to (unless a wildcard), and any given with
`serve --allowed-host NAME`. A request whose Host header names anything else
is refused; a browser's Origin must be an allowed name too, on the port the
server listens on (or any port for a name given explicitly, as behind a TLS
proxy), never derived from the request's own Host header.
"""

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

import attrs

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def host_name(header: str) -> str | None:
    """The name in a Host header (`name`, `name:port`, `[v6]:port`), lower case,
    without a trailing dot; None for one that is not a host."""
    header = header.strip().lower()
    if header.startswith("["):
        end = header.find("]")
        rest = header[end + 1 :]
        if end < 0 or (rest and not (rest.startswith(":") and _is_port(rest[1:]))):
            return None
        name = header[1:end]
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            return None
        return name
    name, colon, port = header.rpartition(":")
    if not colon:
        name = header
    elif not _is_port(port):
        return None
    name = name.rstrip(".")
    if not name or any(c in name for c in "/@?#[] "):
        return None
    return name


def _is_port(text: str) -> bool:
    return text.isdigit() and len(text) <= 5


@attrs.frozen(kw_only=True)
class HostAllowlist:
    """The names a server answers to, and the port it listens on (None: any)."""

    names: frozenset[str]
    explicit: frozenset[str] = frozenset()
    port: int | None = None

    @classmethod
    def of(
        cls, bound: str = "127.0.0.1", port: int | None = None, allowed: Iterable[str] = ()
    ) -> "HostAllowlist":
        explicit = frozenset(n for n in (host_name(a) for a in allowed) if n)
        names = set(LOOPBACK_NAMES) | explicit
        bound_name = host_name(bound) or bound.strip("[]").lower()
        if bound_name not in WILDCARDS:
            names.add(bound_name)
        return cls(names=frozenset(names), explicit=explicit, port=port)

    def listening_on(self, port: int) -> "HostAllowlist":
        return attrs.evolve(self, port=port)

    def allows_host(self, header: str | None) -> bool:
        """Whether a request's Host header names this server."""
        name = None if header is None else host_name(header)
        return name is not None and name in self.names

    def allows_origin(self, origin: str) -> bool:
        """Whether a browser page at `origin` may talk to this server: an allowed
        name, over http or https, on the server's port (any port for a name
        given explicitly)."""
        try:
            parts = urlsplit(origin)
            port = parts.port
        except ValueError:
            return False
        name = (parts.hostname or "").rstrip(".")
        if parts.scheme not in ("http", "https") or name not in self.names:
            return False
        if name in self.explicit or self.port is None:
            return True
        return (port or (443 if parts.scheme == "https" else 80)) == self.port
