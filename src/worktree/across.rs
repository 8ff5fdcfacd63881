//! Several runs' work judged together, before any of it is merged: which
//! pairs touch the same lines, by git's own `merge-tree` of each pair's
//! work (committed or not), written only to scratch objects. A pair is
//! judged as it would merge: the first run's unmerged part onto the
//! branch, then the second's onto that, each from where its own unmerged
//! part starts (never from an older base, which would count a change the
//! branch already holds twice); a second run whose change the first
//! already makes is said too.

use std::path::Path;

use super::git::{git_in, Env, ScratchObjects, SCRATCH_COMMIT};
use super::merge::merge_tree;
use super::snapshot::{snapshot, unmerged_from};
use super::{Worktree, WorktreeError};

/// One run's unmerged work, as a scratch commit on where it starts.
struct Work {
    run: String,
    objects: ScratchObjects,
    /// The commit its unmerged part starts from.
    from: String,
    /// A commit of its worktree as it is, on the commit its unmerged part
    /// starts from; `None` if it changed nothing since.
    commit: Option<String>,
}

/// Two runs whose work conflicts, and where.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Conflict {
    /// The earlier run of the pair, as given.
    pub first: String,
    /// The later one.
    pub second: String,
    /// The files where both changed the same lines (or, for the same
    /// change, the files the second changed).
    pub files: Vec<String>,
    /// True if the second makes no change the first does not already
    /// make: merged after it, it would change nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub same: bool,
}

/// Several runs judged together.
#[derive(Debug, Clone, Default)]
pub struct Judged {
    /// The pairs whose work conflicts, each pair once, in order.
    pub conflicts: Vec<Conflict>,
    /// The runs with work not merged yet, in order.
    pub with_work: Vec<String>,
}

/// The pairs of `runs` (id and worktree, in order) whose unmerged work
/// conflicts, and which runs have any; judged onto `onto` (the commit of
/// the branch they merge into), or from their own bases without one.
pub fn conflicts(onto: Option<&str>, runs: &[(String, Worktree)]) -> Result<Judged, WorktreeError> {
    let works = runs.iter().map(|(id, worktree)| work_of(id, worktree)).collect::<Result<Vec<_>, _>>()?;
    let with_work = works.iter().filter(|w| w.commit.is_some()).map(|w| w.run.clone()).collect();
    // Each run merged onto the branch alone, when it merges cleanly there
    // (a run conflicting with the branch itself is the merge's to say):
    // pairs of such runs are judged on it, any other pair from its bases.
    let alone: Vec<Option<String>> = works
        .iter()
        .zip(runs)
        .map(|(w, (_, worktree))| match (onto, &w.commit) {
            (Some(onto), Some(commit)) => {
                let env = Env::default().scratch(&w.objects);
                Ok(step(Path::new(&worktree.path), onto, &w.from, commit, &env)?.ok())
            }
            _ => Ok(None),
        })
        .collect::<Result<_, WorktreeError>>()?;
    let mut found = Vec::new();
    for (i, a) in works.iter().enumerate() {
        let Some(ca) = &a.commit else { continue };
        let dir = Path::new(&runs[i].1.path);
        for (j, b) in works.iter().enumerate().skip(i + 1) {
            let Some(cb) = &b.commit else { continue };
            let env = Env { objects: Some(&a.objects), others: vec![&b.objects], ..Env::default() };
            let tried = match (onto, &alone[i], &alone[j]) {
                (Some(onto), Some(tree_a), Some(_)) => {
                    let args = [&SCRATCH_COMMIT[..], &[tree_a, "-p", onto, "-p", &b.from, "-m", "first"]].concat();
                    let with_a = git_in(dir, &args, &env, "trying two runs' work together")?;
                    match merge_tree(dir, with_a.trim(), cb, &env)? {
                        Ok(tree) if tree == *tree_a => {
                            let files = changed_files(dir, &b.from, cb, &env)?;
                            found.push(Conflict { first: a.run.clone(), second: b.run.clone(), files, same: true });
                            continue;
                        }
                        other => other,
                    }
                }
                _ => merge_tree(dir, ca, cb, &env)?,
            };
            if let Err(files) = tried {
                found.push(Conflict { first: a.run.clone(), second: b.run.clone(), files, same: false });
            }
        }
    }
    Ok(Judged { conflicts: found, with_work })
}

/// Work `commit` (its parent `from`) merged onto commit `onto` as a squash
/// would: the tree, or the files that conflict.
fn step(
    dir: &Path,
    onto: &str,
    from: &str,
    commit: &str,
    env: &Env<'_>,
) -> Result<Result<String, Vec<String>>, WorktreeError> {
    // `from` as a second parent makes it the best common ancestor.
    let tree = format!("{onto}^{{tree}}");
    let args = [&SCRATCH_COMMIT[..], &[&tree, "-p", onto, "-p", from, "-m", "branch"]].concat();
    let ours = git_in(dir, &args, env, "trying the run's work on the branch")?;
    merge_tree(dir, ours.trim(), commit, env)
}

/// The files `commit` changes from `from`.
fn changed_files(dir: &Path, from: &str, commit: &str, env: &Env<'_>) -> Result<Vec<String>, WorktreeError> {
    let listed =
        git_in(dir, &["diff-tree", "-r", "--name-only", "-z", "--no-renames", from, commit], env, "listing files")?;
    Ok(listed.split('\0').filter(|f| !f.is_empty()).map(str::to_string).collect())
}

/// Run `id`'s work as a scratch commit.
fn work_of(id: &str, worktree: &Worktree) -> Result<Work, WorktreeError> {
    let path = Path::new(&worktree.path);
    let objects = ScratchObjects::for_worktree(path)?;
    let scratch = Env::default().scratch(&objects);
    let tree = snapshot(path, &objects)?.tree;
    let from = unmerged_from(worktree);
    let from_tree = git_in(path, &["rev-parse", &format!("{from}^{{tree}}")], &scratch, "reading the run's base")?;
    let commit = if from_tree.trim() == tree {
        None
    } else {
        let args = [&SCRATCH_COMMIT[..], &[&tree, "-p", from, "-m", id]].concat();
        Some(git_in(path, &args, &scratch, "writing the run's work")?.trim().to_string())
    };
    Ok(Work { run: id.to_string(), objects, from: from.to_string(), commit })
}
