-- 0012: shards and session leases (a session is resident on one shard at a time).
-- A shard's epoch grows on each (re)start; a lease names its owner shard, the
-- owner's epoch when it took the lease, and the lease's own epoch (bumped on
-- every acquisition; a released lease keeps it, with no owner).
CREATE TABLE shards (
    id         TEXT PRIMARY KEY,
    epoch      INTEGER NOT NULL,
    started_at INTEGER NOT NULL
);

CREATE TABLE session_leases (
    session_id  TEXT PRIMARY KEY,
    shard_id    TEXT,
    shard_epoch INTEGER NOT NULL,
    lease_epoch INTEGER NOT NULL
);
CREATE INDEX session_leases_by_shard ON session_leases(shard_id);
