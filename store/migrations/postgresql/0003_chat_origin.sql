-- 0003: where a chat came from (a subagent's chat names the tool call that spawned it).
ALTER TABLE chats ADD COLUMN origin_kind TEXT NOT NULL DEFAULT 'user';
ALTER TABLE chats ADD COLUMN origin_chat TEXT;
ALTER TABLE chats ADD COLUMN origin_tool_call TEXT;
