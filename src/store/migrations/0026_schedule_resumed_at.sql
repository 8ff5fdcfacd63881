-- When a schedule was last resumed: fires that failed before it no longer
-- count towards `pause_after_failures` (a resumed schedule is not paused
-- again at once for the same old failures).
ALTER TABLE schedules ADD COLUMN resumed_at TEXT;
