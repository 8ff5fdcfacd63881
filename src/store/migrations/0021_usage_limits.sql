-- Usage limits: a run whose agent's limit was reached is paused
-- (`pause_reason = 'usage_limit'`) until `resumes_at`, when its shepherd
-- takes it on in the agent's own session. `usage_limits` holds each
-- agent's limit while it stands: queued runs of that agent wait for it
-- instead of starting into the wall.
ALTER TABLE runs ADD COLUMN resumes_at TEXT;
CREATE TABLE usage_limits (
    agent     TEXT PRIMARY KEY,
    resets_at TEXT NOT NULL,   -- RFC 3339, UTC
    said      TEXT NOT NULL,   -- the agent's words
    since     TEXT NOT NULL
);
-- A run's resume time stands only while it is paused.
CREATE TRIGGER runs_resumes_at_agrees_with_status AFTER UPDATE OF status ON runs
WHEN new.status <> 'paused' AND new.resumes_at IS NOT NULL
BEGIN
    UPDATE runs SET resumes_at = NULL WHERE id = new.id;
END;
CREATE TRIGGER usage_limits_changed AFTER INSERT ON usage_limits BEGIN
    UPDATE status_version SET version = version + 1;
END;
