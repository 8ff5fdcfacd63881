-- What a run's worktree changed (measured at its end, after its status
-- was recorded), a merge of it and its worktree's removal are changes the
-- views show (+N −M, the box to review it together, "merged"): each moves
-- the status version, or a list drawn at the run's end stays without them.
CREATE TRIGGER runs_changes_measured
AFTER UPDATE OF changes_files, changes_added, changes_removed, worktree_merged, worktree_removed_at ON runs
WHEN old.changes_files IS NOT new.changes_files
  OR old.changes_added IS NOT new.changes_added
  OR old.changes_removed IS NOT new.changes_removed
  OR old.worktree_merged IS NOT new.worktree_merged
  OR old.worktree_removed_at IS NOT new.worktree_removed_at
BEGIN
    UPDATE status_version SET version = version + 1;
END;
