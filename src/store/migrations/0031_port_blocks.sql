-- A block of ports per run (`ports: N`): `CORRAL_PORT` is its first. No
-- two active runs hold overlapping blocks; a run's block is free again
-- once it ends. Allocated in the run's own insert (one IMMEDIATE write), so
-- two launches at once never get the same ports.
ALTER TABLE runs ADD COLUMN ports_first INTEGER;
ALTER TABLE runs ADD COLUMN ports_count INTEGER;
