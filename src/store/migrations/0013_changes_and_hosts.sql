-- Every change to a run takes the next number of one sequence, kept with
-- the run: `corral watch --since N` sends each run changed after N (its
-- latest state) and misses none. A removed run leaves its number behind in
-- `removed_runs`. Commits are serialized, so numbers follow commit order.
CREATE TABLE change_seq (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
);
ALTER TABLE runs ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET change_seq = num;
INSERT INTO change_seq (id, seq) VALUES (1, (SELECT coalesce(max(num), 0) FROM runs));
CREATE INDEX runs_change_seq ON runs(change_seq);
CREATE TRIGGER runs_change_added AFTER INSERT ON runs BEGIN
    UPDATE change_seq SET seq = seq + 1;
    UPDATE runs SET change_seq = (SELECT seq FROM change_seq) WHERE num = new.num;
END;
CREATE TRIGGER runs_change_updated AFTER UPDATE ON runs WHEN new.change_seq = old.change_seq BEGIN
    UPDATE change_seq SET seq = seq + 1;
    UPDATE runs SET change_seq = (SELECT seq FROM change_seq) WHERE num = new.num;
END;
CREATE TABLE removed_runs (
    seq INTEGER PRIMARY KEY,
    id  TEXT NOT NULL
);
CREATE TRIGGER runs_change_removed AFTER DELETE ON runs BEGIN
    UPDATE change_seq SET seq = seq + 1;
    INSERT INTO removed_runs (seq, id) VALUES ((SELECT seq FROM change_seq), old.id);
END;

-- Runs of other machines (`[hosts.NAME]`), as their own store last said:
-- the run object whole, with the sequence number it came with. Never
-- healed, queued or counted against `max_parallel` here: their shepherds
-- are on their host. Announced once, like local runs (`notified_at`).
-- `launched_by`: the local run whose agent launched it (MCP's scope).
CREATE TABLE remote_runs (
    host        TEXT NOT NULL,
    id          TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    status      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    run         TEXT NOT NULL,
    notified_at TEXT,
    seen_at     TEXT,
    launched_by TEXT,
    PRIMARY KEY (host, id)
);
CREATE INDEX remote_runs_id ON remote_runs(id);
CREATE INDEX remote_runs_status ON remote_runs(status);
CREATE INDEX remote_runs_launched_by ON remote_runs(launched_by) WHERE launched_by IS NOT NULL;
CREATE TRIGGER remote_runs_added AFTER INSERT ON remote_runs BEGIN
    UPDATE status_version SET version = version + 1;
END;
CREATE TRIGGER remote_runs_status_changed AFTER UPDATE OF status, seen_at ON remote_runs
WHEN old.status IS NOT new.status OR old.seen_at IS NOT new.seen_at
BEGIN
    UPDATE status_version SET version = version + 1;
END;
CREATE TRIGGER remote_runs_removed AFTER DELETE ON remote_runs BEGIN
    UPDATE status_version SET version = version + 1;
END;

-- What the follower of each host last knew: how far it has read the host's
-- changes, and whether the host answers (since when, and why not).
CREATE TABLE hosts (
    name       TEXT PRIMARY KEY,
    seq        INTEGER NOT NULL DEFAULT 0,
    reachable  INTEGER NOT NULL DEFAULT 0,
    since      TEXT,
    error      TEXT,
    version    TEXT,
    checked_at TEXT
);
CREATE TRIGGER hosts_reachability_changed AFTER UPDATE OF reachable ON hosts
WHEN old.reachable IS NOT new.reachable
BEGIN
    UPDATE status_version SET version = version + 1;
END;
