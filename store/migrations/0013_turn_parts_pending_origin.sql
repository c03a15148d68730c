-- 0013: a turn keeps its response parts as it ended (markdown parts with their
-- ids, tool calls, an error's part) where they say more than its assistant text
-- (NULL: one markdown part holding the text), so a restored turn equals the live
-- one; a pending message keeps its message's origin (requeued steering stays
-- steering). 0011 and 0012 are other changes' numbers.
ALTER TABLE turns ADD COLUMN response_parts TEXT;     -- AHP ResponsePart[] as JSON
ALTER TABLE pending_messages ADD COLUMN origin TEXT;  -- the message origin's kind; NULL: user
