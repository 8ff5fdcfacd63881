-- A run removed (`rm`, `prune`, a schedule's `keep`) changes every list
-- and count as a new status does: the tray's "Needs you" and its red icon
-- follow at once, never only at some other run's next change.
CREATE TRIGGER runs_removed AFTER DELETE ON runs BEGIN
    UPDATE status_version SET version = version + 1;
END;
