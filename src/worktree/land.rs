//! Landing merges on the user's branch, and what a merge cut short left.
//!
//! Every merge of Corral's into a repository holds that repository's merge
//! lock from before it reads the runs until it has landed or been refused
//! ([`MergeLock`]): two merges (a retried MCP `merge_run`, the window and
//! the CLI, a heal) never interleave. A set of runs is prepared whole,
//! each merge made on the one before (see `merge`), so whatever cannot
//! merge is refused before anything moves; then the set lands in one
//! step ([`land`]): the user's index and files as `git checkout` would
//! move them, then the branch, only from the commit it was on. Nothing is
//! ever taken back by moving the branch: a landing that fails puts back
//! only the files it moved, to where the branch now is, and a process
//! killed between the two leaves files the next heal puts back from the
//! journal's commit ([`take_back_files`]).

use std::fs::File;
use std::path::Path;

use super::git::{git, head_of, output, stderr_of, Env};
use super::merge::{run_hook, Prepared};
use super::WorktreeError;
use crate::process::FileLock;

/// The longest a merge waits for a git of the user's that holds the
/// checkout's index.
const GIT_BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The merge lock of one repository, held while it lives.
pub struct MergeLock {
    _lock: FileLock,
}

impl MergeLock {
    /// The lock file, in the repository's common git folder: one per
    /// repository, whichever worktree or Corral home merges into it.
    fn file(repo: &Path) -> Result<File, WorktreeError> {
        let common = super::common_dir(repo)?;
        let path = common.join("corral-merge.lock");
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(|e| {
            WorktreeError::Git {
                doing: "taking the repository's merge lock",
                detail: format!("{}: {e}", path.display()),
            }
        })
    }

    /// Takes `repo`'s merge lock, waiting while another merge holds it.
    pub fn take(repo: &Path) -> Result<MergeLock, WorktreeError> {
        let file = MergeLock::file(repo)?;
        FileLock::exclusive(file)
            .map(|lock| MergeLock { _lock: lock })
            .map_err(|e| WorktreeError::Git { doing: "taking the repository's merge lock", detail: e.to_string() })
    }

    /// Takes `repo`'s merge lock if nobody holds it.
    pub fn try_take(repo: &Path) -> Option<MergeLock> {
        FileLock::try_exclusive(MergeLock::file(repo).ok()?).map(|lock| MergeLock { _lock: lock })
    }
}

