-- Schedules: a preset launched by a clock, and every fire with its outcome.
-- `settings` is the schedule as JSON (`schedule::Settings`): what to
-- launch, when, and the rules of its fires; `paused_at`/`paused_why` say
-- who paused it and why (the user, or its own failures). `source` is the
-- preset file whose `schedule:` it is, or NULL for `corral schedule add`.
CREATE TABLE schedules (
    name       TEXT PRIMARY KEY,
    settings   TEXT NOT NULL,
    created_at TEXT NOT NULL,
    paused_at  TEXT,
    paused_why TEXT,
    source     TEXT
);

-- One row per slot (schedule, due time), taken by exactly one firer: the
-- unique key is what keeps two firers (two trays, a timer, `schedule
-- run`) from launching a slot twice. `outcome` is `firing` while its
-- firer decides, then `launched`, `queued` (overlap: queue, waiting for
-- the last fire to end), `skipped_paused`, `skipped_overlap`,
-- `skipped_precheck`, `skipped_nothing_new`, `skipped_limit` or `failed`
-- (nothing could be launched), with `detail` in words.
-- `due_local` is the slot's wall-clock time where it fired (a cron
-- schedule's), so a slot fires once per wall-clock time even when the
-- user's time zone changes.
CREATE TABLE fires (
    id        INTEGER PRIMARY KEY,
    schedule  TEXT NOT NULL REFERENCES schedules (name) ON DELETE CASCADE,
    due_at    TEXT NOT NULL,
    due_local TEXT,
    fired_at  TEXT NOT NULL,
    late_ms   INTEGER NOT NULL DEFAULT 0,
    firer     TEXT NOT NULL,
    outcome   TEXT NOT NULL,
    detail    TEXT,
    UNIQUE (schedule, due_at)
);

-- The runs a fire launched (one, or one per precheck item).
CREATE TABLE fire_runs (
    fire   INTEGER NOT NULL REFERENCES fires (id) ON DELETE CASCADE,
    run_id TEXT NOT NULL,
    item   TEXT,
    PRIMARY KEY (fire, run_id)
);
CREATE INDEX fire_runs_by_run ON fire_runs (run_id);

-- Precheck items already worked on, so an item is launched once, not at
-- every poll.
CREATE TABLE schedule_items (
    schedule TEXT NOT NULL REFERENCES schedules (name) ON DELETE CASCADE,
    item     TEXT NOT NULL,
    fire     INTEGER NOT NULL,
    PRIMARY KEY (schedule, item)
);

-- The tray shows the schedules (the next fire, those failing): a change to
-- one, or a fire, moves what it shows.
CREATE TRIGGER schedules_added AFTER INSERT ON schedules BEGIN
    UPDATE status_version SET version = version + 1;
END;
CREATE TRIGGER schedules_changed AFTER UPDATE OF settings, paused_at ON schedules BEGIN
    UPDATE status_version SET version = version + 1;
END;
CREATE TRIGGER schedules_removed AFTER DELETE ON schedules BEGIN
    UPDATE status_version SET version = version + 1;
END;
CREATE TRIGGER fires_added AFTER INSERT ON fires BEGIN
    UPDATE status_version SET version = version + 1;
END;
CREATE TRIGGER fires_decided AFTER UPDATE OF outcome ON fires WHEN old.outcome IS NOT new.outcome BEGIN
    UPDATE status_version SET version = version + 1;
END;
