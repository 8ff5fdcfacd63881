-- Runs can be removed (`corral rm`, `corral prune`): a removed run leaves
-- the full-text index of runs with its row, as events already leave theirs.
CREATE TRIGGER runs_fts_delete AFTER DELETE ON runs BEGIN
    INSERT INTO runs_fts(runs_fts, rowid, task, final_text, error)
    VALUES ('delete', old.num, old.task, coalesce(old.final_text, ''), coalesce(old.error, ''));
END;
