-- Each run's transcript size is kept with the run (`du`'s largest runs
-- without summing millions of events), with what a transcript cap left
-- out: counted, never silently cut.
ALTER TABLE runs ADD COLUMN transcript_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN transcript_dropped_events INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN transcript_dropped_bytes INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET transcript_bytes = coalesce((
    SELECT sum(length(CAST(text AS BLOB)) + coalesce(length(CAST(json AS BLOB)), 0))
    FROM events WHERE events.run_id = runs.id), 0);
CREATE INDEX runs_transcript_bytes ON runs(transcript_bytes);
