-- Runs, their transcripts, and full-text search over both.

CREATE TABLE runs (
    num                INTEGER PRIMARY KEY AUTOINCREMENT, -- launch order
    id                 TEXT NOT NULL UNIQUE,
    parent_id          TEXT REFERENCES runs(id),
    preset             TEXT NOT NULL,
    preset_path        TEXT NOT NULL,
    preset_json        TEXT NOT NULL,                     -- the preset as launched
    agent              TEXT NOT NULL,
    task               TEXT NOT NULL,
    cwd                TEXT NOT NULL,
    model              TEXT,
    resolved_model     TEXT,
    status             TEXT NOT NULL,
    stop_reason        TEXT,
    exit_code          INTEGER,
    exit_signal        INTEGER,
    final_text         TEXT,
    error              TEXT,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd           REAL,
    session_id         TEXT,
    shepherd_pid       INTEGER,
    shepherd_start     INTEGER,                           -- /proc start time, clock ticks
    agent_pid          INTEGER,
    agent_start        INTEGER,
    created_at         TEXT NOT NULL,
    started_at         TEXT,
    completed_at       TEXT,
    exited_at          TEXT,
    abort_requested_at TEXT,
    notified_at        TEXT,
    dismissed_at       TEXT
);
CREATE INDEX runs_status ON runs(status);
CREATE INDEX runs_parent ON runs(parent_id);

CREATE TABLE events (
    id     INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    seq    INTEGER NOT NULL,
    at     TEXT NOT NULL,
    kind   TEXT NOT NULL,
    text   TEXT NOT NULL,
    json   TEXT,
    UNIQUE (run_id, seq)
);

CREATE VIRTUAL TABLE events_fts USING fts5(text, content='events', content_rowid='id');
CREATE TRIGGER events_fts_insert AFTER INSERT ON events BEGIN
    INSERT INTO events_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER events_fts_delete AFTER DELETE ON events BEGIN
    INSERT INTO events_fts(events_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;

CREATE VIRTUAL TABLE runs_fts USING fts5(task, final_text, error, content='runs', content_rowid='num');
CREATE TRIGGER runs_fts_insert AFTER INSERT ON runs BEGIN
    INSERT INTO runs_fts(rowid, task, final_text, error)
    VALUES (new.num, new.task, coalesce(new.final_text, ''), coalesce(new.error, ''));
END;
CREATE TRIGGER runs_fts_update AFTER UPDATE OF task, final_text, error ON runs BEGIN
    INSERT INTO runs_fts(runs_fts, rowid, task, final_text, error)
    VALUES ('delete', old.num, old.task, coalesce(old.final_text, ''), coalesce(old.error, ''));
    INSERT INTO runs_fts(rowid, task, final_text, error)
    VALUES (new.num, new.task, coalesce(new.final_text, ''), coalesce(new.error, ''));
END;
