//! Removing ended runs for good (`corral rm`, `corral prune`): their rows,
//! transcripts and folders, and their worktrees unless those hold changes
//! that are not in the branch the run started from (kept, and said). An
//! active run is never removed, nor a run whose tree is still active, nor
//! one launched by a run still active; a run goes with the runs it
//! launched.

use std::path::{Path, PathBuf};

use crate::run::Run;
use crate::store::{Reclaimed, Store, StoreError};
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
    /// The run has ended, but its processes are still being stopped.
    #[error(
        "run {0} has ended, but processes of it are still being stopped: nothing was removed. Try again once they are gone (`corral show {0}` says `exited` then)"
    )]
    Stopping(String),
    /// Waiting for the run's processes to go failed.
    #[error(transparent)]
    Review(#[from] crate::verbs::review::ReviewError),
}

/// What removing one run (and the runs it launched) did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Removed {
    /// The runs removed, the one asked for first.
    pub ids: Vec<String>,
    /// Worktrees kept because they hold changes not merged, with the files.
    pub kept_worktrees: Vec<KeptWorktree>,
    /// Pull requests of the runs removed that are open on the forge: they
    /// stay there, and Corral follows them no more (`pull request #7
    /// (https://…)`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pull_requests_left_open: Vec<String>,
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
    /// False for a worktree whose folder was removed by hand: what is kept
    /// is its branch.
    pub there: bool,
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
    // Ended, its processes still being stopped (an abort typed just
    // before): waited for as a discard waits, never its folder removed
    // under them (and the log of their end with it).
    let runs = match dry_run {
        true => runs,
        false => runs.into_iter().map(|run| crate::verbs::review::once_exited(store, run)).collect::<Result<_, _>>()?,
    };
    if let Some(stopping) = runs.iter().find(|r| !dry_run && r.exited_at.is_none() && r.started_at.is_some()) {
        return Err(RemoveError::Stopping(stopping.id.clone()));
    }
    // Said, not closed: a pull request is the forge's, and its page is
    // the user's to close.
    let mut pull_requests_left_open: Vec<String> = Vec::new();
    for id in &ids {
        if let Some(pr) = store.pull_request(id)?.filter(|pr| pr.state == "open") {
            let said = format!("{} {} ({})", pr.kind(), pr.name(), pr.url);
            if !pull_requests_left_open.contains(&said) {
                pull_requests_left_open.push(said);
            }
        }
    }
    let mut kept_worktrees = Vec::new();
    let mut drop_worktrees = Vec::new();
    for run in &runs {
        let (Some(tree), Some(repo)) = (&run.worktree, &run.worktree_repo) else { continue };
        let branch = run.worktree_from_branch.clone().unwrap_or_else(|| tree.base.clone());
        // A worktree whose changes cannot be read is kept: never lose work
        // on a doubt. One removed by hand is judged by what its branch
        // holds, and its entry and branch go with the run when that is
        // merged.
        let unmerged = match worktree::is_there(Path::new(&tree.path)) {
            true => worktree::unmerged(Path::new(repo), &branch, tree),
            false => worktree::unmerged_on_branch(Path::new(repo), &branch, tree),
        };
        let mut unmerged = unmerged.unwrap_or_else(|e| vec![e.to_string()]);
        // Nor one another run works in (a run relaunched there).
        if let Some(other) = crate::verbs::review::working_in(store, tree)?.filter(|o| !ids.contains(&o.id)) {
            unmerged.insert(0, format!("(run {} works in it)", other.id));
        }
        if unmerged.is_empty() {
            drop_worktrees.push((PathBuf::from(repo), tree.clone()));
        } else {
            // Commands name the repository's own folder, which outlives
            // the worktree the run was launched in (another run's).
            let there = worktree::is_there(Path::new(&tree.path));
            let main = there.then(|| worktree::main_repository(Path::new(&tree.path))).flatten();
            kept_worktrees.push(KeptWorktree {
                there,
                path: tree.path.clone(),
                branch: tree.branch.clone(),
                repo: main.map_or_else(|| repo.clone(), |m| m.display().to_string()),
                unmerged,
            });
        }
    }
    if !dry_run {
        // A run that goes takes its teardown with it (its database, say),
        // while the run (its preset, its environment) is still there, its
        // worktree kept or not: once its record is gone nothing could.
        for id in &ids {
            if let Some(failed) = crate::verbs::review::tear_down(store, id) {
                tracing::warn!("{failed}");
            }
        }
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
    Ok(Removed { ids, kept_worktrees, pull_requests_left_open })
}

/// Which ended runs `prune` removes.
#[derive(Debug, Clone, Default)]
pub struct PruneRule {
    /// Runs that ended longer ago than this.
    pub older_than: std::time::Duration,
    /// Only runs that ended so (empty: any end).
    pub status: Vec<crate::RunStatus>,
    /// Only runs of this preset.
    pub preset: Option<String>,
}

/// What a prune did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Pruned {
    /// Each run removed (with the runs it launched).
    pub removed: Vec<Removed>,
    /// Runs removed in all.
    pub runs: usize,
    /// The database's size before and after giving space back (none on a
    /// dry run, or when nothing was removed).
    pub database: Option<Reclaimed>,
}

/// Removes every ended run launched by no other run that `rule` matches,
/// with the runs it launched, then gives the space back; runs whose tree is
/// still active are skipped (another day). With `dry_run`, only says what
/// it would remove.
pub fn prune(store: &mut Store, rule: &PruneRule, dry_run: bool) -> Result<Pruned, RemoveError> {
    let before = chrono::Duration::from_std(rule.older_than)
        .ok()
        .and_then(|age| crate::text::time::now().checked_sub_signed(age))
        .map_or_else(|| "0000".to_string(), crate::text::time::format);
    let mut removed = Vec::new();
    for id in store.prunable(&before)? {
        let run = store.run(&id)?;
        let matches = (rule.status.is_empty() || rule.status.contains(&run.status))
            && rule.preset.as_ref().is_none_or(|p| &run.preset == p);
        if !matches {
            continue;
        }
        match remove(store, &id, dry_run) {
            Ok(done) => removed.push(done),
            Err(RemoveError::Active { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let runs = removed.iter().map(|r| r.ids.len()).sum();
    let database = if dry_run || runs == 0 { None } else { reclaim(store) };
    Ok(Pruned { removed, runs, database })
}

/// Gives the removed runs' space back to the disk; a failure (another
/// process busy with the database) is logged, not an error: the rows are
/// gone either way and the next removal tries again.
pub fn reclaim(store: &mut Store) -> Option<Reclaimed> {
    store.reclaim().map_err(|e| tracing::warn!("cannot give the database's free space back yet: {e}")).ok()
}
