-- 0014: each owner's count of stored (not disposed) sessions, kept by triggers
-- as sessions are inserted, deleted or change owner, so the AHP root's
-- activeSessions is one row read whatever the owner holds; a chat's IsRead and
-- IsArchived flags (the chat's status bits), kept as the session's are.
CREATE TABLE session_counts (
    owner    TEXT PRIMARY KEY,
    sessions INTEGER NOT NULL
);
INSERT INTO session_counts (owner, sessions)
    SELECT owner, COUNT(*) FROM sessions WHERE owner IS NOT NULL GROUP BY owner;

CREATE TRIGGER sessions_counted_in AFTER INSERT ON sessions WHEN NEW.owner IS NOT NULL
BEGIN
    INSERT INTO session_counts (owner, sessions) VALUES (NEW.owner, 1)
        ON CONFLICT (owner) DO UPDATE SET sessions = sessions + 1;
END;

CREATE TRIGGER sessions_counted_out AFTER DELETE ON sessions WHEN OLD.owner IS NOT NULL
BEGIN
    UPDATE session_counts SET sessions = sessions - 1 WHERE owner = OLD.owner;
END;

CREATE TRIGGER sessions_counted_moved AFTER UPDATE OF owner ON sessions
    WHEN OLD.owner IS NOT NEW.owner
BEGIN
    UPDATE session_counts SET sessions = sessions - 1 WHERE owner = OLD.owner;
    INSERT INTO session_counts (owner, sessions) SELECT NEW.owner, 1 WHERE NEW.owner IS NOT NULL
        ON CONFLICT (owner) DO UPDATE SET sessions = sessions + 1;
END;

ALTER TABLE chats ADD COLUMN is_read INTEGER NOT NULL DEFAULT 0;
ALTER TABLE chats ADD COLUMN is_archived INTEGER NOT NULL DEFAULT 0;
