-- What a fire being carried out holds of its schedule's bounds, taken in
-- one write with what every other fire holds: runs of the hour
-- (`max_runs_per_hour`) and the day's budget each of its runs is given.
-- Two fires at once under `overlap: allow` never both take the same room.
ALTER TABLE fires ADD COLUMN reserved_runs INTEGER NOT NULL DEFAULT 0;
ALTER TABLE fires ADD COLUMN reserved_usd_each REAL;
ALTER TABLE fires ADD COLUMN reserved_tokens_each INTEGER;
