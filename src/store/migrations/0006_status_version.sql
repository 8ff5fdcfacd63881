-- A counter that moves only when what the tray shows changes: a run added,
-- a status, a run cleared or seen. Transcript lines commit all the time;
-- the tray and notifications look at this instead of every commit.
CREATE TABLE status_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO status_version (id, version) VALUES (1, 0);
CREATE TRIGGER runs_added AFTER INSERT ON runs BEGIN
    UPDATE status_version SET version = version + 1;
END;
CREATE TRIGGER runs_status_changed AFTER UPDATE OF status, dismissed_at, seen_at ON runs
WHEN old.status IS NOT new.status OR old.dismissed_at IS NOT new.dismissed_at OR old.seen_at IS NOT new.seen_at
BEGIN
    UPDATE status_version SET version = version + 1;
END;
