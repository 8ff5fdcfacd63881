//! Bringing a run's work into the branch it started from, by git's own
//! three-way merge, never by a patch.
//!
//! The run's branch holds its work as commits: what the agent left
//! uncommitted is committed on it first (the agent's own commits kept). A
//! squash merge is git's `merge-tree --write-tree` of the user's HEAD and
//! that branch, from where the run started or from what was merged last
//! (so merge, reply, merge again takes exactly the follow-up's work);
//! `--no-squash` is `merge-tree` of HEAD and the run's branch, as `git
//! merge --no-ff` makes it, with both as parents. Either is written apart
//! from the user's checkout, judged by the hooks git would run (squash:
//! `pre-commit`, `commit-msg`; merge: `pre-merge-commit`, `commit-msg`) on
//! an index of the merge alone, and committed with `commit-tree`: nothing
//! of the user's is touched until it is made (a process that dies
//! meanwhile leaves no merge half done in the checkout). Then it lands
//! ([`Prepared::land`]): the user's index and working tree move to it as
//! `git checkout` would (files the merge does not touch, and the user's
//! changes in them, stay), then the branch, only from the commit it was
//! on; if it cannot, the files go back (see `land`). A conflict, uncommitted changes of
//! the user's in the files it touches, a repository the run made inside
//! its worktree, a refusing hook: nothing is changed, and it says why.
//! What is computed to try a merge is written where it leaves nothing in
//! the user's `.git` unless the hooks are to judge it.

use std::path::Path;

use super::git::{
    committer, git, git_in, head_of, output, said, stderr_of, temp_file_with, Env, ScratchObjects, SCRATCH_COMMIT,
};
use super::snapshot::{nested_repositories, snapshot, unmerged_from, worktree_index, Snapshot};
use super::{Worktree, WorktreeError};

/// Commits everything the worktree holds on the run's branch (nothing if
/// it is all committed): the run's work as commits. Returns the branch's
/// commit. Corral's own commit on the run's branch skips the user's hooks:
/// they run when the work reaches the user's branch.
fn commit_run_branch(
    worktree: &Worktree,
    run_id: &str,
    snapshot: &Snapshot,
    objects: &ScratchObjects,
) -> Result<String, WorktreeError> {
    let message = format!("Work of Corral run {run_id} left uncommitted");
    commit_on_run_branch(worktree, snapshot, objects, &["-m", &message])
}

/// Commits the snapshot on the run's branch with the message `message`
/// (`-m TEXT` or `-F FILE`), unless its tip holds it already; moves the
/// branch only from the tip it read. Returns the branch's commit.
pub(super) fn commit_on_run_branch(
    worktree: &Worktree,
    snapshot: &Snapshot,
    objects: &ScratchObjects,
    message: &[&str],
) -> Result<String, WorktreeError> {
    let tree = snapshot.tree.as_str();
    let path = Path::new(&worktree.path);
    let tip = git(path, &["rev-parse", "--verify", "HEAD"], "reading the run's branch")?.trim().to_string();
    let tip_tree = git(path, &["rev-parse", &format!("{tip}^{{tree}}")], "reading the run's branch")?;
    if tip_tree.trim() == tree {
        return Ok(tip);
    }
    objects.keep(path, &[tree])?;
    let mut args = committer(path)?.to_vec();
    args.extend(["commit-tree", tree, "-p", &tip]);
    args.extend(message);
    let commit = git(path, &args, "committing the run's work on its branch")?.trim().to_string();
    let reflog = format!("corral: the work of its run ({})", worktree.branch);
    let branch = format!("refs/heads/{}", worktree.branch);
    let moved = output(path, &["update-ref", "-m", &reflog, &branch, &commit, &tip], &Env::default(), "moving")?;
    if !moved.status.success() {
        return Err(WorktreeError::WouldConflict(format!(
            "cannot move the run's branch {} to its work ({}); nothing was changed",
            worktree.branch,
            stderr_of(&moved)
        )));
    }
    // The worktree's index follows its branch (`git status` there is
    // clean): the snapshot's own index, which is that tree.
    let index = worktree_index(path)?;
    let fail = |e: std::io::Error| WorktreeError::Git { doing: "updating the worktree's index", detail: e.to_string() };
    let next = index.with_extension("corral");
    std::fs::copy(snapshot.index.path(), &next).map_err(fail)?;
    // Stamped as git stamped it, not now (see `snapshot`).
    let copy = std::fs::OpenOptions::new().write(true).open(&next).map_err(fail)?;
    super::snapshot::same_time(snapshot.index.path(), &copy).map_err(fail)?;
    std::fs::rename(&next, &index).map_err(fail)?;
    Ok(commit)
}

