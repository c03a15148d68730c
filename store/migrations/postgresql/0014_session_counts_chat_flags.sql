-- 0014: each owner's count of stored (not disposed) sessions, kept by a trigger
-- as sessions are inserted, deleted or change owner, so the AHP root's
-- activeSessions is one row read whatever the owner holds; a chat's IsRead and
-- IsArchived flags (the chat's status bits), kept as the session's are.
CREATE TABLE session_counts (
    owner    TEXT PRIMARY KEY,
    sessions INTEGER NOT NULL
);
INSERT INTO session_counts (owner, sessions)
    SELECT owner, COUNT(*) FROM sessions WHERE owner IS NOT NULL GROUP BY owner;

CREATE FUNCTION sessions_counted() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.owner IS NOT DISTINCT FROM NEW.owner THEN
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.owner IS NOT NULL THEN
        UPDATE session_counts SET sessions = sessions - 1 WHERE owner = OLD.owner;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.owner IS NOT NULL THEN
        INSERT INTO session_counts (owner, sessions) VALUES (NEW.owner, 1)
            ON CONFLICT (owner) DO UPDATE SET sessions = session_counts.sessions + 1;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER sessions_counted AFTER INSERT OR DELETE OR UPDATE OF owner ON sessions
    FOR EACH ROW EXECUTE FUNCTION sessions_counted();

ALTER TABLE chats ADD COLUMN is_read BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE chats ADD COLUMN is_archived BOOLEAN NOT NULL DEFAULT FALSE;
