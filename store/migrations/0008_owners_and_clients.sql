-- 0008: a session's owner, copied from its config's "ahp.owner" (the identity
-- that created it over AHP) into an indexed column, so listing one owner's
-- sessions is a range read; AHP client ids bound to the identity that first
-- claimed them (pruned by last_seen); the file marked as an agenthost store.
ALTER TABLE sessions ADD COLUMN owner TEXT;
UPDATE sessions SET owner = json_extract(config, '$."ahp.owner"');
CREATE INDEX sessions_by_owner ON sessions(owner, created_at, id);

CREATE TABLE client_bindings (
    client_id  TEXT PRIMARY KEY,
    identity   TEXT NOT NULL,
    first_seen INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL
);
CREATE INDEX client_bindings_by_last_seen ON client_bindings(last_seen);

PRAGMA application_id = 1097287791;
