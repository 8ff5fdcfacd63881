//! A git worktree per run: parallel agents on one repository never edit the
//! same files, and what a run changed can be reviewed, merged or discarded.
//!
//! At launch Corral finds the repository that holds the run's folder and
//! the commit to start from (HEAD, or `--base REF`); the shepherd creates
//! the worktree, outside the user's repository in Corral's data folder, on
//! a new branch `corral/<id>`, runs the preset's `setup` there, and starts
//! the agent in the same subfolder of it. Uncommitted work in the user's
//! tree is not copied. Every git call is an argv, never a shell line (see
//! `git`); what a run changed is read from a snapshot of its worktree (see
//! `snapshot`), and merged by git's own three-way merge (see `merge`).

mod across;
pub mod carry;
mod git;
mod land;
mod merge;
mod publish;
mod snapshot;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use across::{conflicts, Conflict, Judged};
pub use carry::{carry, Carried};
pub use git::head_of;
use git::{git, output, Env};
pub use land::{branch_tip, git_busy, in_branch, land, take_back_files, InBranch, MergeLock, SetRun};
pub use merge::{prepare_merge_commits, prepare_squashed, Prepared};
pub use publish::{commit_for_review, merge_for_review, Published};
pub use snapshot::{changes, patch, patch_by_file, unmerged, unmerged_on_branch};

/// How much a run's worktree changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeCount {
    /// Files changed.
    pub files: u64,
    /// Lines added.
    pub added: u64,
    /// Lines removed.
    pub removed: u64,
}

/// A run's worktree, as the run object shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worktree {
    /// Its folder.
    pub path: String,
    /// Its branch, `corral/<id>`.
    pub branch: String,
    /// The commit it started from.
    pub base: String,
    /// The commit of its branch merged last, if it was merged: the next
    /// merge (and `diff`) starts from there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<String>,
    /// True if that merge was a squash (its commits are not in the branch).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub merged_squashed: bool,
}

/// Where a run's worktree comes from, decided at launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The top folder of the repository (or worktree) the run was launched in.
    pub repo: PathBuf,
    /// The run's folder relative to it (`""` at the top).
    pub prefix: PathBuf,
    /// The commit to start from.
    pub base: String,
    /// The branch checked out there, if any: where `merge` brings changes.
    pub from_branch: Option<String>,
}

/// What went wrong with a worktree.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// The run's folder is in no git repository.
    #[error("{0} is not in a git repository: a worktree needs one (run `git init`), or launch without --worktree")]
    NotARepo(PathBuf),
    /// The base does not name a commit.
    #[error("--base {reference} is not a commit in {repo}: {detail}")]
    BadBase { reference: String, repo: PathBuf, detail: String },
    /// git could not be run.
    #[error("cannot run git ({doing}): {source}{}", if source.kind() == std::io::ErrorKind::NotFound { "; install git" } else { "" })]
    NoGit { doing: &'static str, source: std::io::Error },
    /// A git command failed.
    #[error("git failed {doing}: {detail}")]
    Git { doing: &'static str, detail: String },
    /// A file the checkout ignores could not be carried into the worktree
    /// (what was carried before it is taken out again).
    #[error("cannot carry {entry} into the run's worktree: {source}; nothing was carried (fix .worktreeinclude or `worktree_include:`, or make room)")]
    Carry { entry: String, source: std::io::Error },
    /// The run has no worktree.
    #[error("run {0} has no worktree: it ran in its own folder (launch with --worktree for one)")]
    NoWorktree(String),
    /// The run's worktree was removed.
    #[error("run {0}'s worktree was discarded")]
    Discarded(String),
    /// The run's worktree is recorded but not on disk.
    #[error(
        "run {run}'s worktree {path} is not there: it was never made (`corral show {run}` says why) or was removed by hand. What it committed is still on its branch (`git merge {branch}` takes it); `corral discard {run}` drops the branch and forgets the worktree"
    )]
    Missing { run: String, path: String, branch: String },
    /// The run is still active.
    #[error("run {0} is still active: wait for it, or abort it first")]
    Active(String),
    /// Merging would change the user's work.
    #[error("{0}")]
    WouldConflict(String),
    /// The run's folder is not in the commit its worktree starts from.
    #[error(
        "the folder {} is not in commit {base} (not committed yet), so the run's worktree would not have it: commit it, launch from a committed folder, or launch without --worktree", folder.display()
    )]
    FolderNotInBase { folder: PathBuf, base: String },
    /// Another run works in the worktree.
    #[error("run {run} works in {path}: it is not removed while that run is active; wait for it, or abort it first")]
    InUse { run: String, path: String },
}

