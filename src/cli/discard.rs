//! `corral discard RUN`: removes a run's worktree and its branch. Refused
//! while the run is active.

use std::io::Write;
use std::path::Path;

use corral::worktree::{self, WorktreeError};
use corral::Store;

pub fn run(store: &mut Store, id: &str, out: &mut impl Write) -> anyhow::Result<i32> {
    let run = store.find_run(id)?;
    let worktree = super::diff::worktree_of(&run)?;
    if run.status.is_active() {
        return Err(WorktreeError::Active(run.id).into());
    }
    worktree::remove(Path::new(run.worktree_repo.as_deref().unwrap_or_default()), worktree)?;
    store.mark_worktree_removed(&run.id)?;
    writeln!(out, "{}  worktree and branch {} removed", run.id, worktree.branch)?;
    Ok(0)
}
