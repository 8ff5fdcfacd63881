-- A launch asked again under the same key (`corral launch --request KEY`,
-- what a host's launch over SSH sends: the connection may drop after the
-- run was made and before the answer came back) gets the run the first
-- made, never a second one. Written in the same transaction as the run.
CREATE TABLE launch_requests (
    key    TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE
);
