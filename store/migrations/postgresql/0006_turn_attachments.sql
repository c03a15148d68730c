-- 0006: text attachments sent with a turn's user message.
CREATE TABLE turn_attachments (
    turn_id  TEXT NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    name     TEXT NOT NULL,
    text     TEXT NOT NULL,
    PRIMARY KEY (turn_id, position)
);
