-- Budgets: how much a run (with its child runs) may spend before it is
-- frozen and the user asked. Spend is the run's usage columns, written live
-- by its shepherd as the agent reports each message. `pause_reason` says
-- why a run is paused when a person did not ask (NULL: by hand).
ALTER TABLE runs ADD COLUMN budget_usd REAL;
ALTER TABLE runs ADD COLUMN budget_tokens INTEGER;
ALTER TABLE runs ADD COLUMN on_budget TEXT;
ALTER TABLE runs ADD COLUMN pause_reason TEXT;
-- A reason stands only while the run is running (asked) or paused.
CREATE TRIGGER runs_pause_reason_agrees_with_status AFTER UPDATE OF status ON runs
WHEN new.status NOT IN ('running', 'paused') AND new.pause_reason IS NOT NULL
BEGIN
    UPDATE runs SET pause_reason = NULL WHERE id = new.id;
END;
-- A pause for a budget is something the tray asks about: it moves the
-- status version like a change of status.
CREATE TRIGGER runs_pause_reason_changed AFTER UPDATE OF pause_reason ON runs
WHEN old.pause_reason IS NOT new.pause_reason
BEGIN
    UPDATE status_version SET version = version + 1;
END;
