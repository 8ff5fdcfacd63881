//! A run's work as commits on its own branch, made as the user's own commit
//! would be — their repository's `pre-commit` and `commit-msg` hooks judge
//! it, their identity signs it — so the branch can be pushed for review (a
//! pull request). What Corral carried in from the user's checkout (`.env`)
//! stays out, as in a merge; the user's own checkout is not touched.

use std::path::Path;

use super::git::{git, ScratchObjects};
use super::merge::{commit_on_run_branch, judged_by_hooks};
use super::snapshot::{nested_repositories, snapshot, unmerged_from};
use super::{Worktree, WorktreeError};

/// The run's branch, ready to push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The branch's commit.
    pub commit: String,
    /// True if this call committed work the agent had left uncommitted.
    pub committed: bool,
}

/// Commits what the worktree holds and its branch does not yet on the
/// run's branch, with `message` as the hooks of the repository `repo` leave
/// it. Refused when the run changed nothing since it started (or since it
/// was merged).
pub fn commit_for_review(repo: &Path, worktree: &Worktree, message: &str) -> Result<Published, WorktreeError> {
    let path = Path::new(&worktree.path);
    let objects = ScratchObjects::for_worktree(path)?;
    let snap = snapshot(path, &objects)?;
    let tip = git(path, &["rev-parse", "--verify", "HEAD"], "reading the run's branch")?.trim().to_string();
    let tip_tree = git(path, &["rev-parse", &format!("{tip}^{{tree}}")], "reading the run's branch")?;
    let from = unmerged_from(worktree);
    let from_tree = git(path, &["rev-parse", &format!("{from}^{{tree}}")], "reading the run's base")?;
    if snap.tree == from_tree.trim() {
        return Err(WorktreeError::WouldConflict(
            "the run changed nothing since it started (or was merged): there is nothing to review".into(),
        ));
    }
    if snap.tree == tip_tree.trim() {
        return Ok(Published { commit: tip, committed: false });
    }
    let nested = nested_repositories(path, from, &snap.tree, &objects)?;
    if !nested.is_empty() {
        return Err(WorktreeError::WouldConflict(format!(
            "the run made a repository inside its worktree ({}): git would push it as a link to nothing; move or \
             remove it in {}, then try again",
            nested.join(", "),
            worktree.path
        )));
    }
    let message_file = judged_by_hooks(repo, &snap.tree, message, &objects, "pre-commit")?;
    let message_path = message_file.path().to_string_lossy().into_owned();
    let commit = commit_on_run_branch(worktree, &snap, &objects, &["-F", &message_path])?;
    // A sandboxed agent's objects live in the worktree's own store: what
    // the branch holds is copied into the repository that pushes it.
    objects.keep(repo, &[&commit])?;
    Ok(Published { commit, committed: true })
}
