-- 0015: a session's customizations that carry an enablement decision (a
-- contribution the session turned off), as AHP Customization[] JSON; NULL: none.
ALTER TABLE sessions ADD COLUMN customizations TEXT;
