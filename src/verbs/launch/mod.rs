//! Launching a run: write the row, make its folder, start its shepherd
//! detached. The caller returns at once; the run lives on without it.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::home;
use crate::home::config::{Config, ConfigError};
use crate::preset::{self, Preset, Roots, UnknownPreset};
use crate::run::{Run, RunStatus};
use crate::store::{NewRun, Store, StoreError};
use crate::upkeep::queue::{start_or_fail, ShepherdCommand};

mod within;

use within::Launcher;

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
    /// What it may spend (`--budget`), over the preset's and config.toml's.
    pub budget: Option<crate::cost::budget::Budget>,
    /// The schedule's fire launching it, and the precheck line it works on
    /// (recorded with the run, in one write).
    pub fire: Option<(i64, Option<String>)>,
    /// A key of the launcher's: a launch asked again under it (its answer
    /// lost on the way) gets the run the first one made.
    pub request: Option<String>,
    /// Its agent acts over MCP on its own tree only, whatever its preset's
    /// `mcp:` says: a run an agent of another machine launched here, whose
    /// own scope is its tree, is never given more than that agent has.
    pub scope_own: bool,
}

/// Why a launch did not happen.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store could not be healed before the run was recorded.
    #[error(transparent)]
    Heal(#[from] crate::upkeep::heal::HealError),
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
    /// The preset's agent cannot start: not installed, or not executable.
    #[error("preset {preset} cannot start: {why}")]
    Unavailable { preset: String, why: String },
    /// The task is longer than Corral takes.
    #[error("the task is {bytes} bytes, more than the {max} Corral takes: put the details in a file in the working folder and say in the task where it is")]
    TaskTooLong { bytes: usize, max: usize },
    /// The task holds a NUL byte, which no program can be given.
    #[error("the task holds a NUL byte (at byte {at}): no program can take one; remove it")]
    TaskHasNul { at: usize },
    /// The working folder's name is not UTF-8.
    #[error("the working folder {0:?} has a name that is not UTF-8, which Corral cannot store as it is: rename it, or launch from another folder")]
    CwdNotUtf8(PathBuf),
    /// The folder this process runs in was deleted.
    #[error("the folder this command runs in no longer exists (it was deleted or moved): cd to an existing folder, or pass --cwd")]
    CwdGone,
    /// A project's preset that runs code the user has not trusted.
    #[error(transparent)]
    Untrusted(#[from] crate::trust::Untrusted),
    /// The preset asks for a sandbox and none can be made here.
    #[error("preset {preset} runs sandboxed, and {source} (or write `sandbox: optional` in the preset to run it unsandboxed where no sandbox can be made)")]
    NoSandbox { preset: String, source: crate::sandbox::engine::NoEngine },
    /// A worktree, asked from inside a sandbox, of a repository that
    /// sandbox may not read all of: its checkout would show what it hides.
    #[error(
        "a worktree of {repo} is not made from inside run {within}'s sandbox: that sandbox may not read all of \
             the repository, and the worktree would be a copy of it. Launch without --worktree, or from your own \
             terminal"
    )]
    WorktreeUnreadable { repo: PathBuf, within: String },
    /// A folder, asked from inside a sandbox, that sandbox does not show.
    #[error("{} is not a folder run {within}'s sandbox reads, so no run is launched there from inside it: \
             launch it from your own terminal", folder.display())]
    FolderHidden { folder: PathBuf, within: String },
    /// A folder, asked from inside a sandbox, that no run launched there
    /// may work in: a system folder, or inside a repository's `.git`.
    #[error("{} is a system folder or inside a repository's .git, so no run is launched there from inside run \
             {within}'s sandbox (it would see the host's, or write what git runs): pass a folder of the project",
             folder.display())]
    FolderNotForChild { folder: PathBuf, within: String },
    /// A worktree, asked from inside a sandbox, of a repository whose git
    /// folder that sandbox could write.
    #[error(
        "no worktree is made from inside run {within}'s sandbox of the repository at {}: that sandbox can write \
         its git folder (hooks and settings Corral's git would run outside the sandbox). Launch without \
         --worktree, or from your own terminal", git.display()
    )]
    WorktreeOfWritableGit { git: PathBuf, within: String },
    /// The budget over the launching run is spent: work launched now
    /// would spend past it before anyone was asked.
    #[error(
        "{words}, so no run is launched under it: the user is asked (`corral resume {owner} --budget +N` allows more)"
    )]
    BudgetSpent { owner: String, words: String },
    /// From inside a run, a parent outside that run's tree.
    #[error(
        "run {parent} is not run {caller} nor a run it launched: from inside a run, what it launches stays in its \
         own tree (its budget, its waits). Leave out --parent"
    )]
    ParentNotYours { parent: String, caller: String },
    /// `{port}` named with no ports to fill it.
    #[error(
        "preset {preset} uses {{port}}, and its runs get no ports (every run would get the same empty value, and \
         one run's teardown would drop another's): add `ports: 1` to {path}, or `ports = 1` to config.toml"
    )]
    PortWithoutPorts { preset: String, path: String },
    /// Asked by a process its ended run left behind (in the moments before
    /// its shepherd stops it): that run's tree is closed.
    #[error(
        "run {caller}, which this process belongs to, has ended ({status}): a process it left running launches \
         nothing, as its children would outlive it. Launch from a run at work, or from your own terminal"
    )]
    CallerEnded { caller: String, status: RunStatus },
    /// The task is empty.
    #[error("the task is empty: say what the agent should do, e.g. corral launch scout \"find the config loader\"")]
    EmptyTask,
}

