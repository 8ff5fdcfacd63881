//! A git worktree per run: parallel agents on one repository never edit the
//! same files, and what a run changed can be reviewed, merged or discarded.
//!
//! At launch Corral finds the repository that holds the run's folder and
//! the commit to start from (HEAD, or `--base REF`); the shepherd creates
//! the worktree, outside the user's repository in Corral's data folder, on
//! a new branch `corral/<id>`, runs the preset's `setup` there, and starts
//! the agent in the same subfolder of it. Uncommitted work in the user's
//! tree is not copied. Every git call is an argv, never a shell line.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde::{Deserialize, Serialize};

/// A run's worktree, as the run object shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worktree {
    /// Its folder.
    pub path: String,
    /// Its branch, `corral/<id>`.
    pub branch: String,
    /// The commit it started from.
    pub base: String,
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
    /// The run has no worktree.
    #[error("run {0} has no worktree: it ran in its own folder (launch with --worktree for one)")]
    NoWorktree(String),
    /// The run's worktree was removed.
    #[error("run {0}'s worktree was discarded")]
    Discarded(String),
    /// The run is still active.
    #[error("run {0} is still active: wait for it, or abort it first")]
    Active(String),
    /// Merging would change the user's work.
    #[error("{0}")]
    WouldConflict(String),
}

/// Runs git with `args` in `dir`; its stdout on success.
fn git(dir: &Path, args: &[&str], doing: &'static str) -> Result<String, WorktreeError> {
    let out = git_output(dir, args, &[], doing)?;
    if !out.status.success() {
        return Err(WorktreeError::Git { doing, detail: stderr_of(&out) });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn git_output(dir: &Path, args: &[&str], env: &[(&str, &Path)], doing: &'static str) -> Result<Output, WorktreeError> {
    let mut command = Command::new("git");
    command.arg("-C").arg(dir).args(args).env("GIT_TERMINAL_PROMPT", "0");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().map_err(|source| WorktreeError::NoGit { doing, source })
}

fn stderr_of(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr);
    text.trim().lines().last().unwrap_or("").to_string()
}

/// Finds the repository holding `cwd` and the commit to start from.
pub fn plan(cwd: &Path, base: Option<&str>) -> Result<Plan, WorktreeError> {
    let top = match git_output(cwd, &["rev-parse", "--show-toplevel"], &[], "finding the repository") {
        Ok(out) if out.status.success() => PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()),
        Ok(_) => return Err(WorktreeError::NotARepo(cwd.to_path_buf())),
        Err(e) => return Err(e),
    };
    let prefix = PathBuf::from(git(cwd, &["rev-parse", "--show-prefix"], "finding the subfolder")?.trim());
    let reference = base.unwrap_or("HEAD");
    let spec = format!("{reference}^{{commit}}");
    let out = git_output(&top, &["rev-parse", "--verify", "--quiet", &spec], &[], "resolving the base")?;
    if !out.status.success() {
        let detail =
            if base.is_none() { "the repository has no commit yet".to_string() } else { "no such commit".to_string() };
        return Err(WorktreeError::BadBase { reference: reference.to_string(), repo: top, detail });
    }
    let base = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let from_branch = git_output(&top, &["symbolic-ref", "--quiet", "--short", "HEAD"], &[], "reading the branch")?;
    let from_branch = from_branch
        .status
        .success()
        .then(|| String::from_utf8_lossy(&from_branch.stdout).trim().to_string())
        .filter(|b| !b.is_empty());
    Ok(Plan { repo: top, prefix, base, from_branch })
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
    git(repo, &["worktree", "add", "--quiet", "-b", branch, &path, base], "creating the worktree")?;
    Ok(())
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
    pub fn count(&self) -> crate::run::ChangeCount {
        crate::run::ChangeCount { files: self.files.len() as u64, added: self.added, removed: self.removed }
    }
}

