//! Removing ended runs for good (`corral rm`, `corral prune`): their rows,
//! transcripts and folders, and their worktrees unless those hold changes
//! that are not in the branch the run started from (kept, and said). An
//! active run is never removed, nor a run whose tree is still active, nor
//! one launched by a run still active; a run goes with the runs it
//! launched.

use std::path::{Path, PathBuf};

use crate::run::Run;
use crate::store::{Store, StoreError};
use crate::worktree;

/// Why runs cannot be removed.
#[derive(Debug, thiserror::Error)]
pub enum RemoveError {
    /// The store failed, or no such run.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run, or one it launched, is still active.
    #[error("run {id} is {status}: abort it first (corral abort {id}), or wait for it")]
    Active { id: String, status: crate::RunStatus },
}

/// What removing one run (and the runs it launched) did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Removed {
    /// The runs removed, the one asked for first.
    pub ids: Vec<String>,
    /// Worktrees kept because they hold changes not merged, with the files.
    pub kept_worktrees: Vec<KeptWorktree>,
}

/// A worktree left in place: what it holds, and how to get rid of it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KeptWorktree {
    /// Its folder.
    pub path: String,
    /// Its branch.
    pub branch: String,
    /// The repository it belongs to.
    pub repo: String,
    /// Files it changed that the branch it started from does not hold.
    pub unmerged: Vec<String>,
}

/// Removes run `id` (or a unique prefix) and the runs it launched; with
/// `dry_run`, only says what it would remove.
pub fn remove(store: &mut Store, id: &str, dry_run: bool) -> Result<Removed, RemoveError> {
    let root = store.find_run(id)?;
    // A run an active run launched is still part of that run's work (its
    // result may not be collected yet).
    let mut parent = root.parent_id.clone();
    while let Some(up) = parent {
        let run = store.run(&up)?;
        if run.status.is_active() {
            return Err(RemoveError::Active { id: run.id, status: run.status });
        }
        parent = run.parent_id;
    }
    let ids = store.tree_of(&root.id)?;
    let runs: Vec<Run> = ids.iter().map(|id| store.run(id)).collect::<Result<_, _>>()?;
    if let Some(active) = runs.iter().find(|r| r.status.is_active()) {
        return Err(RemoveError::Active { id: active.id.clone(), status: active.status });
    }
    let mut kept_worktrees = Vec::new();
    let mut drop_worktrees = Vec::new();
    for run in &runs {
        let (Some(tree), Some(repo)) = (&run.worktree, &run.worktree_repo) else { continue };
        if !Path::new(&tree.path).exists() {
            continue;
        }
        let branch = run.worktree_from_branch.clone().unwrap_or_else(|| tree.base.clone());
        // A worktree whose changes cannot be read is kept: never lose work on a doubt.
        let unmerged = worktree::unmerged(Path::new(repo), &branch, tree).unwrap_or_else(|e| vec![e.to_string()]);
        if unmerged.is_empty() {
            drop_worktrees.push((PathBuf::from(repo), tree.clone()));
        } else {
            kept_worktrees.push(KeptWorktree {
                path: tree.path.clone(),
                branch: tree.branch.clone(),
                repo: repo.clone(),
                unmerged,
            });
        }
    }
    if !dry_run {
        if !store.delete_runs(&ids)? {
            let now = store.run(&root.id)?;
            return Err(RemoveError::Active { id: now.id, status: now.status });
        }
        for id in &ids {
            let dir = store.home().run_dir(id);
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!("cannot remove {}: {e}", dir.display());
                }
            }
        }
        for (repo, tree) in &drop_worktrees {
            if let Err(e) = worktree::remove(repo, tree) {
                tracing::warn!("cannot remove the worktree {}: {e}", tree.path);
            }
        }
    }
    Ok(Removed { ids, kept_worktrees })
}

/// Removes every ended run launched by no other run that ended before
/// `before` (RFC 3339), with the runs it launched, that `keep` does not
/// hold back; runs whose tree is still active are skipped. With `dry_run`,
/// only says what it would remove.
pub fn prune(
    store: &mut Store,
    before: &str,
    keep: impl Fn(&Run) -> bool,
    dry_run: bool,
) -> Result<Vec<Removed>, RemoveError> {
    let mut removed = Vec::new();
    for id in store.prunable(before)? {
        let run = store.run(&id)?;
        if keep(&run) {
            continue;
        }
        match remove(store, &id, dry_run) {
            Ok(done) => removed.push(done),
            Err(RemoveError::Active { .. }) => {} // its tree still works: another day
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}
