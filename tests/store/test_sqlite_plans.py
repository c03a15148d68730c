"""SQLite's plans for the reads a long-running server makes per request."""

import sqlite3
from pathlib import Path

from agenthost.store import SqliteStore
from agenthost.store.sql_reads import _SUMMARY


def plan(path: Path, query: str, params: tuple[object, ...]) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {query}", params)]


def test_a_page_of_session_summaries_reads_no_turn_rows(tmp_path: Path) -> None:
    """A turn's row holds its texts (a leaf page to itself once they are long):
    the count and last activity of each session on a listSessions page come
    from an index alone (migration 0016), or a page of 20 sessions of 12 turns
    reads 240 pages more."""
    store = SqliteStore(tmp_path / "a.db")
    store.open()  # made and migrated
    store.close()
    query = f"{_SUMMARY} WHERE s.owner = ? ORDER BY s.created_at, s.id LIMIT 21"
    steps = plan(tmp_path / "a.db", query, ("ann",))
    turns = [step for step in steps if step.startswith("SEARCH t ")]
    assert len(turns) == 2, steps  # the count and the last activity
    assert all("COVERING INDEX" in step for step in turns), steps
    assert any("sessions_by_owner" in step for step in steps), steps