/// Lands `steps` (merges prepared in order, each on the one before, the
/// first on the branch's HEAD) on the user's branch of `repo`: the index
/// and files move from the first's parent to the last merge, as a checkout
/// would (files the merges do not touch, and the user's changes in them,
/// stay), then the branch, only from that parent; if it cannot, the files
/// go back to where the branch is. The hooks git runs after a commit run
/// once it landed, once per merge.
pub fn land(repo: &Path, steps: &[Prepared]) -> Result<(), WorktreeError> {
    let (Some(first), Some(last)) = (steps.first(), steps.last()) else { return Ok(()) };
    let (head, commit, merged_tree, branch) = (&first.head, &last.commit, &last.merged_tree, &last.branch);
    let plain = Env::default();
    // A git of the user's at work in the checkout (its index locked: a
    // commit in its hooks) is waited for, as git's own commands would
    // need it to finish.
    let waited_from = std::time::Instant::now();
    while git_busy(repo) {
        if waited_from.elapsed() > GIT_BUSY_WAIT {
            return Err(WorktreeError::WouldConflict(format!(
                "git is at work in {} (its index is locked: a commit or checkout of yours) and did not finish in {} \
                 s; nothing was changed. Merge again once it has",
                repo.display(),
                GIT_BUSY_WAIT.as_secs()
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Still the branch the merges were made for: a switch to another
    // branch meanwhile (during a slow hook) takes nothing of them.
    let full = format!("refs/heads/{branch}");
    let current = output(repo, &["symbolic-ref", "-q", "HEAD"], &plain, "reading your branch")?;
    if String::from_utf8_lossy(&current.stdout).trim() != full {
        return Err(WorktreeError::WouldConflict(format!(
            "{} switched away from {branch} while merging; nothing was changed. `git -C {} switch {branch}`, then \
             merge again",
            repo.display(),
            repo.display()
        )));
    }
    // Files first: a process killed before the branch moved leaves files
    // the journal's commit names, which the next heal puts back.
    let files = output(repo, &["read-tree", "-m", "-u", head, merged_tree], &plain, "updating your files")?;
    if !files.status.success() {
        return Err(WorktreeError::WouldConflict(format!(
            "merging would touch your work ({}); nothing was changed. Commit, stash or move your files there, then \
             merge again (the worktree stays)",
            stderr_of(&files)
        )));
    }
    let names: Vec<&str> = steps.iter().map(|s| s.run_branch.as_str()).collect();
    let reflog = format!("corral: merge {}", names.join(" "));
    // The branch itself, by name: never whichever branch HEAD names by then.
    let moved = output(repo, &["update-ref", "-m", &reflog, &full, commit, head], &plain, "moving your branch")?;
    if !moved.status.success() {
        // Where the branch moved meanwhile (a commit of the user's), the
        // files go to where it is now, never to where it was.
        let now = head_of(repo).unwrap_or_else(|_| head.clone());
        let moved_since = if now == *head { "" } else { ", it moved while merging" };
        let now_tree = format!("{now}^{{tree}}");
        let back = output(repo, &["read-tree", "-m", "-u", merged_tree, &now_tree], &plain, "putting your files back")?;
        let state = match back.status.success() {
            true => "nothing was changed".to_string(),
            false => format!(
                "and putting your files back failed too ({}): `git -C {} status` shows the files it changed",
                stderr_of(&back),
                repo.display()
            ),
        };
        return Err(WorktreeError::WouldConflict(format!(
            "cannot move {branch} to the merge ({}{moved_since}); {state}. Merge again",
            stderr_of(&moved)
        )));
    }
    for step in steps {
        let args: Vec<&str> = step.after.1.into_iter().collect();
        let _ = run_hook(repo, step.after.0, &args, &plain);
    }
    Ok(())
}
/// The commit `branch` of `repo` is on.
pub fn branch_tip(repo: &Path, branch: &str) -> Result<String, WorktreeError> {
    let full = format!("refs/heads/{branch}");
    Ok(git(repo, &["rev-parse", "--verify", &full], "reading your branch")?.trim().to_string())
}

/// True if a git process is writing `repo`'s index now (its lock is held).
pub fn git_busy(repo: &Path) -> bool {
    git(repo, &["rev-parse", "--git-path", "index.lock"], "looking for git at work")
        .map(|lock| repo.join(lock.trim()).exists())
        .unwrap_or(false)
}

/// What of a merge set whose process died is in `branch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InBranch {
    /// The branch's commit now.
    pub tip: String,
    /// The set's runs whose merge the branch holds, each with the commit of
    /// its own branch that went in.
    pub merged: Vec<(String, String)>,
}

/// Puts back the files a landing killed between moving them and moving
/// the branch left in `repo`: from `last`, the set's last journaled merge,
/// to `before`, where the branch still is (a branch elsewhere is left, as
/// are files the user changed since: then nothing is done). False if
/// files stayed that `last` would put back.
pub fn take_back_files(repo: &Path, before: &str, last: &str) -> bool {
    if head_of(repo).map_or(true, |head| head != before) {
        return true;
    }
    output(repo, &["read-tree", "-m", "-u", last, before], &Env::default(), "putting your files back")
        .is_ok_and(|out| out.status.success())
}

/// A run of a merge set, as the journal knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetRun {
    /// The run.
    pub id: String,
    /// Its own branch.
    pub branch: String,
    /// The commit its merge was about to put on the user's branch.
    pub commit: Option<String>,
}

/// Finds which of `runs` a merge set begun at `before` brought into
/// `branch` of `repo`: by the very commit journaled before the branch
/// moved. Never by a message or a parent, which anyone can make. Only
/// the branch's own line of commits since `before` is read (first
/// parents); a branch no longer holding `before` holds nothing of the set.
pub fn in_branch(repo: &Path, branch: &str, before: &str, runs: &[SetRun]) -> Result<InBranch, WorktreeError> {
    let plain = Env::default();
    let tip = branch_tip(repo, branch)?;
    let from_before =
        output(repo, &["merge-base", "--is-ancestor", before, &tip], &plain, "checking")?.status.success();
    if !from_before {
        return Ok(InBranch { tip, merged: Vec::new() });
    }
    let range = format!("{before}..{tip}");
    let listed = git(repo, &["rev-list", "--first-parent", "--max-count=1000", &range], "reading your branch")?;
    let tips: Vec<Option<String>> = runs.iter().map(|run| branch_tip(repo, &run.branch).ok()).collect();
    let mut merged: Vec<(String, String)> = Vec::new();
    for commit in listed.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let whose = runs.iter().zip(&tips).find(|(run, _)| run.commit.as_deref() == Some(commit));
        if let Some((run, Some(own))) = whose {
            if !merged.iter().any(|(m, _)| *m == run.id) {
                merged.push((run.id.clone(), own.clone()));
            }
        }
    }
    Ok(InBranch { tip, merged })
}
