//! Launching a run: write the row, make its folder, start its shepherd
//! detached. The caller returns at once; the run lives on without it.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::config::{Config, ConfigError};
use crate::home;
use crate::preset::{self, Roots, UnknownPreset};
use crate::queue::{start_or_fail, ShepherdCommand};
use crate::run::{Run, RunStatus};
use crate::store::{NewRun, Store, StoreError};

/// What to launch.
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    /// The preset's name.
    pub preset: String,
    /// The task, verbatim.
    pub task: String,
    /// Working folder; project presets are found from it.
    pub cwd: PathBuf,
    /// Model override.
    pub model: Option<String>,
    /// Parent run; `None` means "the run this process works for, if any"
    /// (see `caller`).
    pub parent: Option<String>,
    /// The environment the agent starts with; `None` means this process's.
    pub env: Option<Vec<(OsString, OsString)>>,
    /// A git worktree of its own: `Some(true)` or `Some(false)` overrides
    /// the preset's `worktree`.
    pub worktree: Option<bool>,
    /// The commit its worktree starts from (default: HEAD).
    pub base: Option<String>,
}

/// Why a launch did not happen.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The settings file is broken.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No such preset.
    #[error(transparent)]
    UnknownPreset(#[from] UnknownPreset),
    /// The working folder is not a folder.
    #[error("the working folder {0} does not exist: create it or pass --cwd with an existing folder")]
    NoCwd(PathBuf),
    /// The worktree cannot be planned (no repository, no such base).
    #[error(transparent)]
    Worktree(#[from] crate::worktree::WorktreeError),
    /// `--base` without a worktree.
    #[error("--base {0} only applies to a run with a worktree: add --worktree")]
    BaseWithoutWorktree(String),
    /// The task is empty.
    #[error("the task is empty: say what the agent should do, e.g. corral launch scout \"find the config loader\"")]
    EmptyTask,
}

/// Launches a run and returns it as recorded: `starting`, `queued` behind
/// `max_parallel`, or already `failed` if its shepherd could not be started.
pub fn launch(store: &mut Store, request: &LaunchRequest, shepherd: &ShepherdCommand) -> Result<Run, LaunchError> {
    if request.task.trim().is_empty() {
        return Err(LaunchError::EmptyTask);
    }
    let cwd = std::path::absolute(&request.cwd).unwrap_or_else(|_| request.cwd.clone());
    if !cwd.is_dir() {
        return Err(LaunchError::NoCwd(cwd));
    }
    let parent = match &request.parent {
        Some(id) => Some(store.find_run(id)?),
        None => crate::caller::caller_run(store)?.map(|id| store.run(&id)).transpose()?,
    };
    // Inside a parent's worktree, project presets are those of the folder
    // it mirrors (a worktree has no untracked `.corral/` of its own).
    let presets_from = parent.as_ref().and_then(|p| p.folder_launched_for(&cwd)).unwrap_or_else(|| cwd.clone());
    let presets = preset::discover(&Roots::new(store.home(), Some(&presets_from)));
    let preset = presets.get(&request.preset)?;
    let parent = parent.map(|p| p.id);
    let cwd_text = cwd.to_string_lossy().into_owned();
    let plan = match (request.worktree.unwrap_or(preset.worktree), &request.base) {
        (true, base) => Some(crate::worktree::plan(&cwd, base.as_deref())?),
        (false, Some(base)) => return Err(LaunchError::BaseWithoutWorktree(base.clone())),
        (false, None) => None,
    };
    let new = NewRun {
        preset,
        task: &request.task,
        cwd: &cwd_text,
        model: request.model.as_deref(),
        parent_id: parent.as_deref(),
        worktree: plan.as_ref(),
    };
    let config = Config::load(store.home())?;
    let env: Vec<(OsString, OsString)> = request.env.clone().unwrap_or_else(|| std::env::vars_os().collect());
    let home = store.home().clone();
    // The environment is kept before the row is visible: a queued run may
    // be promoted by another process at once, and without its environment
    // it would start with that process's (a stranger's PATH and keys).
    let run = store.insert_run(&new, config.max_parallel, |id| {
        let run_dir = home.run_dir(id);
        home::ensure_private_dir(&run_dir).map_err(std::io::Error::other)?;
        crate::run_env::save(&run_dir, env.iter().cloned())
    })?;
    if run.status == RunStatus::Starting {
        start_or_fail(store, &run.id, shepherd)?;
    }
    Ok(store.run(&run.id)?)
}
