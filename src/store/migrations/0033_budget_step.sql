-- What "Allow more" adds to a run's budget: the budget it was launched
-- with, every time (it offered the budget's size as it had grown, so a
-- $2 budget asked for $2, then $4, then $8).
ALTER TABLE runs ADD COLUMN budget_step_usd REAL;
ALTER TABLE runs ADD COLUMN budget_step_tokens INTEGER;
UPDATE runs SET budget_step_usd = budget_usd, budget_step_tokens = budget_tokens;
