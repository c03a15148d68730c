-- 0005: the session entry's flags, read-only chats, and contributions' mementos.
ALTER TABLE sessions ADD COLUMN user_titled BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE sessions ADD COLUMN is_read BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE sessions ADD COLUMN is_archived BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE sessions ADD COLUMN config TEXT NOT NULL DEFAULT '{}';
ALTER TABLE chats ADD COLUMN read_only BOOLEAN NOT NULL DEFAULT FALSE;

-- A contribution's value, per session (chat_id '') or per chat, under a key
-- of one or more segments (joined with U+001F).
CREATE TABLE mementos (
    session_id   TEXT NOT NULL,
    chat_id      TEXT NOT NULL,
    contribution TEXT NOT NULL,
    key          TEXT NOT NULL,
    value        TEXT NOT NULL,
    PRIMARY KEY (session_id, chat_id, contribution, key)
);