/// A merge written and judged by the repository's hooks, the user's
/// branch not moved yet: its commit is journaled before it lands.
#[derive(Debug)]
pub struct Prepared {
    /// The commit that will be the branch's.
    pub commit: String,
    /// The run's branch as merged.
    pub merged: String,
    /// The commit it is made on: the branch's, or the merge prepared
    /// before it in a set.
    pub(super) head: String,
    pub(super) merged_tree: String,
    pub(super) branch: String,
    pub(super) run_branch: String,
    /// The hook run once it landed, and its argument.
    pub(super) after: (&'static str, Option<&'static str>),
}

/// Prepares the run's work not merged yet as one commit with `message` on
/// `branch` of the user's repository `repo` (see the module), judged by
/// its hooks; made on `onto` (the merge prepared before it in a set), or
/// on the branch's HEAD. [`land`](super::land) moves the branch and files
/// to it.
pub fn prepare_squashed(
    repo: &Path,
    branch: &str,
    worktree: &Worktree,
    run_id: &str,
    message: &str,
    onto: Option<&str>,
) -> Result<Prepared, WorktreeError> {
    require_branch(repo, branch)?;
    require_quiet(repo)?;
    let path = Path::new(&worktree.path);
    let objects = ScratchObjects::for_worktree(path)?;
    let scratch = Env::default().scratch(&objects);
    let snap = snapshot(path, &objects)?;
    let tree = snap.tree.clone();
    let from = unmerged_from(worktree);
    let from_tree = git_in(repo, &["rev-parse", &format!("{from}^{{tree}}")], &scratch, "reading the run's base")?;
    if from_tree.trim() == tree {
        let since = if worktree.merged.is_some() { "since it was merged" } else { "" };
        return Err(WorktreeError::WouldConflict(format!(
            "the run changed nothing {since}: there is nothing to merge; nothing was changed"
        )));
    }
    let nested = nested_repositories(path, from, &tree, &objects)?;
    if !nested.is_empty() {
        return Err(nested_refused(worktree, &nested));
    }
    let head = match onto {
        Some(commit) => commit.to_string(),
        None => head_of(repo)?,
    };
    let head_tree = git(repo, &["rev-parse", &format!("{head}^{{tree}}")], "reading your branch")?.trim().to_string();

    // git's three-way merge of your HEAD and the run's work, from where the
    // unmerged part starts: `theirs` is the run's work on top of `from`,
    // `ours` is your HEAD with `from` as a second parent, so that `from`
    // is their best common ancestor (git 2.38+, no `--merge-base` needed).
    // Scratch commits, never kept: a fixed identity.
    let theirs =
        git_in(repo, &[&SCRATCH_COMMIT[..], &[&tree, "-p", from, "-m", "run"]].concat(), &scratch, "trying the merge")?;
    let ours = [&SCRATCH_COMMIT[..], &[&head_tree, "-p", &head, "-p", from, "-m", "yours"]].concat();
    let ours = git_in(repo, &ours, &scratch, "trying the merge")?;
    let merged_tree = match merge_tree(repo, ours.trim(), theirs.trim(), &scratch)? {
        Ok(tree) => tree,
        Err(files) => {
            // The advice must work as written: the run's work, uncommitted
            // in its worktree, is committed on its own branch first (the
            // run's, never anything of the user's).
            objects.keep(repo, &[&tree])?;
            commit_run_branch(worktree, run_id, &snap, &objects)?;
            return Err(WorktreeError::WouldConflict(format!(
                "the run's work conflicts with {branch} in {}; nothing of yours was changed. Merge by hand: `git \
                 -C {} merge --squash {}` (its branch holds all its work) and resolve them (the worktree stays)",
                shown(&files.iter().map(String::as_str).collect::<Vec<_>>()),
                repo.display(),
                worktree.branch
            )));
        }
    };
    if merged_tree == head_tree {
        return Err(already_holds(branch, onto));
    }
    refuse_dirty(repo, &head_tree, &merged_tree, &scratch)?;
    // The repository's hooks judge the commit, on an index of it alone.
    let message_file = judged_by_hooks(repo, &merged_tree, message, &objects, "pre-commit")?;
    let message_path = message_file.path().to_string_lossy().into_owned();

    // Made: the merge's objects go into the repository, the run's branch
    // holds its work, and the commit is written.
    objects.keep(repo, &[&tree])?;
    let merged = commit_run_branch(worktree, run_id, &snap, &objects)?;
    // The commits a sandboxed agent made are in the worktree's own store:
    // what the merge brings in is copied into the repository, checked.
    objects.keep(repo, &[&merged])?;
    let mut args = committer(repo)?.to_vec();
    args.extend(["commit-tree", &merged_tree, "-p", &head, "-F", &message_path]);
    let commit = git(repo, &args, "committing the run's changes")?.trim().to_string();
    Ok(Prepared {
        commit,
        merged,
        head,
        merged_tree,
        branch: branch.to_string(),
        run_branch: worktree.branch.clone(),
        after: ("post-commit", None),
    })
}

