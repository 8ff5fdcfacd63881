-- What each run spent, kept apart from the run: a ledger that removing a
-- run (`rm`, `prune`, a schedule's `keep`) does not shrink. One row per
-- run, here or on a host, with the run that launched it and the schedule
-- fire that caused it (its own, or its tree's root's), so a day's budget
-- counts every run the schedule caused, wherever it ran, and a run's tree
-- counts its children after they are gone. Amounts only grow, and are
-- never below zero, whatever a host reports.
CREATE TABLE spend (
    run_id    TEXT PRIMARY KEY,
    host      TEXT,
    parent_id TEXT,
    fire      INTEGER,
    usd       REAL NOT NULL DEFAULT 0,
    priced    INTEGER NOT NULL DEFAULT 1,
    estimated INTEGER NOT NULL DEFAULT 0,
    tokens    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX spend_by_parent ON spend (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX spend_by_fire ON spend (fire) WHERE fire IS NOT NULL;

INSERT INTO spend (run_id, parent_id, usd, priced, estimated, tokens)
SELECT id, parent_id, max(coalesce(cost_usd, 0), 0),
       cost_usd IS NOT NULL OR input_tokens + output_tokens + cache_read_tokens + cache_write_tokens = 0,
       cost_estimated, max(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens, 0)
FROM runs;

INSERT OR IGNORE INTO spend (run_id, host, parent_id, usd, priced, estimated, tokens)
SELECT id, host, launched_by, max(coalesce(json_extract(run, '$.cost_usd'), 0), 0),
       json_extract(run, '$.cost_usd') IS NOT NULL, coalesce(json_extract(run, '$.cost_estimated'), 0),
       max(coalesce(json_extract(run, '$.usage.input_tokens'), 0) + coalesce(json_extract(run, '$.usage.output_tokens'), 0)
         + coalesce(json_extract(run, '$.usage.cache_read_tokens'), 0)
         + coalesce(json_extract(run, '$.usage.cache_write_tokens'), 0), 0)
FROM remote_runs;

UPDATE spend SET fire = (SELECT max(fire) FROM fire_runs WHERE fire_runs.run_id = spend.run_id);

WITH RECURSIVE caused (run_id, fire) AS (
    SELECT run_id, fire FROM spend WHERE fire IS NOT NULL
    UNION SELECT s.run_id, caused.fire FROM spend s JOIN caused ON s.parent_id = caused.run_id)
UPDATE spend SET fire = (SELECT max(fire) FROM caused WHERE caused.run_id = spend.run_id)
WHERE fire IS NULL AND run_id IN (SELECT run_id FROM caused);

-- A run here: its row, with what caused its parent.
CREATE TRIGGER spend_of_new_run AFTER INSERT ON runs BEGIN
    INSERT OR IGNORE INTO spend (run_id, parent_id, fire)
    VALUES (NEW.id, NEW.parent_id, (SELECT fire FROM spend WHERE run_id = NEW.parent_id));
END;

CREATE TRIGGER spend_of_run
AFTER UPDATE OF cost_usd, cost_estimated, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens ON runs
BEGIN
    UPDATE spend SET
        usd = max(usd, coalesce(NEW.cost_usd, 0)),
        priced = NEW.cost_usd IS NOT NULL
            OR NEW.input_tokens + NEW.output_tokens + NEW.cache_read_tokens + NEW.cache_write_tokens = 0,
        estimated = max(estimated, NEW.cost_estimated),
        tokens = max(tokens, NEW.input_tokens + NEW.output_tokens + NEW.cache_read_tokens + NEW.cache_write_tokens)
    WHERE run_id = NEW.id;
END;

-- A run on a host, as its store says: never less than before, never
-- below zero.
CREATE TRIGGER spend_of_new_host_run AFTER INSERT ON remote_runs BEGIN
    INSERT OR IGNORE INTO spend (run_id, host, parent_id, fire)
    VALUES (NEW.id, NEW.host, NEW.launched_by, (SELECT fire FROM spend WHERE run_id = NEW.launched_by));
    UPDATE spend SET
        usd = max(usd, coalesce(json_extract(NEW.run, '$.cost_usd'), 0)),
        priced = json_extract(NEW.run, '$.cost_usd') IS NOT NULL,
        estimated = max(estimated, coalesce(json_extract(NEW.run, '$.cost_estimated'), 0)),
        tokens = max(tokens, coalesce(json_extract(NEW.run, '$.usage.input_tokens'), 0)
            + coalesce(json_extract(NEW.run, '$.usage.output_tokens'), 0)
            + coalesce(json_extract(NEW.run, '$.usage.cache_read_tokens'), 0)
            + coalesce(json_extract(NEW.run, '$.usage.cache_write_tokens'), 0))
    WHERE run_id = NEW.id;
END;

CREATE TRIGGER spend_of_host_run AFTER UPDATE OF run ON remote_runs BEGIN
    UPDATE spend SET
        usd = max(usd, coalesce(json_extract(NEW.run, '$.cost_usd'), 0)),
        priced = json_extract(NEW.run, '$.cost_usd') IS NOT NULL,
        estimated = max(estimated, coalesce(json_extract(NEW.run, '$.cost_estimated'), 0)),
        tokens = max(tokens, coalesce(json_extract(NEW.run, '$.usage.input_tokens'), 0)
            + coalesce(json_extract(NEW.run, '$.usage.output_tokens'), 0)
            + coalesce(json_extract(NEW.run, '$.usage.cache_read_tokens'), 0)
            + coalesce(json_extract(NEW.run, '$.usage.cache_write_tokens'), 0))
    WHERE run_id = NEW.id;
END;

CREATE TRIGGER spend_of_host_run_launcher AFTER UPDATE OF launched_by ON remote_runs
WHEN NEW.launched_by IS NOT NULL BEGIN
    UPDATE spend SET parent_id = NEW.launched_by,
        fire = coalesce(fire, (SELECT fire FROM spend WHERE run_id = NEW.launched_by))
    WHERE run_id = NEW.id;
END;
