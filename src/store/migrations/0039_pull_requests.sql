-- The pull request (GitHub) or merge request (GitLab) opened from a run's
-- branch: one a run, pushed to again by the next `corral pr`. `state`,
-- `checks` and `review` are as the forge last said them. The forge's own
-- token is never kept here (its CLI keeps it).
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
    pushed_at TEXT NOT NULL
);

-- A pull request opened or pushed to is a change to its run: the views
-- that show it follow.
CREATE TRIGGER pull_request_opened AFTER INSERT ON pull_requests BEGIN
    UPDATE status_version SET version = version + 1;
END;
CREATE TRIGGER pull_request_pushed AFTER UPDATE ON pull_requests BEGIN
    UPDATE status_version SET version = version + 1;
END;
