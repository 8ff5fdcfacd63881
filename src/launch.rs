//! Launching a run: write the row, make its folder, start its shepherd
//! detached. The caller returns at once; the run lives on without it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::config::{Config, ConfigError};
use crate::home::{self, Home};
use crate::preset::{self, Roots, UnknownPreset};
use crate::run::{Run, RunStatus};
use crate::shepherd::{RUN_ID_ENV, SHEPHERD_ENV};
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
    /// Parent run; `None` means "the run this process belongs to, if any".
    pub parent: Option<String>,
}

/// How to start a shepherd: a program and the arguments before the run id.
/// The CLI uses itself (`corral shepherd ID`); the app can use itself too.
#[derive(Debug, Clone)]
pub struct ShepherdCommand {
    /// The executable.
    pub program: PathBuf,
    /// Arguments before the run id.
    pub args: Vec<String>,
}

impl ShepherdCommand {
    /// This very executable, run as `<exe> shepherd <id>`.
    pub fn current_exe() -> std::io::Result<ShepherdCommand> {
        Ok(ShepherdCommand { program: std::env::current_exe()?, args: vec!["shepherd".into()] })
    }
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
    let presets = preset::discover(&Roots::new(store.home(), Some(&cwd)));
    let preset = presets.get(&request.preset)?;
    let parent = match &request.parent {
        Some(id) => Some(store.find_run(id)?.id),
        // Inside a run, its id is in the environment. A stale id (from
        // another installation, say) must not block the launch.
        None => std::env::var(RUN_ID_ENV).ok().and_then(|id| store.run(&id).ok()).map(|r| r.id),
    };
    let cwd_text = cwd.to_string_lossy().into_owned();
    let new = NewRun {
        preset,
        task: &request.task,
        cwd: &cwd_text,
        model: request.model.as_deref(),
        parent_id: parent.as_deref(),
    };
    let config = Config::load(store.home())?;
    let run = store.insert_run(&new, config.max_parallel)?;
    home::ensure_private_dir(&store.home().run_dir(&run.id)).map_err(StoreError::from)?;
    if run.status == RunStatus::Starting {
        if let Err(e) = start_shepherd(store.home(), &run.id, shepherd) {
            crate::queue::fail_unstarted(store, &run.id, shepherd, &e)?;
        }
    }
    Ok(store.run(&run.id)?)
}

/// Creates the run's folder and starts `shepherd ... <id>` detached, its own
/// diagnostics going to `shepherd.log` in the run's folder.
pub(crate) fn start_shepherd(home: &Home, run_id: &str, shepherd: &ShepherdCommand) -> std::io::Result<()> {
    let dir = home.run_dir(run_id);
    home::ensure_private_dir(&dir).map_err(std::io::Error::other)?;
    let log = home::open_private_append(&dir.join("shepherd.log"))?;
    let mut command = Command::new(&shepherd.program);
    // The shepherd is marked as one (so a parent run's shepherd, which may
    // adopt it as subreaper, leaves it alone) and does not carry the id of
    // the run that launched it (so that run's cleanup does not find it).
    command
        .args(&shepherd.args)
        .arg(run_id)
        .current_dir(Path::new("/"))
        .env(SHEPHERD_ENV, run_id)
        .env_remove(RUN_ID_ENV);
    if let Some(root) = home.env_value() {
        command.env(home::HOME_ENV, root);
    }
    crate::process::spawn_detached(command, log)
}
