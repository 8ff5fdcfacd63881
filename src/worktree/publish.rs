//! A run's work as commits on its own branch, made as the user's own commit
//! would be — their repository's `pre-commit` and `commit-msg` hooks judge
//! it, their identity signs it — so the branch can be pushed for review (a
//! pull request). What Corral carried in from the user's checkout (`.env`)
//! stays out, as in a merge; the user's own checkout is not touched.

use std::path::Path;

use super::git::{committer, git, temp_file_with, Env, ScratchObjects};
use super::merge::{commit_on_run_branch, judged_by_hooks, merge_tree};
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

/// Merges the commit `theirs` (run `run_id`'s branch, committed for
/// review) into `onto` for a pull request of several runs: a merge commit made by git's
/// own three-way merge, apart from any checkout, as the user (or Corral, if
/// git knows no user). `None` when `onto` holds `theirs` already (nothing
/// new from that run). Refused with the files when they conflict.
pub fn merge_for_review(
    repo: &Path,
    (onto, theirs): (&str, &str),
    message: &str,
    run_id: &str,
) -> Result<Option<String>, WorktreeError> {
    let env = Env::default();
    let held = super::git::output(repo, &["merge-base", "--is-ancestor", theirs, onto], &env, "merging")?;
    if held.status.success() {
        return Ok(None);
    }
    let tree = match merge_tree(repo, onto, theirs, &env)? {
        Ok(tree) => tree,
        Err(files) => {
            return Err(WorktreeError::WouldConflict(format!(
                "its work and what the pull request holds before it (the base as the remote has it now, and the runs \
                 before it) both change {}; nothing was pushed. Reply to the run to bring the base in and resolve \
                 it there (`corral reply {run_id} \"merge the remote's base and resolve\"`), then push again",
                files.join(", ")
            )))
        }
    };
    let message_file = temp_file_with(message.as_bytes(), "writing the merge's message")?;
    let message_path = message_file.path().to_string_lossy().into_owned();
    let mut args: Vec<&str> = committer(repo)?.to_vec();
    args.extend(["commit-tree", &tree, "-p", onto, "-p", theirs, "-F", &message_path]);
    Ok(Some(git(repo, &args, "committing the merge")?.trim().to_string()))
}
