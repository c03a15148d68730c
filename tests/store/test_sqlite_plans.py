"""SQLite's plans for the reads a long-running server makes per request."""

import sqlite3
from pathlib import Path
from typing import Any

from agenthost.store import SqliteStore


def test_a_page_of_session_summaries_reads_no_turn_rows(tmp_path: Path) -> None:
    """A turn's row holds its texts (a leaf page to itself once they are long):
    the count and last activity of each session on a listSessions page come
    from an index alone (migration 0016), or a page of 20 sessions of 12 turns
    reads 240 pages more."""
    store = SqliteStore(tmp_path / "a.db")
    store.open()  # made and migrated
    executed: list[tuple[str, Any]] = []
    real = store._execute

    def recorded(sql: str, params: Any = ()) -> Any:
        executed.append((sql, params))
        return real(sql, params)

    store._execute = recorded  # type: ignore[method-assign]
    try:
        store.list_sessions_page(owner="ann", limit=20)  # the query the store runs
    finally:
        store.close()
    [(query, params)] = executed
    with sqlite3.connect(tmp_path / "a.db") as db:
        steps = [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {query}", params)]
    turns = [step for step in steps if step.startswith("SEARCH t ")]
    assert len(turns) == 2, steps  # the count and the last activity
    assert all("COVERING INDEX" in step for step in turns), steps
    assert any("sessions_by_owner" in step for step in steps), steps
