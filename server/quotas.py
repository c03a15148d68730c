"""Per-identity quotas: how many sessions one identity may hold in memory, and
how many it may create a minute. A request past either is refused with
-32030 (QUOTA_EXCEEDED) saying which quota, its value and what to do; `None`
turns a quota off.

The creation quota is a token bucket per identity (a minute's worth at once,
then the rate), on the host's clock; its table has one entry per identity
that created a session, so it is bounded by the identities the tokens name.
"""

import contextlib
from collections.abc import Callable, Iterator

from agenthost.messages.errors import JsonRpcErrorCode
from agenthost.server.connection import RateLimit
from agenthost.server.errors import RpcError


class IdentityQuotas:
    """The quotas of every identity (event loop thread only)."""

    def __init__(
        self,
        resident: int | None,
        creations_per_minute: int | None,
        now: Callable[[], float],
    ) -> None:
        self._resident = resident
        self._per_minute = creations_per_minute
        self._now = now
        self._creations: dict[str, RateLimit] = {}
        self._pending: dict[str, int] = {}  # identity -> its creations in flight

    def admit_creation(self, identity: str) -> None:
        """Count one session creation against the identity's quota.

        Raises:
            RpcError: QUOTA_EXCEEDED past the creations a minute.
        """
        if self._per_minute is None:
            return
        bucket = self._creations.get(identity)
        if bucket is None:
            bucket = RateLimit(self._per_minute / 60.0, self._per_minute, now=self._now)
            self._creations[identity] = bucket
        if not bucket.allow():
            raise RpcError(
                JsonRpcErrorCode.QUOTA_EXCEEDED,
                f"{identity} may create {self._per_minute} sessions a minute: wait a little"
                " (the server's --session-creations-per-minute)",
                {"quota": "sessionCreationsPerMinute", "limit": self._per_minute},
            )

    @contextlib.contextmanager
    def creating(self, identity: str, resident: int) -> Iterator[None]:
        """A session creation in flight: it counts as resident while it runs, so
        creations sent at once cannot pass the quota together.

        Raises:
            RpcError: QUOTA_EXCEEDED past either quota.
        """
        pending = self._pending.get(identity, 0)
        self.admit_resident(identity, resident + pending)
        self.admit_creation(identity)
        self._pending[identity] = pending + 1
        try:
            yield
        finally:
            left = self._pending[identity] - 1
            if left:
                self._pending[identity] = left
            else:
                del self._pending[identity]

    def admit_resident(self, identity: str, resident: int) -> None:
        """One more of the identity's sessions is to come into memory.

        Raises:
            RpcError: QUOTA_EXCEEDED when it already has the most it may.
        """
        if self._resident is not None and resident >= self._resident:
            raise RpcError(
                JsonRpcErrorCode.QUOTA_EXCEEDED,
                f"{identity} has {resident} sessions in memory, the most one identity may:"
                " dispose some, or wait until idle ones leave memory"
                " (the server's --max-resident-sessions)",
                {"quota": "residentSessions", "limit": self._resident},
            )
