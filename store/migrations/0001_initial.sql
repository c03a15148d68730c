-- 0001: sessions, chats, turns, pending messages.
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    provider    TEXT NOT NULL,
    title       TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    modified_at INTEGER NOT NULL
);

CREATE TABLE chats (
    id         TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    title      TEXT NOT NULL DEFAULT '',
    draft      TEXT
);
CREATE INDEX chats_by_session ON chats(session_id, position);

CREATE TABLE turns (
    id             TEXT PRIMARY KEY,
    chat_id        TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    session_id     TEXT NOT NULL,
    seq            INTEGER NOT NULL,
    user_text      TEXT NOT NULL,
    assistant_text TEXT NOT NULL DEFAULT '',
    state          TEXT,            -- NULL while the turn runs
    error_code     TEXT,
    error_message  TEXT,
    finish_reason  TEXT,
    started_at     INTEGER NOT NULL,
    ended_at       INTEGER
);
CREATE INDEX turns_by_chat ON turns(chat_id, seq);
CREATE INDEX turns_by_session ON turns(session_id);

CREATE TABLE pending_messages (
    id         TEXT PRIMARY KEY,
    chat_id    TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    session_id TEXT NOT NULL,
    kind       TEXT NOT NULL,       -- steering | queued
    text       TEXT NOT NULL,
    position   INTEGER NOT NULL
);
CREATE INDEX pending_by_chat ON pending_messages(chat_id, position);
