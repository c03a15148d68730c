-- 0007: the text attachments of a queued message (a JSON list of [name, text]),
-- so a message queued before a restart still runs with them.
ALTER TABLE pending_messages ADD COLUMN attachments TEXT NOT NULL DEFAULT '[]';
