-- Slots count work, not waiting.
--
-- promoted_at: when a run got its slot (queued -> starting, or started at
-- once). A run with no shepherd yet is judged from here, never from its
-- creation: a run that queued for an hour is not late to start.
--
-- promoter_pid, promoter_start: the process that gave it its slot and must
-- start its shepherd. If it died before the shepherd claimed the run, the
-- run never started: it goes back to the queue, never to `lost`.
--
-- slot_wanted_at: a `waiting` run whose children have ended and that wants
-- a slot back for its continuation turn; it goes before queued runs.
--
-- waits: a process of a run (its agent's `corral wait`, an MCP server's
-- `wait_agents`) blocked on other runs. While any run it waits on is
-- active, the waiting run holds no slot; the row is removed when the call
-- returns, and by reconciliation if the waiting process died.
ALTER TABLE runs ADD COLUMN promoted_at TEXT;
ALTER TABLE runs ADD COLUMN promoter_pid INTEGER;
ALTER TABLE runs ADD COLUMN promoter_start INTEGER;
ALTER TABLE runs ADD COLUMN slot_wanted_at TEXT;
UPDATE runs SET promoted_at = coalesce(started_at, created_at) WHERE status <> 'queued';

CREATE TABLE waits (
    id      INTEGER PRIMARY KEY,
    run_id  TEXT NOT NULL REFERENCES runs(id),  -- the run whose agent waits
    pid     INTEGER NOT NULL,                   -- the waiting process
    start   INTEGER NOT NULL,                   -- its /proc start time
    since   TEXT NOT NULL
);
CREATE INDEX waits_run ON waits(run_id);

CREATE TABLE wait_targets (
    wait_id INTEGER NOT NULL REFERENCES waits(id) ON DELETE CASCADE,
    run_id  TEXT NOT NULL REFERENCES runs(id),
    PRIMARY KEY (wait_id, run_id)
) WITHOUT ROWID;
