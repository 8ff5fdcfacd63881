-- A transcript as the window shows it: every event but token usage, which
-- is folded into the row it follows. The window pages that list by
-- position (a virtual list of 100k rows); this index makes counting it
-- and finding a page's first row a walk of the index alone.
CREATE INDEX events_shown ON events (run_id, seq) WHERE kind != 'usage';
