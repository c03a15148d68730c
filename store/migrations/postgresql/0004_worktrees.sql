-- 0004: a session's isolated git worktree, if it has one.
ALTER TABLE sessions ADD COLUMN worktree_path TEXT;
ALTER TABLE sessions ADD COLUMN worktree_repo TEXT;
ALTER TABLE sessions ADD COLUMN worktree_base TEXT;