/// The longest task Corral takes, in bytes: it is stored, shown and handed
/// to the agent whole (on stdin or in a file, never the command line).
pub const MAX_TASK_BYTES: usize = 1 << 20;

/// Refuses, before anything is recorded, a task no agent can be given.
pub fn check_task(task: &str) -> Result<(), LaunchError> {
    if task.trim().is_empty() {
        return Err(LaunchError::EmptyTask);
    }
    if task.len() > MAX_TASK_BYTES {
        return Err(LaunchError::TaskTooLong { bytes: task.len(), max: MAX_TASK_BYTES });
    }
    if let Some(at) = task.bytes().position(|b| b == 0) {
        return Err(LaunchError::TaskHasNul { at });
    }
    Ok(())
}

/// The folder this process runs in, for a launch without `--cwd`; a deleted
/// one is said as such.
pub fn working_folder() -> Result<PathBuf, LaunchError> {
    std::env::current_dir().map_err(|_| LaunchError::CwdGone)
}

/// Launches a run and returns it as recorded: `starting`, `queued` behind
/// `max_parallel`, or already `failed` if its shepherd could not be started.
pub fn launch(store: &mut Store, request: &LaunchRequest, shepherd: &ShepherdCommand) -> Result<Run, LaunchError> {
    // First, before anything can refuse: a process of a lost run stops
    // here with it, and a launch counts slots as they truly are.
    if crate::upkeep::heal::due_before_launch(store)? {
        crate::upkeep::heal::heal(store, shepherd)?;
    }
    check_task(&request.task)?;
    if let Some(made) = request.request.as_deref().map(|key| store.run_of_request(key)).transpose()?.flatten() {
        return Ok(made);
    }
    let cwd = std::path::absolute(&request.cwd).unwrap_or_else(|_| request.cwd.clone());
    if !cwd.is_dir() {
        return Err(LaunchError::NoCwd(cwd));
    }
    if cwd.to_str().is_none() {
        return Err(LaunchError::CwdNotUtf8(cwd));
    }
    let caller = crate::run::caller::caller_run(store)?;
    let caller_run = caller.as_deref().map(|id| store.run(id)).transpose()?;
    // A parent never ends before its children: what an ended run left
    // running (until its shepherd stops it) adds none.
    if let Some(ended) = caller_run.as_ref().filter(|run| run.status.is_terminal()) {
        return Err(LaunchError::CallerEnded { caller: ended.id.clone(), status: ended.status });
    }
    let parent = match &request.parent {
        Some(id) => Some(store.find_run(id)?),
        None => caller_run,
    };
    // From inside a run, what it launches stays in its tree: under another
    // run it would spend outside its budget and be waited for by no one.
    if let (Some(caller), Some(parent)) = (&caller, &parent) {
        if !store.is_within(&parent.id, caller)? {
            return Err(LaunchError::ParentNotYours { parent: parent.id.clone(), caller: caller.clone() });
        }
    }
    // Under a budget already spent, nothing more starts: it would spend
    // before anyone was asked (a lead fanning out after its crossing).
    if let Some(parent) = &parent {
        if let Some(crossing) = store.budget_crossed(&parent.id)? {
            return Err(LaunchError::BudgetSpent { owner: crossing.owner.clone(), words: crossing.words(&parent.id) });
        }
    }
    // Inside a parent's worktree, project presets are those of the folder
    // it mirrors (a worktree has no untracked `.corral/` of its own).
    let presets_from = parent.as_ref().and_then(|p| p.folder_launched_for(&cwd)).unwrap_or_else(|| cwd.clone());
    // A preset's own `schedule:` launches that preset, the global one: the
    // repository it works in does not decide what runs (its prompt, its
    // `sandbox: none`).
    let project = match &request.fire {
        Some((fire, _)) if store.schedule(&store.fire(*fire)?.schedule)?.source.is_some() => None,
        _ => Some(presets_from.as_path()),
    };
    let presets = preset::discover_named(&Roots::new(store.home(), project), &request.preset);
    let preset = presets.get(&request.preset)?;
    for warning in &preset.warnings {
        tracing::warn!("preset {} ({}): {warning}", preset.name, preset.path);
    }
    // A cloned repository's preset that runs code runs only once trusted;
    // one that replaces a shipped or global preset is said.
    let config = Config::load(store.home())?;
    crate::trust::check(store, preset, config.sandbox.as_ref()).map_err(|e| match e {
        crate::trust::CheckError::Store(e) => LaunchError::Store(e),
        crate::trust::CheckError::Untrusted(e) => LaunchError::Untrusted(e),
    })?;
    if let Some(shadow) = presets.presets.iter().find(|e| e.preset.path == preset.path).and_then(crate::trust::shadows)
    {
        tracing::warn!("{shadow}");
    }
    if preset.uses_port() && config.ports_for(preset).is_none() {
        return Err(LaunchError::PortWithoutPorts { preset: preset.name.clone(), path: preset.path.clone() });
    }
    // With the PATH the run will have: the launcher's.
    let path = crate::run::env::var(request.env.as_deref(), "PATH");
    if let Some(why) = preset::available::unavailable(preset, path.as_deref(), &cwd) {
        return Err(LaunchError::Unavailable { preset: preset.name.clone(), why });
    }
    // Launched from inside a sandbox (its parent's, or an ancestor's), it
    // runs in that sandbox whoever starts it: its own preset cannot widen it.
    let home = crate::run::env::var(request.env.as_deref(), "HOME").map(PathBuf::from).unwrap_or_else(|| "/".into());
    let confined;
    let within = crate::run::caller::confining(store, &config, parent.as_ref().map(|p| p.id.clone()))?;
    let launcher = within.as_deref().map(|id| Launcher::load(store, &config, id, &home)).transpose()?.flatten();
    // Inside a sandbox a run is launched only where that sandbox reads, as
    // the folder is on disk (not `proj/..`, not a link out of `proj`).
    let cwd = match &launcher {
        Some(launcher) => launcher.folder(store, &cwd)?,
        None => std::fs::canonicalize(&cwd).ok().filter(|_| within.is_some()).unwrap_or(cwd),
    };
    let preset = match &launcher {
        Some(launcher) => {
            let at = crate::sandbox::Folders {
                home: &home,
                cwd: &cwd,
                own_worktree: request.worktree.unwrap_or(preset.worktree),
            };
            confined = launcher.confine(&config, preset, &at);
            &confined
        }
        None if within.is_some() => preset,
        None => {
            check_sandbox(&config, preset, path.as_deref())?;
            // What it may write, fixed as the places are on disk now.
            match config.sandbox_for(preset) {
                Some(sandbox) => {
                    let sandbox = crate::sandbox::Asked::Rules(sandbox.resolved(&home));
                    confined = Preset { sandbox: Some(sandbox), ..preset.clone() };
                    &confined
                }
                None => preset,
            }
        }
    };
    // Launched here by an agent of another machine whose scope is its own
    // tree: never given more over MCP than that agent has.
    let narrowed;
    let preset = match request.scope_own && preset.mcp.is_some() {
        true => {
            narrowed = Preset { mcp: None, ..preset.clone() };
            &narrowed
        }
        false => preset,
    };
    let parent = parent.map(|p| p.id);
    // A sandboxed run's folder as on disk: its sandbox never follows a
    // link put in its stead later.
    let cwd = match &preset.sandbox {
        Some(crate::sandbox::Asked::Rules(_)) => std::fs::canonicalize(&cwd).unwrap_or(cwd),
        _ => cwd,
    };
    let cwd_text = cwd.to_string_lossy().into_owned();
    let plan = match (request.worktree.unwrap_or(preset.worktree), &request.base) {
        (true, base) => Some(crate::worktree::plan(&cwd, base.as_deref())?),
        (false, Some(base)) => return Err(LaunchError::BaseWithoutWorktree(base.clone())),
        (false, None) => None,
    };
    // A worktree is a copy of its repository: made inside a sandbox only of
    // one that sandbox reads whole.
    if let (Some(launcher), Some(plan)) = (&launcher, &plan) {
        if !launcher.reads_all_of(&plan.repo) {
            return Err(LaunchError::WorktreeUnreadable { repo: plan.repo.clone(), within: launcher.id.clone() });
        }
    }
    // Corral's `git worktree add` runs outside every sandbox: never in a
    // repository whose git folder (hooks, settings, filters) the sandbox
    // it is asked from could write.
    if let (Some(launcher), Some(plan)) = (&launcher, &plan) {
        let git = crate::worktree::common_dir(&plan.repo)?;
        if launcher.writes_git(store, &git) {
            return Err(LaunchError::WorktreeOfWritableGit { git, within: launcher.id.clone() });
        }
    }
    let new = NewRun {
        preset,
        task: &request.task,
        cwd: &cwd_text,
        model: request.model.as_deref(),
        parent_id: parent.as_deref(),
        worktree: plan.as_ref(),
        budget: config.budget_for(preset, request.budget),
        fire: request.fire.as_ref().map(|(fire, item)| crate::store::FireLink { fire: *fire, item: item.as_deref() }),
        request: request.request.as_deref(),
        ports: config.ports_for(preset),
    };
    let env: Vec<(OsString, OsString)> = request.env.clone().unwrap_or_else(|| std::env::vars_os().collect());
    let home = store.home().clone();
    // The environment is kept before the row is visible: a queued run may
    // be promoted by another process at once, and without its environment
    // it would start with that process's (a stranger's PATH and keys).
    let run = match store.insert_run(&new, config.max_parallel, |id| {
        let run_dir = home.run_dir(id);
        home::ensure_private_dir(&run_dir).map_err(std::io::Error::other)?;
        crate::run::env::save(&run_dir, env.iter().cloned())
    }) {
        // The other launcher of this request made it (and starts it).
        Err(StoreError::RequestMade(made)) => return Ok(store.run(&made)?),
        made => made?,
    };
    match run.status {
        RunStatus::Starting => start_or_fail(store, &run.id, shepherd)?,
        // No slot free, as the store says: a heal may free one (a run whose
        // shepherd died holds its slot until then) and starts the queue
        // into it, this run too if it is next.
        RunStatus::Queued => _ = crate::upkeep::heal::heal(store, shepherd)?,
        _ => {}
    }
    Ok(store.run(&run.id)?)
}

