-- 0016: a session's summary (listSessions: its turn count and last activity)
-- read from this index alone. turns_by_session made it read each turn's row,
-- and a row with long texts has a leaf page to itself: a page of 20 sessions
-- of 12 turns read 240 pages, most of them from outside SQLite's cache. This
-- index also serves every lookup by session the old one did.
CREATE INDEX turns_by_session_times ON turns(session_id, started_at, ended_at);
DROP INDEX turns_by_session;