/// git's three-way merge of commits `ours` and `theirs` in `env`, written
/// as a tree only: the tree, or the files that conflict.
pub(super) fn merge_tree(
    repo: &Path,
    ours: &str,
    theirs: &str,
    env: &Env<'_>,
) -> Result<Result<String, Vec<String>>, WorktreeError> {
    let tried = output(
        repo,
        &["merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", ours, theirs],
        env,
        "merging",
    )?;
    let printed = String::from_utf8_lossy(&tried.stdout).into_owned();
    let mut fields = printed.split('\0');
    let tree = fields.next().unwrap_or_default().trim().to_string();
    match tried.status.code() {
        Some(0) => Ok(Ok(tree)),
        Some(1) => Ok(Err(fields.take_while(|f| !f.is_empty()).map(str::to_string).collect())),
        _ => Err(WorktreeError::Git { doing: "merging", detail: stderr_of(&tried) }),
    }
}

/// Refuses a merge from `head_tree` to `merged_tree` that touches a file
/// with uncommitted changes of the user's.
fn refuse_dirty(repo: &Path, head_tree: &str, merged_tree: &str, env: &Env<'_>) -> Result<(), WorktreeError> {
    let touched = git_in(
        repo,
        &["diff", "--name-only", "-z", "--no-renames", head_tree, merged_tree],
        env,
        "listing the merge's files",
    )?;
    let touched: std::collections::BTreeSet<&str> = touched.split('\0').filter(|p| !p.is_empty()).collect();
    let yours = uncommitted_paths(repo)?;
    let dirty: Vec<&str> = yours.iter().map(String::as_str).filter(|p| touched.contains(p)).collect();
    if !dirty.is_empty() {
        return Err(WorktreeError::WouldConflict(format!(
            "you have uncommitted changes in files the run changed ({}); nothing was changed. Commit or stash \
             them, then merge again (the worktree stays)",
            shown(&dirty)
        )));
    }
    Ok(())
}

