-- The ledger says which schedule's fire caused a row, and when that fire
-- was, on the row itself: a fire trimmed from the history (a schedule
-- keeps its newest 1,000) or a fire id used again after `schedule rm`
-- never moves money off a day, nor onto another schedule's.
ALTER TABLE spend ADD COLUMN schedule TEXT;
ALTER TABLE spend ADD COLUMN fired_at TEXT;
UPDATE spend SET schedule = (SELECT schedule FROM fires WHERE fires.id = spend.fire),
                 fired_at = (SELECT fired_at FROM fires WHERE fires.id = spend.fire)
WHERE fire IS NOT NULL;
CREATE INDEX spend_by_schedule ON spend (schedule, fired_at) WHERE schedule IS NOT NULL;

DROP TRIGGER spend_of_new_run;
CREATE TRIGGER spend_of_new_run AFTER INSERT ON runs BEGIN
    INSERT OR IGNORE INTO spend (run_id, parent_id, fire, schedule, fired_at)
    SELECT NEW.id, NEW.parent_id, p.fire, p.schedule, p.fired_at
    FROM (SELECT 1) LEFT JOIN spend p ON p.run_id = NEW.parent_id;
END;

DROP TRIGGER spend_of_new_host_run;
CREATE TRIGGER spend_of_new_host_run AFTER INSERT ON remote_runs BEGIN
    INSERT OR IGNORE INTO spend (run_id, host, parent_id, fire, schedule, fired_at)
    SELECT NEW.id, NEW.host, NEW.launched_by, p.fire, p.schedule, p.fired_at
    FROM (SELECT 1) LEFT JOIN spend p ON p.run_id = NEW.launched_by;
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

DROP TRIGGER spend_of_host_run_launcher;
CREATE TRIGGER spend_of_host_run_launcher AFTER UPDATE OF launched_by ON remote_runs
WHEN NEW.launched_by IS NOT NULL BEGIN
    UPDATE spend SET parent_id = NEW.launched_by,
        fire = coalesce(fire, (SELECT fire FROM spend WHERE run_id = NEW.launched_by)),
        schedule = coalesce(schedule, (SELECT schedule FROM spend WHERE run_id = NEW.launched_by)),
        fired_at = coalesce(fired_at, (SELECT fired_at FROM spend WHERE run_id = NEW.launched_by))
    WHERE run_id = NEW.id;
END;
