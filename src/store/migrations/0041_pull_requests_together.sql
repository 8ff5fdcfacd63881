-- One pull request of several runs (`corral pr A B C`): each run has its
-- row, all with the pull request's page, marked `together`; their order
-- (rowid) is the order their work is merged in. What the forge says of it
-- is the pull request's, written to every row of it at once.
ALTER TABLE pull_requests ADD COLUMN together INTEGER NOT NULL DEFAULT 0;
CREATE INDEX pull_requests_by_url ON pull_requests (url);
