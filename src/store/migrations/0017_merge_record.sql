-- What of a run's worktree was merged: the commit of its branch merged last
-- (the next merge, `diff` and `rm` start from there), and whether that merge
-- was a squash (its commits are not in the user's branch).
ALTER TABLE runs ADD COLUMN worktree_merged TEXT;
ALTER TABLE runs ADD COLUMN worktree_merged_squashed INTEGER NOT NULL DEFAULT 0;
