-- 0011: the ids a client may choose are its chat's own (PostgreSQL's twin of
-- ../0011_ids_per_chat.sql). A turn (with its steering and attachments) and a
-- pending message are keyed by (chat_id, id), so a turn id one identity picks
-- can never name, overwrite or delete a row of another chat. A queued message
-- keeps the turn id its sender chose (turn_id; NULL: the host makes one).
ALTER TABLE turn_steering DROP CONSTRAINT turn_steering_turn_id_fkey;
ALTER TABLE turn_attachments DROP CONSTRAINT turn_attachments_turn_id_fkey;

ALTER TABLE turn_steering ADD COLUMN chat_id TEXT;
UPDATE turn_steering s SET chat_id = t.chat_id FROM turns t WHERE t.id = s.turn_id;
DELETE FROM turn_steering WHERE chat_id IS NULL;
ALTER TABLE turn_steering ALTER COLUMN chat_id SET NOT NULL;

ALTER TABLE turn_attachments ADD COLUMN chat_id TEXT;
UPDATE turn_attachments a SET chat_id = t.chat_id FROM turns t WHERE t.id = a.turn_id;
DELETE FROM turn_attachments WHERE chat_id IS NULL;
ALTER TABLE turn_attachments ALTER COLUMN chat_id SET NOT NULL;

ALTER TABLE turns DROP CONSTRAINT turns_pkey;
ALTER TABLE turns ADD PRIMARY KEY (chat_id, id);

ALTER TABLE turn_steering DROP CONSTRAINT turn_steering_pkey;
ALTER TABLE turn_steering ADD PRIMARY KEY (chat_id, turn_id, position);
ALTER TABLE turn_steering ADD FOREIGN KEY (chat_id, turn_id)
    REFERENCES turns(chat_id, id) ON DELETE CASCADE;

ALTER TABLE turn_attachments DROP CONSTRAINT turn_attachments_pkey;
ALTER TABLE turn_attachments ADD PRIMARY KEY (chat_id, turn_id, position);
ALTER TABLE turn_attachments ADD FOREIGN KEY (chat_id, turn_id)
    REFERENCES turns(chat_id, id) ON DELETE CASCADE;

ALTER TABLE pending_messages DROP CONSTRAINT pending_messages_pkey;
ALTER TABLE pending_messages ADD PRIMARY KEY (chat_id, id);
ALTER TABLE pending_messages ADD COLUMN turn_id TEXT;  -- the turn id its sender chose, if any
