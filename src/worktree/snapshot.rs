//! What a run's worktree holds, read without touching it: a snapshot of
//! everything in it (its commits, its uncommitted and untracked files,
//! `.gitignore` respected) as a tree, through a private index so the
//! agent's own index is untouched; and what changed from where it started,
//! or from what was merged last.

use std::path::Path;

use super::git::{git_in, Env, ScratchObjects};
use super::{Changes, FileChange, Worktree, WorktreeError};

/// The file mode of a gitlink: a repository inside the worktree.
const GITLINK: &str = "160000";

/// A snapshot of a worktree: its tree, and the private index it was
/// written from (the tree, with the files' stat information).
pub(super) struct Snapshot {
    pub tree: String,
    pub index: tempfile::NamedTempFile,
}

/// A snapshot of the worktree at `path` as a tree, its objects written to
/// `objects`. The private index starts as a copy of the worktree's own,
/// whose stat information spares hashing the files that did not change.
pub(super) fn snapshot(path: &Path, objects: &ScratchObjects) -> Result<Snapshot, WorktreeError> {
    let index = tempfile::NamedTempFile::new()
        .map_err(|e| WorktreeError::Git { doing: "making a temporary index", detail: e.to_string() })?;
    let env = Env::index(index.path()).scratch(objects);
    let own = worktree_index(path)?;
    let add = || git_in(path, &["add", "--all", "--", "."], &env, "collecting the worktree's changes");
    // The copy keeps the index's own time: git re-reads a file whose time
    // is not older than its index's ("racily clean"). A copy stamped now
    // made a same-size edit in the second the worktree was made look
    // unchanged, and `diff` saw nothing, `rm` kept nothing.
    let copied = std::fs::copy(&own, index.path()).is_ok() && same_time(&own, index.as_file()).is_ok();
    // A copy that git cannot read alone (a split index) is read afresh.
    if !copied || add().is_err() {
        git_in(path, &["read-tree", "HEAD"], &env, "reading the worktree's HEAD")?;
        add()?;
    }
    // What was carried in from the checkout (`.env`) is never the run's
    // work: as its HEAD has it (nothing, unless the agent committed it,
    // which a merge refuses).
    let carried = own.parent().map(super::carry::left_out).unwrap_or_default();
    if !carried.is_empty() {
        let mut args = vec!["reset", "-q", "HEAD", "--"];
        args.extend(carried.iter().map(String::as_str));
        git_in(path, &args, &env, "leaving out what was carried in")?;
    }
    let tree = git_in(path, &["write-tree"], &env, "writing the snapshot")?.trim().to_string();
    Ok(Snapshot { tree, index })
}

/// Gives `copy` the modification time of the file at `original`: an index
/// copied keeps what git's racy-clean check reads.
pub(super) fn same_time(original: &Path, copy: &std::fs::File) -> std::io::Result<()> {
    copy.set_modified(std::fs::metadata(original)?.modified()?)
}

/// The index file of the worktree at `path`.
pub(super) fn worktree_index(path: &Path) -> Result<std::path::PathBuf, WorktreeError> {
    let at = git_in(
        path,
        &["rev-parse", "--path-format=absolute", "--git-path", "index"],
        &Env::default(),
        "finding the index",
    )?;
    Ok(std::path::PathBuf::from(at.trim()))
}

/// Where the unmerged part of a run's work starts: what was merged last,
/// else the commit it started from.
pub(super) fn unmerged_from(worktree: &Worktree) -> &str {
    worktree.merged.as_deref().unwrap_or(&worktree.base)
}

/// What the run in `worktree` changed that is not merged yet.
pub fn changes(worktree: &Worktree) -> Result<Changes, WorktreeError> {
    let path = Path::new(&worktree.path);
    let objects = ScratchObjects::for_worktree(path)?;
    let tree = snapshot(path, &objects)?.tree;
    let from = unmerged_from(worktree);
    let env = Env::default().scratch(&objects);
    let args = ["diff", "--numstat", "-z", "--no-renames", "--no-textconv", "--no-ext-diff", from, &tree];
    let numstat = git_in(path, &args, &env, "listing changes")?;
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
    Ok(Changes { base: from.to_string(), files, added, removed })
}

/// The unified diff of everything the run changed that is not merged yet.
pub fn patch(worktree: &Worktree) -> Result<String, WorktreeError> {
    Ok(diffed(worktree, false)?.0)
}

/// [`patch`] cut per file: each changed path, exactly as git has it, with
/// its part of the diff (git quotes a name with control characters or
/// quotes in a diff's header, so the header is never read for the name).
pub fn patch_by_file(worktree: &Worktree) -> Result<Vec<(String, String)>, WorktreeError> {
    let (patch, names) = diffed(worktree, true)?;
    let mut parts: Vec<String> = Vec::new();
    for line in patch.split_inclusive('\n') {
        if line.starts_with("diff --git ") || parts.is_empty() {
            parts.push(String::new());
        }
        parts.last_mut().expect("one part at least").push_str(line);
    }
    let names: Vec<String> = names.split('\0').filter(|n| !n.is_empty()).map(str::to_string).collect();
    if names.len() != parts.len() {
        return Err(WorktreeError::Git {
            doing: "cutting the diff per file",
            detail: format!("git listed {} files and diffed {}", names.len(), parts.len()),
        });
    }
    Ok(names.into_iter().zip(parts).collect())
}

