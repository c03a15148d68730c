-- 0010: what a chat's provider needs to resume its conversation (a Copilot or
-- Claude session id, a Codex thread id), as its adapter last reported it.
ALTER TABLE chats ADD COLUMN provider_ref TEXT;
