//! `corral merge RUN`: brings a run's changes into the branch it started
//! from, as one commit (or, with `--no-squash`, a merge of its commits). It
//! never loses the user's work: with a conflict, or uncommitted changes in
//! the files it would touch, it changes nothing and says why.

use std::io::Write;
use std::path::Path;

use corral::worktree::{self, WorktreeError};
use corral::Store;

pub fn run(store: &Store, id: &str, no_squash: bool, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    let run = store.find_run(id)?;
    let worktree = super::diff::worktree_of(&run)?;
    if run.status.is_active() {
        return Err(WorktreeError::Active(run.id).into());
    }
    let repo = Path::new(run.worktree_repo.as_deref().unwrap_or_default());
    let Some(branch) = run.worktree_from_branch.as_deref() else {
        anyhow::bail!(
            "run {} was launched on a detached HEAD, so there is no branch to merge into: \
             merge by hand with `git -C {} merge {}`",
            run.id,
            repo.display(),
            worktree.branch
        );
    };
    let commit = if no_squash {
        worktree::merge_commits(repo, branch, worktree, &run.id)?
    } else {
        let task_line = run.task.lines().next().unwrap_or_default();
        let message = format!("{}: {task_line}\n\n{}\n\nCorral run {}", run.preset, run.task, run.id);
        worktree::merge_squashed(repo, branch, worktree, &message)?
    };
    if json {
        super::print_json(out, &serde_json::json!({ "run_id": run.id, "branch": branch, "commit": commit }))?;
    } else {
        writeln!(out, "{}  merged into {branch} as {}", run.id, &commit[..commit.len().min(12)])?;
    }
    Ok(0)
}