/// Runs the repository's `first` hook (`pre-commit`, `pre-merge-commit`)
/// and `commit-msg` on a private index holding `merged_tree` alone; the
/// message as the hooks left it, in its file.
pub(super) fn judged_by_hooks(
    repo: &Path,
    merged_tree: &str,
    message: &str,
    objects: &ScratchObjects,
    first: &'static str,
) -> Result<tempfile::NamedTempFile, WorktreeError> {
    // The merge's objects go into the repository first, and the hooks run
    // with its own object store: what a hook writes (lint-staged's backup
    // stash, a note, a tag) is the repository's, never left in a scratch
    // store its refs would then point into.
    objects.keep(repo, &[merged_tree])?;
    let index = temp_file_with(b"", "making a private index")?;
    let private = Env::index(index.path());
    git_in(repo, &["read-tree", merged_tree], &private, "reading the merge")?;
    let message_file = temp_file_with(message.as_bytes(), "writing the commit message")?;
    let message_path = message_file.path().to_string_lossy().into_owned();
    run_hook(repo, first, &[], &private)?;
    run_hook(repo, "commit-msg", &[&message_path], &private)?;
    // As git: a message the hook emptied (but for comments) is no commit.
    let said = std::fs::read_to_string(message_file.path()).unwrap_or_default();
    if said.lines().all(|l| l.trim().is_empty() || l.starts_with('#')) {
        return Err(WorktreeError::WouldConflict(
            "your repository's commit-msg hook left the message empty; nothing was changed".into(),
        ));
    }
    Ok(message_file)
}

/// The refusal of a merge that would change nothing: the branch (or the
/// merges before it in a set) holds the run's work already.
fn already_holds(branch: &str, onto: Option<&str>) -> WorktreeError {
    WorktreeError::WouldConflict(match onto {
        None => format!("{branch} already holds the run's work: there is nothing to merge; nothing was changed"),
        Some(_) => "the runs merged before it in this set already make its change (the same change twice): merge \
                    one of them, discard the other; nothing was changed"
            .to_string(),
    })
}

/// Prepares the run's branch as a merge commit on `branch` of `repo`,
/// keeping the agent's commits (its uncommitted work is committed on its
/// branch first), or changes nothing and says why. Only onto the base the
/// run was launched from: `branch` must hold it. Made on `onto`, or on
/// the branch's HEAD; [`land`](super::land) moves the branch and files
/// to it.
pub fn prepare_merge_commits(
    repo: &Path,
    branch: &str,
    worktree: &Worktree,
    run_id: &str,
    onto: Option<&str>,
) -> Result<Prepared, WorktreeError> {
    require_branch(repo, branch)?;
    require_quiet(repo)?;
    if worktree.merged.is_some() && worktree.merged_squashed {
        return Err(WorktreeError::WouldConflict(format!(
            "run {run_id} was merged squashed before, so its commits are not in {branch}: merge its follow-up \
             squashed too (`corral merge {run_id}`); nothing was changed"
        )));
    }
    let head = match onto {
        Some(commit) => commit.to_string(),
        None => head_of(repo)?,
    };
    let contains = output(repo, &["merge-base", "--is-ancestor", &worktree.base, &head], &Env::default(), "checking")?;
    if !contains.status.success() {
        let short = &worktree.base[..worktree.base.len().min(12)];
        return Err(WorktreeError::WouldConflict(format!(
            "the run started from {short}, which {branch} does not hold: merging its commits would bring every \
             commit under it too, not only the run's. Merge it squashed (`corral merge {run_id}`: the run's change \
             alone); nothing was changed"
        )));
    }
    let path = Path::new(&worktree.path);
    let objects = ScratchObjects::for_worktree(path)?;
    let snap = snapshot(path, &objects)?;
    let nested = nested_repositories(path, unmerged_from(worktree), &snap.tree, &objects)?;
    if !nested.is_empty() {
        return Err(nested_refused(worktree, &nested));
    }
    let merged = commit_run_branch(worktree, run_id, &snap, &objects)?;
    // The commits a sandboxed agent made are in the worktree's own store:
    // what the merge brings in is copied into the repository, checked.
    objects.keep(repo, &[&merged])?;
    // git's own merge of the two, as `git merge --no-ff` makes it, but
    // written apart from your checkout (nothing left half done in it if
    // this process dies), judged by the hooks `git merge` runs.
    let scratch = Env::default().scratch(&objects);
    let head_tree = git(repo, &["rev-parse", &format!("{head}^{{tree}}")], "reading your branch")?.trim().to_string();
    let merged_tree = match merge_tree(repo, &head, &merged, &scratch)? {
        Ok(tree) => tree,
        Err(files) => {
            return Err(WorktreeError::WouldConflict(format!(
                "the run's commits conflict with {branch} in {}; nothing was changed. Merge by hand: `git -C {} \
                 merge {}` and resolve them (the worktree stays)",
                shown(&files.iter().map(String::as_str).collect::<Vec<_>>()),
                repo.display(),
                worktree.branch
            )))
        }
    };
    if merged_tree == head_tree {
        return Err(already_holds(branch, onto));
    }
    refuse_dirty(repo, &head_tree, &merged_tree, &scratch)?;
    // git's words: " into BRANCH" but for main and master.
    let into = if matches!(branch, "main" | "master") { String::new() } else { format!(" into {branch}") };
    let message = format!("Merge branch '{}'{into}", worktree.branch);
    let message_file = judged_by_hooks(repo, &merged_tree, &message, &objects, "pre-merge-commit")?;
    let message_path = message_file.path().to_string_lossy().into_owned();
    let mut args = committer(repo)?.to_vec();
    args.extend(["commit-tree", &merged_tree, "-p", &head, "-p", &merged, "-F", &message_path]);
    let commit = git(repo, &args, "committing the merge")?.trim().to_string();
    Ok(Prepared {
        commit,
        merged,
        head,
        merged_tree,
        branch: branch.to_string(),
        run_branch: worktree.branch.clone(),
        after: ("post-merge", Some("0")),
    })
}

