-- What a user or an agent said to a run after it started (`corral reply`),
-- kept until the run's agent gets it in a turn of its own session.
CREATE TABLE replies (
    id           INTEGER PRIMARY KEY,
    run_id       TEXT NOT NULL REFERENCES runs(id),
    text         TEXT NOT NULL,
    allow        TEXT,                -- JSON array of tools allowed for that turn; NULL when none
    created_at   TEXT NOT NULL,
    reopens      INTEGER NOT NULL,    -- 1: said to an ended run, which starts again for it
    delivered_at TEXT
);
CREATE INDEX replies_pending ON replies(run_id) WHERE delivered_at IS NULL;
-- When the run was last replied to: it speaks for itself from then on.
ALTER TABLE runs ADD COLUMN replied_at TEXT;
-- What a run with a worktree changed, as last measured (at its end, and by
-- every diff): files, lines added, lines removed. NULL while unknown.
ALTER TABLE runs ADD COLUMN changes_files INTEGER;
ALTER TABLE runs ADD COLUMN changes_added INTEGER;
ALTER TABLE runs ADD COLUMN changes_removed INTEGER;
-- 1 when cost_usd is Corral's estimate from the usage and its price table
-- (the agent reported tokens but no cost).
ALTER TABLE runs ADD COLUMN cost_estimated INTEGER NOT NULL DEFAULT 0;
-- What keeps a running run from its work, while it lasts: the agent
-- retrying a failing model call ("authentication_failed 401 (7/10)"). The
-- tray and the window show it, so it moves the status version too.
ALTER TABLE runs ADD COLUMN retrying TEXT;
CREATE TRIGGER runs_retrying_changed AFTER UPDATE OF retrying ON runs
WHEN old.retrying IS NOT new.retrying
BEGIN
    UPDATE status_version SET version = version + 1;
END;