/// Refuses a preset whose sandbox cannot be made here (unless it is
/// optional), before anything is recorded.
fn check_sandbox(
    config: &Config,
    preset: &crate::preset::Preset,
    path: Option<&std::ffi::OsStr>,
) -> Result<(), LaunchError> {
    let Some(sandbox) = config.sandbox_for(preset) else { return Ok(()) };
    match crate::sandbox::engine::bwrap(path) {
        Err(source) if !sandbox.optional => Err(LaunchError::NoSandbox { preset: preset.name.clone(), source }),
        _ => Ok(()),
    }
}

/// Launches run `id` (or a unique prefix) again: the same preset, task,
/// folder, model, parent, worktree choice (a fresh worktree if it had one)
/// and environment (as kept with it).
pub fn relaunch(store: &mut Store, id: &str, shepherd: &ShepherdCommand) -> Result<Run, LaunchError> {
    relaunch_with(store, id, None, shepherd)
}

/// As [`relaunch`], with another task when `task` is given.
pub fn relaunch_with(
    store: &mut Store,
    id: &str,
    task: Option<String>,
    shepherd: &ShepherdCommand,
) -> Result<Run, LaunchError> {
    let old = store.find_run(id)?;
    let env = crate::run::env::load(&store.home().run_dir(&old.id)).map_err(|source| StoreError::RunFolder {
        path: crate::run::env::env_file(&store.home().run_dir(&old.id)),
        source,
    })?;
    let request = LaunchRequest {
        preset: old.preset.clone(),
        task: task.unwrap_or_else(|| old.task.clone()),
        cwd: old.launch_folder(),
        model: old.model.clone(),
        parent: old.parent_id.clone(),
        env,
        worktree: Some(old.worktree_repo.is_some()),
        base: None,
        // As it was launched, not as it was raised meanwhile.
        budget: store.launch_budget_of(&old.id)?.or(old.budget),
        fire: None,
        request: None,
        scope_own: false,
    };
    let run = launch(store, &request, shepherd)?;
    // Relaunched is answered: the old run's failure or refusal leaves
    // what needs the user (a second press relaunches nothing more). One
    // still at work is not: how it ends is still to be seen.
    if old.status.is_terminal() {
        store.mark_seen(&old.id)?;
    }
    Ok(run)
}