/// The run's unmerged diff, and with `names` the paths it changes
/// (NUL-separated, in the diff's order), from one snapshot.
fn diffed(worktree: &Worktree, names: bool) -> Result<(String, String), WorktreeError> {
    let path = Path::new(&worktree.path);
    let objects = ScratchObjects::for_worktree(path)?;
    let tree = snapshot(path, &objects)?.tree;
    let env = Env::default().scratch(&objects);
    let from = unmerged_from(worktree);
    let args =
        ["diff", "--no-renames", "--no-textconv", "--no-ext-diff", "--src-prefix=a/", "--dst-prefix=b/", from, &tree];
    let patch = git_in(path, &args, &env, "diffing")?;
    let names = match names {
        true => git_in(path, &["diff", "--no-renames", "--name-only", "-z", from, &tree], &env, "diffing")?,
        false => String::new(),
    };
    Ok((patch, names))
}

/// The repositories the run made inside its worktree (a clone, a `git
/// init`): git sees each as a bare link to a commit, never its files.
pub(super) fn nested_repositories(
    path: &Path,
    from: &str,
    tree: &str,
    objects: &ScratchObjects,
) -> Result<Vec<String>, WorktreeError> {
    let env = Env::default().scratch(objects);
    let raw = git_in(path, &["diff-tree", "-r", "-z", "--no-renames", from, tree], &env, "looking for repositories")?;
    let mut found = Vec::new();
    let mut fields = raw.split('\0');
    while let Some(meta) = fields.next().filter(|m| !m.is_empty()) {
        let Some(file) = fields.next() else { break };
        // `:old-mode new-mode old-id new-id status`
        if meta.split(' ').nth(1) == Some(GITLINK) {
            found.push(file.to_string());
        }
    }
    Ok(found)
}

/// What [`unmerged`] says of a run whose worktree folder is gone (removed
/// by hand): the files its branch changed that `branch` does not hold as
/// its branch has them, read from the repository alone. None if its
/// branch is gone too.
pub fn unmerged_on_branch(repo: &Path, branch: &str, worktree: &Worktree) -> Result<Vec<String>, WorktreeError> {
    let env = Env::default();
    let own = format!("refs/heads/{}", worktree.branch);
    if git_in(repo, &["rev-parse", "--verify", "--quiet", &own], &env, "finding the run's branch").is_err() {
        return Ok(Vec::new());
    }
    let names = |from: &str| {
        git_in(repo, &["diff", "--name-only", "-z", "--no-renames", from, &own], &env, "comparing with your branch")
    };
    let touched = names(&worktree.base)?;
    let differ = names(branch)?;
    let differ: std::collections::BTreeSet<&str> = differ.split('\0').filter(|p| !p.is_empty()).collect();
    Ok(touched.split('\0').filter(|p| !p.is_empty() && differ.contains(p)).map(str::to_string).collect())
}

/// The files the run changed that `branch` of `repo` does not hold as the
/// run left them: what would be lost with its worktree. A run whose work
/// is all merged (its snapshot is what was merged last) has none, whatever
/// the branch became since; a repository it made inside is never held.
pub fn unmerged(repo: &Path, branch: &str, worktree: &Worktree) -> Result<Vec<String>, WorktreeError> {
    let path = Path::new(&worktree.path);
    let objects = ScratchObjects::for_worktree(path)?;
    let tree = snapshot(path, &objects)?.tree;
    let env = Env::default().scratch(&objects);
    if let Some(merged) = &worktree.merged {
        let merged_tree = git_in(path, &["rev-parse", &format!("{merged}^{{tree}}")], &env, "reading the merge");
        if merged_tree.is_ok_and(|t| t.trim() == tree) {
            return Ok(Vec::new());
        }
    }
    let nested = nested_repositories(path, &worktree.base, &tree, &objects)?;
    let names = |from: &str| {
        let args = ["diff", "--name-only", "-z", "--no-renames", from, &tree];
        git_in(path, &args, &env, "comparing with your branch")
            .or_else(|_| git_in(repo, &args, &env, "comparing with your branch"))
    };
    let touched = names(&worktree.base)?;
    if touched.is_empty() {
        return Ok(Vec::new());
    }
    let differ = names(branch)?;
    let differ: std::collections::BTreeSet<&str> = differ.split('\0').filter(|p| !p.is_empty()).collect();
    let mut left: Vec<String> =
        touched.split('\0').filter(|p| !p.is_empty() && differ.contains(p)).map(str::to_string).collect();
    for repository in nested {
        if !left.contains(&repository) {
            left.push(repository);
        }
    }
    Ok(left)
}