/// Finds the repository holding `cwd` and the commit to start from.
pub fn plan(cwd: &Path, base: Option<&str>) -> Result<Plan, WorktreeError> {
    let top = match output(cwd, &["rev-parse", "--show-toplevel"], &Env::default(), "finding the repository") {
        Ok(out) if out.status.success() => PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()),
        Ok(_) => return Err(WorktreeError::NotARepo(cwd.to_path_buf())),
        Err(e) => return Err(e),
    };
    let prefix = PathBuf::from(git(cwd, &["rev-parse", "--show-prefix"], "finding the subfolder")?.trim());
    let reference = base.unwrap_or("HEAD");
    let spec = format!("{reference}^{{commit}}");
    let out = output(&top, &["rev-parse", "--verify", "--quiet", &spec], &Env::default(), "resolving the base")?;
    if !out.status.success() {
        let detail =
            if base.is_none() { "the repository has no commit yet".to_string() } else { "no such commit".to_string() };
        return Err(WorktreeError::BadBase { reference: reference.to_string(), repo: top, detail });
    }
    let base = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // The run works in the same subfolder of its worktree: a folder that
    // is not in the commit (not committed yet) would not be there.
    if !prefix.as_os_str().is_empty() {
        let spec = format!("{base}:{}", prefix.to_string_lossy().trim_end_matches('/'));
        let there = output(&top, &["cat-file", "-e", &spec], &Env::default(), "looking for the folder in the base")?;
        if !there.status.success() {
            return Err(WorktreeError::FolderNotInBase {
                folder: prefix,
                base: base[..base.len().min(12)].to_string(),
            });
        }
    }
    let from_branch =
        output(&top, &["symbolic-ref", "--quiet", "--short", "HEAD"], &Env::default(), "reading the branch")?;
    let from_branch = from_branch
        .status
        .success()
        .then(|| String::from_utf8_lossy(&from_branch.stdout).trim().to_string())
        .filter(|b| !b.is_empty());
    Ok(Plan { repo: top, prefix, base, from_branch })
}

/// The object store of a worktree's own, in its administrative folder
/// `own` (`<repo>/.git/worktrees/<name>`): what Corral writes only to read
/// (a snapshot, a merge tried), and what a sandboxed agent commits (the
/// repository's own objects are read-only in its sandbox). A merge copies
/// in what it needs, each object checked against its name.
pub fn agent_objects(own: &Path) -> PathBuf {
    own.join("corral-objects")
}

/// The branch of run `id`.
pub fn branch_of(id: &str) -> String {
    format!("corral/{id}")
}

/// Creates the worktree at `path` on branch `branch` from `base`.
pub fn create(repo: &Path, path: &Path, branch: &str, base: &str) -> Result<(), WorktreeError> {
    if let Some(parent) = path.parent() {
        // 0700: git checks files out 0644, and what the agent writes there
        // (a copy of a private repository, `.env` keys) is the user's alone.
        crate::home::keep_private(parent)
            .map_err(|e| WorktreeError::Git { doing: "creating the worktrees folder", detail: e.to_string() })?;
    }
    let path = path.to_string_lossy();
    // Runs launched together add worktrees of one repository at once, and
    // git trips over itself there: a lock another `git worktree add` holds
    // a moment, or another's administrative folder read half-made ("failed
    // to read .git/worktrees/…/commondir"), which fails the add after it
    // made the branch. Both are waited out, and a branch such a failure
    // left at the base is taken as it is.
    let mut pause = std::time::Duration::from_millis(20);
    let mut take_branch = false;
    loop {
        let args: Vec<&str> = match take_branch {
            true => vec!["worktree", "add", "--quiet", &path, branch],
            false => vec!["worktree", "add", "--quiet", "-b", branch, &path, base],
        };
        let added = output(repo, &args, &Env::default(), "creating the worktree")?;
        if added.status.success() {
            return Ok(());
        }
        let said = git::stderr_of(&added);
        let tripped = said.contains(".lock") || (said.contains("failed to read") && said.contains("worktrees/"));
        if !tripped || pause > std::time::Duration::from_secs(2) {
            return Err(WorktreeError::Git { doing: "creating the worktree", detail: said });
        }
        std::thread::sleep(pause);
        pause *= 2;
        take_branch = branch_at(repo, branch, base)?;
    }
}

/// Whether branch `branch` exists at the commit `base` names.
fn branch_at(repo: &Path, branch: &str, base: &str) -> Result<bool, WorktreeError> {
    let commit = |name: String| -> Result<Option<String>, WorktreeError> {
        let out = output(repo, &["rev-parse", "--verify", "--quiet", &name], &Env::default(), "creating the worktree")?;
        Ok(out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()))
    };
    let at = commit(format!("refs/heads/{branch}^{{commit}}"))?;
    Ok(at.is_some() && at == commit(format!("{base}^{{commit}}"))?)
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileChange {
    /// Its path in the repository.
    pub path: String,
    /// Lines added (0 for a binary file).
    pub added: u64,
    /// Lines removed (0 for a binary file).
    pub removed: u64,
    /// True for a binary file.
    pub binary: bool,
}

/// Everything a run changed against its base: its commits, its uncommitted
/// and its untracked files alike.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Changes {
    /// The commit it started from.
    pub base: String,
    /// Changed files, by path.
    pub files: Vec<FileChange>,
    /// Lines added in all.
    pub added: u64,
    /// Lines removed in all.
    pub removed: u64,
}

