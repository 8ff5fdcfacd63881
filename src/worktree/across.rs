//! Several runs' work judged together, before any of it is merged: which
//! pairs touch the same lines, by git's own `merge-tree` of each pair's
//! work (committed or not), written only to scratch objects.

use std::path::Path;

use super::git::{git_in, output, Env, ScratchObjects};
use super::snapshot::{snapshot, unmerged_from};
use super::{Worktree, WorktreeError};

/// One run's unmerged work, as a scratch commit on where it starts.
struct Work {
    run: String,
    objects: ScratchObjects,
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
    /// The files where both changed the same lines.
    pub files: Vec<String>,
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
/// conflicts, and which runs have any.
pub fn conflicts(runs: &[(String, Worktree)]) -> Result<Judged, WorktreeError> {
    let works = runs.iter().map(|(id, worktree)| work_of(id, worktree)).collect::<Result<Vec<_>, _>>()?;
    let with_work = works.iter().filter(|w| w.commit.is_some()).map(|w| w.run.clone()).collect();
    let mut found = Vec::new();
    for (i, a) in works.iter().enumerate() {
        for b in &works[i + 1..] {
            let (Some(ca), Some(cb)) = (&a.commit, &b.commit) else { continue };
            let env = Env { objects: Some(&a.objects), others: vec![&b.objects], ..Env::default() };
            let dir = Path::new(&runs[i].1.path);
            let tried = output(
                dir,
                &["merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", ca, cb],
                &env,
                "trying two runs' work together",
            )?;
            match tried.status.code() {
                Some(0) => {}
                Some(1) => {
                    let printed = String::from_utf8_lossy(&tried.stdout).into_owned();
                    let files: Vec<String> =
                        printed.split('\0').skip(1).take_while(|f| !f.is_empty()).map(str::to_string).collect();
                    found.push(Conflict { first: a.run.clone(), second: b.run.clone(), files });
                }
                _ => {
                    return Err(WorktreeError::Git {
                        doing: "trying two runs' work together",
                        detail: String::from_utf8_lossy(&tried.stderr).trim().to_string(),
                    })
                }
            }
        }
    }
    Ok(Judged { conflicts: found, with_work })
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
        let who = ["-c", "user.name=Corral", "-c", "user.email=corral@localhost", "commit-tree"];
        let args = [&who[..], &[&tree, "-p", from, "-m", id]].concat();
        Some(git_in(path, &args, &scratch, "writing the run's work")?.trim().to_string())
    };
    Ok(Work { run: id.to_string(), objects, commit })
}
