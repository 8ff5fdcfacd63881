-- When a run's teardown ran (`teardown:` in its preset). Until then its
-- port block stays its own even after it ended: a teardown keyed on its
-- port (`dropdb app_{port}`) must not drop what a later run holding that
-- port made.
ALTER TABLE runs ADD COLUMN torn_down_at TEXT;
