-- When the user opened a run's transcript (the tray shows unseen failures).
ALTER TABLE runs ADD COLUMN seen_at TEXT;
CREATE INDEX runs_notified ON runs(notified_at);
