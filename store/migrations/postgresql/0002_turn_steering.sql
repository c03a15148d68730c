-- 0002: steering messages a provider folded into a turn (claude, codex).
CREATE TABLE turn_steering (
    turn_id    TEXT NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    pending_id TEXT NOT NULL,
    text       TEXT NOT NULL,
    PRIMARY KEY (turn_id, position)
);
