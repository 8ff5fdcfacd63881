-- The precheck a fire runs (its process group's leader, and its cgroup
-- where one was made): a fire settled because its firer died stops the
-- precheck that firer left running, rather than letting it run to its own
-- end.
ALTER TABLE fires ADD COLUMN precheck_pid INTEGER;
ALTER TABLE fires ADD COLUMN precheck_start INTEGER;
ALTER TABLE fires ADD COLUMN precheck_cgroup TEXT;
