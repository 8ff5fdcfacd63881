-- What a run's sandbox was widened to after it started (`corral allow RUN
-- --write PATH | --host HOST`): its shepherd adds these to the preset's
-- sandbox, hosts at once, writes from the agent's next turn on.
CREATE TABLE sandbox_allows (
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  kind TEXT NOT NULL CHECK (kind IN ('write', 'host')),
  value TEXT NOT NULL,
  allowed_at TEXT NOT NULL,
  PRIMARY KEY (run_id, kind, value)
) WITHOUT ROWID;