impl Changes {
    /// How much changed, in numbers.
    pub fn count(&self) -> ChangeCount {
        ChangeCount { files: self.files.len() as u64, added: self.added, removed: self.removed }
    }
}

/// The git folder `repo`'s objects, refs and settings are in (its
/// `.git`, or a bare repository's own folder), as on disk.
pub fn common_dir(repo: &Path) -> Result<PathBuf, WorktreeError> {
    let common = git(repo, &["rev-parse", "--path-format=absolute", "--git-common-dir"], "finding the repository")?;
    let common = PathBuf::from(common.trim());
    Ok(std::fs::canonicalize(&common).unwrap_or(common))
}

/// The top folder of the repository a worktree belongs to (its main
/// working tree), which outlives any other worktree.
pub fn main_repository(worktree: &Path) -> Option<PathBuf> {
    let common = git(worktree, &["rev-parse", "--path-format=absolute", "--git-common-dir"], "finding the repository");
    let common = PathBuf::from(common.ok()?.trim());
    // `<top>/.git` for a repository with a working tree; a bare one has none.
    (common.file_name()? == ".git").then(|| common.parent().map(Path::to_path_buf)).flatten()
}

/// Removes the worktree and its branch.
pub fn remove(repo: &Path, worktree: &Worktree) -> Result<(), WorktreeError> {
    // A run launched in another run's worktree, since removed: its
    // repository's own folder does it.
    let main = (!repo.is_dir()).then(|| main_repository(Path::new(&worktree.path))).flatten();
    let repo = main.as_deref().unwrap_or(repo);
    let path = Path::new(&worktree.path);
    if is_there(path) {
        git(repo, &["worktree", "remove", "--force", &worktree.path], "removing the worktree")?;
    } else {
        // Removed by hand (or an empty folder put where it was): its own
        // entry in the repository's list is forgotten, never with `git
        // worktree prune`, which forgets every worktree not there now
        // (the user's own, on a disk unmounted).
        forget_entry(repo, path)?;
        let _ = std::fs::remove_dir(path);
    }
    let exists =
        output(repo, &["rev-parse", "--verify", "--quiet", &worktree.branch], &Env::default(), "finding the branch")?;
    if exists.status.success() {
        git(repo, &["branch", "-D", &worktree.branch], "deleting the branch")?;
    }
    Ok(())
}

/// Whether a worktree stands at `path`: its folder with git's `.git` file
/// in it (an empty folder put where it was is none, and git would take
/// it for whatever repository holds it).
pub fn is_there(path: &Path) -> bool {
    path.join(".git").symlink_metadata().is_ok()
}

/// Forgets the entry of the worktree that was at `path` in `repo`'s list
/// (`.git/worktrees/<name>`, found by the `gitdir` it names), and no
/// other.
fn forget_entry(repo: &Path, path: &Path) -> Result<(), WorktreeError> {
    let entries = common_dir(repo)?.join("worktrees");
    let mut names = vec![path.join(".git")];
    if let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
        if let Ok(real) = std::fs::canonicalize(parent) {
            names.push(real.join(name).join(".git"));
        }
    }
    let Ok(listed) = std::fs::read_dir(&entries) else { return Ok(()) };
    for entry in listed.flatten() {
        let gitdir = std::fs::read_to_string(entry.path().join("gitdir")).unwrap_or_default();
        if names.iter().any(|n| Path::new(gitdir.trim()) == n.as_path()) {
            std::fs::remove_dir_all(entry.path())
                .map_err(|e| WorktreeError::Git { doing: "forgetting the removed worktree", detail: e.to_string() })?;
        }
    }
    Ok(())
}

/// The disk space runs' worktrees take.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DiskUsage {
    /// Worktrees in the folder.
    pub worktrees: u64,
    /// Bytes they take on disk (allocated blocks, links not followed).
    pub bytes: u64,
}

/// What the worktrees under `dir` (`Home::worktrees_dir`) take on disk.
/// Files that vanish while it counts (a worktree being removed) are skipped.
pub fn disk_usage(dir: &Path) -> DiskUsage {
    let Ok(entries) = std::fs::read_dir(dir) else { return DiskUsage::default() };
    let mut usage = DiskUsage::default();
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            usage.worktrees += 1;
            usage.bytes += bytes_under(&entry.path());
        }
    }
    usage
}

/// Bytes allocated on disk below `dir` (links not followed; files that
/// vanish while it counts are skipped).
pub fn bytes_under(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        for entry in entries.flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else { continue };
            total += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_usage_counts_worktrees_and_their_files() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(disk_usage(&dir.path().join("none")), DiskUsage::default());
        for run in ["a", "b"] {
            std::fs::create_dir_all(dir.path().join(run).join("src")).unwrap();
            std::fs::write(dir.path().join(run).join("src/big"), vec![7u8; 64 << 10]).unwrap();
        }
        let usage = disk_usage(dir.path());
        assert_eq!(usage.worktrees, 2);
        assert!(usage.bytes >= 2 * (64 << 10), "{usage:?}");
    }
}
