-- A run's pause fields agree with its status, whichever path changed it (an
-- end recorded by its shepherd, a heal, an abort, a reply that reopens it):
-- `paused_at` is set only while the run is paused, and a pause request only
-- stands while the run is running or paused.
UPDATE runs SET paused_at = NULL WHERE status <> 'paused' AND paused_at IS NOT NULL;
UPDATE runs SET pause_requested = 0 WHERE status NOT IN ('running', 'paused') AND pause_requested <> 0;
CREATE TRIGGER runs_pause_agrees_with_status AFTER UPDATE OF status ON runs
WHEN (new.status <> 'paused' AND new.paused_at IS NOT NULL)
  OR (new.status NOT IN ('running', 'paused') AND new.pause_requested <> 0)
BEGIN
    UPDATE runs SET
        paused_at = CASE WHEN new.status = 'paused' THEN paused_at END,
        pause_requested = CASE WHEN new.status IN ('running', 'paused') THEN pause_requested ELSE 0 END
    WHERE id = new.id;
END;