/// Runs the repository's hook `name` (`git hook run`, git 2.36+), if it
/// has one: its refusal changes nothing and is said in its own words.
pub(super) fn run_hook(repo: &Path, name: &'static str, args: &[&str], env: &Env<'_>) -> Result<(), WorktreeError> {
    let mut argv = vec!["hook", "run", "--ignore-missing", name];
    if !args.is_empty() {
        argv.push("--");
        argv.extend(args);
    }
    let out = output(repo, &argv, env, "running your hook")?;
    if out.status.success() {
        return Ok(());
    }
    if String::from_utf8_lossy(&out.stderr).contains("is not a git command") {
        return Err(WorktreeError::Git {
            doing: "running your repository's hooks",
            detail: "this git has no `git hook run` (git 2.36 or newer has): upgrade git, or merge by hand".into(),
        });
    }
    Err(WorktreeError::WouldConflict(format!(
        "your repository's {name} hook refused the commit; nothing was changed. It said:\n{}",
        said(&out)
    )))
}

/// The refusal of a run that made repositories inside its worktree.
fn nested_refused(worktree: &Worktree, nested: &[String]) -> WorktreeError {
    let listed = nested.iter().map(|n| n.as_str()).collect::<Vec<_>>();
    WorktreeError::WouldConflict(format!(
        "the run made git repositories inside its worktree ({}): git would merge each as a bare link to a commit, \
         not its files; nothing was changed. Take what you want from {} by hand, or remove their .git folders \
         there to merge them as files (the worktree stays)",
        shown(&listed),
        worktree.path
    ))
}

/// Up to ten names, then how many more.
pub(super) fn shown(names: &[&str]) -> String {
    if names.len() > 10 {
        format!("{}, and {} more", names[..10].join(", "), names.len() - 10)
    } else {
        names.join(", ")
    }
}

/// Every path with uncommitted changes of the user's (staged, unstaged,
/// untracked, both sides of a rename), read in one call whatever their
/// number.
pub(super) fn uncommitted_paths(repo: &Path) -> Result<Vec<String>, WorktreeError> {
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

/// Changes nothing unless `repo` exists and has `branch` checked out.
fn require_branch(repo: &Path, branch: &str) -> Result<(), WorktreeError> {
    if !repo.is_dir() {
        return Err(WorktreeError::WouldConflict(format!(
            "{} no longer exists (the run was launched there: another run's worktree, since removed), so {branch} \
             cannot take the run's work there; nothing was changed",
            repo.display()
        )));
    }
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
