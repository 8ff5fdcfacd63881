-- How a run's processes are held, and what they used.
--
-- containment: JSON of `resources::Containment`: the run's cgroup folders
-- (v2, and v1 for limits on a hybrid system) and what was said of each
-- limit; its `cgroup` is null where the process tree is followed instead.
-- The reconciler empties a lost run's cgroup from here.
--
-- cpu_seconds, memory_peak_bytes: what the run's whole process tree used,
-- recorded when its last process is gone (and while it works).
--
-- paused_at: when the run was frozen (`corral pause`); pause_requested:
-- 1 while someone asked it to pause, 0 once asked to resume. Its
-- shepherd acts on both.
ALTER TABLE runs ADD COLUMN containment TEXT;
ALTER TABLE runs ADD COLUMN cpu_seconds REAL;
ALTER TABLE runs ADD COLUMN memory_peak_bytes INTEGER;
ALTER TABLE runs ADD COLUMN paused_at TEXT;
ALTER TABLE runs ADD COLUMN pause_requested INTEGER NOT NULL DEFAULT 0;
