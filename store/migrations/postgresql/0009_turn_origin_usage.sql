-- 0009: a turn keeps its message's origin (a steering or queued message's turn
-- comes back as such) and its token usage, written with the turn's end (it was
-- a persisted_usage memento per turn, written apart; those are moved here).
ALTER TABLE turns ADD COLUMN origin TEXT;  -- the message origin's kind; NULL: user
ALTER TABLE turns ADD COLUMN usage TEXT;   -- AHP UsageInfo as JSON; NULL: none reported
UPDATE turns SET usage = (
    SELECT json_build_object('inputTokens', (m.value::json ->> 0)::bigint,
                             'outputTokens', (m.value::json ->> 1)::bigint)::text
    FROM mementos m
    WHERE m.contribution = 'persisted_usage' AND m.session_id = turns.session_id
      AND m.chat_id = turns.chat_id AND m.key = 'usage' || chr(31) || turns.id
);
DELETE FROM mementos WHERE contribution = 'persisted_usage';
