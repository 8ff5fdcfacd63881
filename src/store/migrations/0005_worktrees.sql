-- A git worktree per run: where it is, its branch, the commit it started
-- from, the repository and branch it was launched from (where `merge`
-- brings its changes), and when it was discarded.
ALTER TABLE runs ADD COLUMN worktree_path TEXT;
ALTER TABLE runs ADD COLUMN worktree_branch TEXT;
ALTER TABLE runs ADD COLUMN worktree_base TEXT;
ALTER TABLE runs ADD COLUMN worktree_repo TEXT;
ALTER TABLE runs ADD COLUMN worktree_from_branch TEXT;
ALTER TABLE runs ADD COLUMN worktree_removed_at TEXT;
