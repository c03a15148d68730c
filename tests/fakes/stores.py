"""Stores with test controls."""

import threading

from agenthost.store.records import SaveTurnEnded, StoreOp
from agenthost.store.sqlite import SqliteStore


class GatedCommitStore(SqliteStore):
    """Holds the commit of a batch that ends a turn until `release()`.

    `blocked` is set while such a commit waits, so a test can look at what
    subscribers have seen before the turn's end is durable.
    """

    def __init__(self, path: object) -> None:
        super().__init__(path)  # type: ignore[arg-type]
        self.blocked = threading.Event()
        self._release = threading.Event()
        self._holds_turn_end = False

    def apply(self, op: StoreOp) -> None:
        super().apply(op)
        if isinstance(op, SaveTurnEnded):
            self._holds_turn_end = True

    def commit(self) -> None:
        if self._holds_turn_end:
            self._holds_turn_end = False
            self.blocked.set()
            if not self._release.wait(10):
                raise TimeoutError("gated commit never released")
        super().commit()

    def release(self) -> None:
        self._release.set()


class RecordingStore(SqliteStore):
    """Records each op it applies and each commit (as None), in order."""

    def __init__(self, path: object) -> None:
        super().__init__(path)  # type: ignore[arg-type]
        self.log: list[StoreOp | None] = []

    def apply(self, op: StoreOp) -> None:
        super().apply(op)
        self.log.append(op)

    def commit(self) -> None:
        super().commit()
        self.log.append(None)