/// A snapshot of everything in the worktree (commits, changes, untracked
/// files, `.gitignore` respected) as a tree, through a private index so the
/// agent's own index is untouched. Returns the tree's id.
fn snapshot(path: &Path) -> Result<String, WorktreeError> {
    let index = tempfile::NamedTempFile::new()
        .map_err(|e| WorktreeError::Git { doing: "making a temporary index", detail: e.to_string() })?;
    let env = [("GIT_INDEX_FILE", index.path())];
    for (args, doing) in [
        (&["read-tree", "HEAD"][..], "reading the worktree's HEAD"),
        (&["add", "--all", "--", "."][..], "collecting the worktree's changes"),
    ] {
        let out = git_output(path, args, &env, doing)?;
        if !out.status.success() {
            return Err(WorktreeError::Git { doing, detail: stderr_of(&out) });
        }
    }
    let out = git_output(path, &["write-tree"], &env, "writing the snapshot")?;
    if !out.status.success() {
        return Err(WorktreeError::Git { doing: "writing the snapshot", detail: stderr_of(&out) });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// What the run in `worktree` changed against its base.
pub fn changes(worktree: &Worktree) -> Result<Changes, WorktreeError> {
    let path = Path::new(&worktree.path);
    let tree = snapshot(path)?;
    let numstat = git(path, &["diff", "--numstat", "-z", "--no-renames", &worktree.base, &tree], "listing changes")?;
    let mut files = Vec::new();
    for record in numstat.split('\0').filter(|r| !r.is_empty()) {
        let mut parts = record.splitn(3, '\t');
        let (added, removed, file) = (parts.next(), parts.next(), parts.next());
        let (Some(added), Some(removed), Some(file)) = (added, removed, file) else { continue };
        let binary = added == "-";
        files.push(FileChange {
            path: file.to_string(),
            added: added.parse().unwrap_or(0),
            removed: removed.parse().unwrap_or(0),
            binary,
        });
    }
    let (added, removed) = files.iter().fold((0, 0), |(a, r), f| (a + f.added, r + f.removed));
    Ok(Changes { base: worktree.base.clone(), files, added, removed })
}

/// The unified diff of everything the run changed.
pub fn patch(worktree: &Worktree) -> Result<String, WorktreeError> {
    let path = Path::new(&worktree.path);
    let tree = snapshot(path)?;
    git(path, &["diff", "--no-renames", &worktree.base, &tree], "diffing")
}

/// Brings the run's changes into `branch` of the user's repository `repo`
/// as one commit with `message`, or changes nothing and says why: a
/// conflict, uncommitted changes in the files it would touch, another
/// branch checked out, or an operation of the user's in progress.
///
/// The commit is built from a tree of Corral's own (HEAD plus the run's
/// change, in a private index), so nothing the user had staged goes into
/// it; then the run's change is applied to the user's index and working
/// tree (its files only: the rest of what the user staged stays staged),
/// and the branch is moved from the very commit it was on. If that last
/// step fails, the change is taken back out: the repository is as before.
/// Paths of any number go through files, never the command line.
pub fn merge_squashed(repo: &Path, branch: &str, worktree: &Worktree, message: &str) -> Result<String, WorktreeError> {
    require_branch(repo, branch)?;
    require_quiet(repo)?;
    let path = Path::new(&worktree.path);
    let tree = snapshot(path)?;
    let patch = git(path, &["diff", "--binary", "--no-renames", &worktree.base, &tree], "diffing")?;
    if patch.trim().is_empty() {
        return Err(WorktreeError::WouldConflict("the run changed nothing: there is nothing to merge".into()));
    }
    // Uncommitted changes of the user's in any file the run touches stop it.
    let touched = git(path, &["diff", "--name-only", "-z", "--no-renames", &worktree.base, &tree], "listing changes")?;
    let touched: std::collections::BTreeSet<&str> = touched.split('\0').filter(|p| !p.is_empty()).collect();
    let yours = uncommitted_paths(repo)?;
    let dirty: Vec<&str> = yours.iter().map(String::as_str).filter(|p| touched.contains(p)).collect();
    if !dirty.is_empty() {
        let shown = if dirty.len() > 10 {
            format!("{}, and {} more", dirty[..10].join(", "), dirty.len() - 10)
        } else {
            dirty.join(", ")
        };
        return Err(WorktreeError::WouldConflict(format!(
            "you have uncommitted changes in files the run changed ({shown}); nothing was changed. Commit or stash \
             them, then merge again (the worktree stays)"
        )));
    }
    let patch_file = temp_file_with(patch.as_bytes(), "writing the patch")?;
    let patch_path = patch_file.path().to_string_lossy().into_owned();
    let refuse = |detail: String| {
        WorktreeError::WouldConflict(format!(
            "merging would touch your work: {detail}; nothing was changed. Commit or stash your changes in those \
             files, or merge by hand: `git -C {} merge {}` (the worktree stays)",
            repo.display(),
            worktree.branch
        ))
    };
    let old = git(repo, &["rev-parse", "--verify", "HEAD"], "reading your branch")?.trim().to_string();

    // 1. The commit, from HEAD and the run's change alone.
    let index = temp_file_with(b"", "making a private index")?;
    let private = [("GIT_INDEX_FILE", index.path())];
    let steps: [(&[&str], &'static str); 2] = [
        (&["read-tree", &old], "reading your branch"),
        (&["apply", "--cached", &patch_path], "applying the run's changes"),
    ];
    for (args, doing) in steps {
        let out = git_output(repo, args, &private, doing)?;
        if !out.status.success() {
            return Err(refuse(stderr_of(&out)));
        }
    }
    let out = git_output(repo, &["write-tree"], &private, "writing the merged tree")?;
    if !out.status.success() {
        return Err(WorktreeError::Git { doing: "writing the merged tree", detail: stderr_of(&out) });
    }
    let merged_tree = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let message_file = temp_file_with(message.as_bytes(), "writing the commit message")?;
    let message_path = message_file.path().to_string_lossy().into_owned();
    let mut args = committer(repo)?.to_vec();
    args.extend(["commit-tree", &merged_tree, "-p", &old, "-F", &message_path]);
    let commit = git(repo, &args, "committing the run's changes")?.trim().to_string();

    // 2. The user's working tree and index: the run's files only. `apply`
    // changes everything or nothing.
    let check = git_output(repo, &["apply", "--index", "--check", &patch_path], &[], "checking the merge")?;
    if !check.status.success() {
        return Err(refuse(stderr_of(&check)));
    }
    let applied = git_output(repo, &["apply", "--index", &patch_path], &[], "applying the run's changes")?;
    if !applied.status.success() {
        return Err(refuse(stderr_of(&applied)));
    }

    // 3. The branch, moved only from the commit it was on.
    let reflog = format!("corral: merge {}", worktree.branch);
    let moved = git_output(repo, &["update-ref", "-m", &reflog, "HEAD", &commit, &old], &[], "moving your branch")?;
    if !moved.status.success() {
        let undone = git_output(repo, &["apply", "--index", "-R", &patch_path], &[], "taking the change back out")?;
        let state = if undone.status.success() {
            "nothing was changed".to_string()
        } else {
            format!(
                "and taking the change back out failed too ({}): check `git -C {} status`",
                stderr_of(&undone),
                repo.display()
            )
        };
        return Err(WorktreeError::WouldConflict(format!(
            "cannot move {branch} to the merge ({}); {state}. Merge again",
            stderr_of(&moved)
        )));
    }
    Ok(commit)
}

/// The files the run changed that `branch` of `repo` does not hold as the
/// run left them: what would be lost with its worktree.
pub fn unmerged(repo: &Path, branch: &str, worktree: &Worktree) -> Result<Vec<String>, WorktreeError> {
    let path = Path::new(&worktree.path);
    let tree = snapshot(path)?;
    let touched = git(path, &["diff", "--name-only", "-z", "--no-renames", &worktree.base, &tree], "listing changes")?;
    if touched.is_empty() {
        return Ok(Vec::new());
    }
    let differ = git(path, &["diff", "--name-only", "-z", "--no-renames", branch, &tree], "comparing with your branch")
        .or_else(|_| {
            git(repo, &["diff", "--name-only", "-z", "--no-renames", branch, &tree], "comparing with your branch")
        })?;
    let differ: std::collections::BTreeSet<&str> = differ.split('\0').filter(|p| !p.is_empty()).collect();
    Ok(touched.split('\0').filter(|p| !p.is_empty() && differ.contains(p)).map(str::to_string).collect())
}

/// Every path with uncommitted changes of the user's (staged, unstaged,
/// untracked, both sides of a rename), read in one call whatever their
/// number.
fn uncommitted_paths(repo: &Path) -> Result<Vec<String>, WorktreeError> {
    let status = git(
        repo,
        &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
        "looking for your uncommitted changes",
    )?;
    let mut paths = Vec::new();
    let mut records = status.split('\0').filter(|r| !r.is_empty());
    while let Some(record) = records.next() {
        if record.len() < 4 {
            continue;
        }
        let (code, path) = record.split_at(3);
        paths.push(path.to_string());
        // A rename or copy names its source in the next record.
        if code.starts_with('R') || code.starts_with('C') {
            paths.extend(records.next().map(str::to_string));
        }
    }
    Ok(paths)
}

/// A private temporary file holding `bytes`.
fn temp_file_with(bytes: &[u8], doing: &'static str) -> Result<tempfile::NamedTempFile, WorktreeError> {
    tempfile::NamedTempFile::new()
        .and_then(|mut f| std::io::Write::write_all(&mut f, bytes).map(|()| f))
        .map_err(|e| WorktreeError::Git { doing, detail: e.to_string() })
}

/// Changes nothing while the user's repository is in the middle of an
/// operation of theirs (a merge, rebase, cherry-pick, revert, `git am` or
/// bisect) or has unmerged files: Corral never mixes its change into it,
/// nor undoes it.
fn require_quiet(repo: &Path) -> Result<(), WorktreeError> {
    const IN_PROGRESS: [(&str, &str, &str); 6] = [
        ("MERGE_HEAD", "a merge", "finish it (`git commit`) or undo it (`git merge --abort`)"),
        ("CHERRY_PICK_HEAD", "a cherry-pick", "`git cherry-pick --continue`, or `--abort`"),
        ("REVERT_HEAD", "a revert", "`git revert --continue`, or `--abort`"),
        ("rebase-merge", "a rebase", "`git rebase --continue`, or `--abort`"),
        ("rebase-apply", "a rebase or `git am`", "`git rebase --continue` (`git am --continue`), or `--abort`"),
        ("BISECT_LOG", "a bisect", "`git bisect reset`"),
    ];
    for (file, what, how) in IN_PROGRESS {
        let at = git(repo, &["rev-parse", "--git-path", file], "looking for an operation in progress")?;
        let at = repo.join(at.trim());
        if at.exists() {
            return Err(WorktreeError::WouldConflict(format!(
                "{} is in the middle of {what} of yours; nothing was changed. {how}, then merge again",
                repo.display()
            )));
        }
    }
    let unmerged = git(repo, &["ls-files", "--unmerged", "-z"], "looking for unmerged files")?;
    if !unmerged.is_empty() {
        return Err(WorktreeError::WouldConflict(format!(
            "{} has unmerged files (a conflict of yours); nothing was changed. Resolve them and commit, then merge again",
            repo.display()
        )));
    }
    Ok(())
}

/// Changes nothing unless `repo` has `branch` checked out.
fn require_branch(repo: &Path, branch: &str) -> Result<(), WorktreeError> {
    let current = git(repo, &["symbolic-ref", "--quiet", "--short", "HEAD"], "reading the branch").unwrap_or_default();
    let current = current.trim();
    if current == branch {
        return Ok(());
    }
    Err(WorktreeError::WouldConflict(format!(
        "{} has {} checked out, not {branch} where the run started: `git -C {} switch {branch}`, then merge again",
        repo.display(),
        if current.is_empty() { "no branch" } else { current },
        repo.display()
    )))
}

/// The git arguments that make a commit in `dir` as the user if git knows
/// who that is, else as Corral.
fn committer(dir: &Path) -> Result<&'static [&'static str], WorktreeError> {
    let known = git_output(dir, &["config", "user.email"], &[], "reading the committer")?.status.success();
    Ok(if known { &[] } else { &["-c", "user.name=Corral", "-c", "user.email=corral@localhost"] })
}

/// Commits the index with `message` (see [`committer`]).
fn commit(dir: &Path, message: &str, doing: &'static str) -> Result<(), WorktreeError> {
    let mut args = committer(dir)?.to_vec();
    args.extend(["commit", "--quiet", "--no-verify", "-m", message]);
    git(dir, &args, doing).map(drop)
}

/// Removes the worktree and its branch.
pub fn remove(repo: &Path, worktree: &Worktree) -> Result<(), WorktreeError> {
    if Path::new(&worktree.path).exists() {
        git(repo, &["worktree", "remove", "--force", &worktree.path], "removing the worktree")?;
    }
    let _ = git(repo, &["worktree", "prune"], "pruning worktrees");
    let exists = git_output(repo, &["rev-parse", "--verify", "--quiet", &worktree.branch], &[], "finding the branch")?;
    if exists.status.success() {
        git(repo, &["branch", "-D", &worktree.branch], "deleting the branch")?;
    }
    Ok(())
}

/// Brings the run's branch into `branch` of `repo` with a merge commit,
/// keeping the agent's commits (its uncommitted work is committed on its
/// branch first), or changes nothing and says why.
pub fn merge_commits(repo: &Path, branch: &str, worktree: &Worktree, run_id: &str) -> Result<String, WorktreeError> {
    require_branch(repo, branch)?;
    require_quiet(repo)?;
    let path = Path::new(&worktree.path);
    git(path, &["add", "--all", "--", "."], "collecting the worktree's changes")?;
    let staged = git_output(path, &["diff", "--cached", "--quiet"], &[], "looking for uncommitted changes")?;
    if !staged.status.success() {
        let message = format!("Uncommitted changes of Corral run {run_id}");
        commit(path, &message, "committing the run's uncommitted changes")?;
    }
    let mut args = committer(repo)?.to_vec();
    args.extend(["merge", "--no-ff", "--no-edit", &worktree.branch]);
    let out = git_output(repo, &args, &[], "merging")?;
    if !out.status.success() {
        let why = stderr_of(&out);
        // A conflicted merge is undone; a refused one changed nothing. The
        // merge in progress now is Corral's own: there was none before.
        let merge_head = git(repo, &["rev-parse", "--git-path", "MERGE_HEAD"], "looking for the merge")?;
        if repo.join(merge_head.trim()).exists() {
            let _ = git_output(repo, &["merge", "--abort"], &[], "undoing the merge");
        }
        return Err(WorktreeError::WouldConflict(format!(
            "merging {} would touch your work or conflicts ({why}); nothing was changed. Commit or stash your \
             changes, or merge by hand: `git -C {} merge {}` (the worktree stays)",
            worktree.branch,
            repo.display(),
            worktree.branch
        )));
    }
    Ok(git(repo, &["rev-parse", "HEAD"], "reading the new commit")?.trim().to_string())
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
