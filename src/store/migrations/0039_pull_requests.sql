-- The pull request (GitHub) or merge request (GitLab) opened from a run's
-- branch: one a run, pushed to again by the next `corral pr`. `state`
-- (open | merged | closed), `checks` (passing | failing | pending) and
-- `review` (approved | changes_requested | commented) are as the forge
-- last said them (`looked_at`); `feedback` is what it asks of the run, in
-- its words (failed checks, reviews, line comments), changed last at
-- `feedback_at` and sent to the run last at `sent_at`; `dismissed_at`:
-- its end on the forge (merged, closed) looked at. The forge's own token
-- is never kept here (its CLI keeps it).
CREATE TABLE pull_requests (
    run_id    TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    forge     TEXT NOT NULL,          -- github | gitlab
    url       TEXT NOT NULL,
    number    INTEGER,
    remote    TEXT NOT NULL,          -- the remote pushed to
    head      TEXT NOT NULL,          -- the branch pushed there
    base      TEXT NOT NULL,          -- the branch it asks to merge into
    draft     INTEGER NOT NULL DEFAULT 0,
    state     TEXT NOT NULL DEFAULT 'open',
    pushed    TEXT NOT NULL,          -- the commit pushed last
    opened_at TEXT NOT NULL,
    pushed_at TEXT NOT NULL,
    checks       TEXT,
    review       TEXT,
    feedback     TEXT,
    feedback_at  TEXT,
    sent_at      TEXT,
    looked_at    TEXT,
    dismissed_at TEXT
);

-- A pull request opened, pushed to, or changed on the forge is a change
-- to its run: the views that show it (and what needs you) follow. A look
-- that found nothing new writes `looked_at` alone, and moves nothing.
CREATE TRIGGER pull_request_opened AFTER INSERT ON pull_requests BEGIN
    UPDATE status_version SET version = version + 1;
END;
CREATE TRIGGER pull_request_changed
AFTER UPDATE OF pushed, state, checks, review, feedback, sent_at, dismissed_at ON pull_requests BEGIN
    UPDATE status_version SET version = version + 1;
END;
