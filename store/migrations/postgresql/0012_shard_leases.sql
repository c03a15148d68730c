-- 0012: shards and session leases, PostgreSQL's twin of ../0012_shard_leases.sql
-- (a session is resident on one shard at a time).
-- A shard's epoch grows on each (re)start; a lease names its owner shard, the
-- owner's epoch when it took the lease, and the lease's own epoch (bumped on
-- every acquisition; a released lease keeps it, with no owner).
CREATE TABLE shards (
    id         TEXT PRIMARY KEY,
    epoch      BIGINT NOT NULL,
    started_at BIGINT NOT NULL
);

CREATE TABLE session_leases (
    session_id  TEXT PRIMARY KEY,
    shard_id    TEXT,
    shard_epoch BIGINT NOT NULL,
    lease_epoch BIGINT NOT NULL
);
CREATE INDEX session_leases_by_shard ON session_leases(shard_id);
