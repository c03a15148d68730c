-- 0011: the ids a client may choose are its chat's own. A turn (with its
-- steering and attachments) and a pending message are keyed by (chat_id, id),
-- so a turn id one identity picks can never name, overwrite or delete a row
-- of another chat: two chats may hold turns of the same id. A queued message
-- keeps the turn id its sender chose (turn_id; NULL: the host makes one when
-- it runs). The tables are rebuilt (SQLite cannot change a primary key), their
-- rowids kept, since rows of one seq or position are ordered by rowid. A turn's
-- texts are its last columns: SQLite reads a row's columns in order, through the
-- overflow pages of a long text, so a session's summary (its turns' count and
-- latest time) read 200 KB a turn of 100 KB messages while they came first.
CREATE TABLE turns_0011 (
    id             TEXT NOT NULL,
    chat_id        TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    session_id     TEXT NOT NULL,
    seq            INTEGER NOT NULL,
    state          TEXT,            -- NULL while the turn runs
    started_at     INTEGER NOT NULL,
    ended_at       INTEGER,
    origin         TEXT,
    finish_reason  TEXT,
    error_code     TEXT,
    usage          TEXT,
    error_message  TEXT,
    user_text      TEXT NOT NULL,
    assistant_text TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (chat_id, id)
);
INSERT INTO turns_0011 (rowid, id, chat_id, session_id, seq, state, started_at, ended_at, origin,
                        finish_reason, error_code, usage, error_message, user_text,
                        assistant_text)
    SELECT rowid, id, chat_id, session_id, seq, state, started_at, ended_at, origin,
           finish_reason, error_code, usage, error_message, user_text, assistant_text
    FROM turns;

CREATE TABLE turn_steering_0011 (
    chat_id    TEXT NOT NULL,
    turn_id    TEXT NOT NULL,
    position   INTEGER NOT NULL,
    pending_id TEXT NOT NULL,
    text       TEXT NOT NULL,
    PRIMARY KEY (chat_id, turn_id, position),
    FOREIGN KEY (chat_id, turn_id) REFERENCES turns_0011(chat_id, id) ON DELETE CASCADE
);
INSERT INTO turn_steering_0011 (chat_id, turn_id, position, pending_id, text)
    SELECT t.chat_id, s.turn_id, s.position, s.pending_id, s.text
    FROM turn_steering s JOIN turns t ON t.id = s.turn_id;

CREATE TABLE turn_attachments_0011 (
    chat_id  TEXT NOT NULL,
    turn_id  TEXT NOT NULL,
    position INTEGER NOT NULL,
    name     TEXT NOT NULL,
    text     TEXT NOT NULL,
    PRIMARY KEY (chat_id, turn_id, position),
    FOREIGN KEY (chat_id, turn_id) REFERENCES turns_0011(chat_id, id) ON DELETE CASCADE
);
INSERT INTO turn_attachments_0011 (chat_id, turn_id, position, name, text)
    SELECT t.chat_id, a.turn_id, a.position, a.name, a.text
    FROM turn_attachments a JOIN turns t ON t.id = a.turn_id;

CREATE TABLE pending_messages_0011 (
    id          TEXT NOT NULL,
    chat_id     TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    session_id  TEXT NOT NULL,
    kind        TEXT NOT NULL,       -- steering | queued
    text        TEXT NOT NULL,
    position    INTEGER NOT NULL,
    attachments TEXT NOT NULL DEFAULT '[]',
    turn_id     TEXT,                -- the turn id its sender chose, if any
    PRIMARY KEY (chat_id, id)
);
INSERT INTO pending_messages_0011 (rowid, id, chat_id, session_id, kind, text, position,
                                   attachments)
    SELECT rowid, id, chat_id, session_id, kind, text, position, attachments
    FROM pending_messages;

-- The children first: dropping turns (foreign keys on) deletes what refers to it.
DROP TABLE turn_steering;
DROP TABLE turn_attachments;
DROP TABLE turns;
DROP TABLE pending_messages;
ALTER TABLE turns_0011 RENAME TO turns;  -- the children's references follow the name
ALTER TABLE turn_steering_0011 RENAME TO turn_steering;
ALTER TABLE turn_attachments_0011 RENAME TO turn_attachments;
ALTER TABLE pending_messages_0011 RENAME TO pending_messages;
CREATE INDEX turns_by_chat ON turns(chat_id, seq);
CREATE INDEX turns_by_session ON turns(session_id);
CREATE INDEX pending_by_chat ON pending_messages(chat_id, position);
