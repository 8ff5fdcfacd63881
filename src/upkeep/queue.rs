//! The queue: at most `max_parallel` runs hold a slot; the rest wait as
//! `queued` and start in launch order. Starting a run means starting its
//! shepherd, so that lives here too.
//!
//! There is no scheduler process. Whoever frees or may have freed a slot
//! starts the next runs: a shepherd as it ends, and every process that
//! heals the store (see `heal`). So the queue moves with no app or CLI
//! running, and recovers if a shepherd died before handing on its slot.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use crate::home::config::Config;
use crate::home::{self, Home};
use crate::run::env::{RUN_ID_ENV, SHEPHERD_ENV};
use crate::store::{Store, StoreError};

/// How to start a shepherd: a program and the arguments before the run id.
/// The CLI uses itself (`corral shepherd ID`); the app can use itself too.
#[derive(Debug, Clone)]
pub struct ShepherdCommand {
    /// The executable.
    pub program: PathBuf,
    /// Arguments before the run id.
    pub args: Vec<String>,
    /// A shepherd already forked, waiting for its run: used for the first
    /// run started, the program for any other.
    forked: Option<Arc<Mutex<Option<Handoff>>>>,
}

impl ShepherdCommand {
    /// `program shepherd <id>`.
    pub fn program(program: impl Into<PathBuf>) -> ShepherdCommand {
        ShepherdCommand { program: program.into(), args: vec!["shepherd".into()], forked: None }
    }

    /// This very executable, run as `<exe> shepherd <id>`.
    pub fn current_exe() -> std::io::Result<ShepherdCommand> {
        Ok(ShepherdCommand::program(live_exe(std::env::current_exe()?)))
    }

    /// The same, with a forked shepherd to take the first run started.
    pub fn with_forked(self, forked: Option<Handoff>) -> ShepherdCommand {
        ShepherdCommand { forked: forked.map(|f| Arc::new(Mutex::new(Some(f)))), ..self }
    }

    /// Sends away a forked shepherd no run took (the launch was queued):
    /// it is not kept waiting while this process goes on.
    pub fn dismiss_forked(&self) {
        drop(self.take_forked());
    }

    /// The forked shepherd, once.
    fn take_forked(&self) -> Option<Handoff> {
        self.forked.as_ref()?.lock().ok()?.take()
    }

    /// For the desktop programs: the `corral` CLI installed beside this
    /// program, else this program. A shepherd lives as long as its run, and
    /// the CLI maps a few MB where the tray links GTK (~13 MB) and the
    /// window WebKit (~50 MB), for nothing a shepherd does.
    pub fn lightest() -> std::io::Result<ShepherdCommand> {
        let own = ShepherdCommand::current_exe()?;
        Ok(ShepherdCommand { program: cli_beside(&own.program).unwrap_or(own.program), ..own })
    }
}

/// Who takes the first run started: a shepherd the launcher forked, told
/// the run's id through a pipe (dropped unused, the pipe tells it there is
/// no run for it: a launch that was refused, or queued); or this very
/// process, a template's spare, which supervises the run once it has
/// answered its launcher.
#[derive(Debug)]
pub struct Handoff(HandTo);

#[derive(Debug)]
enum HandTo {
    Forked {
        pipe: File,
        /// Reaped once the run is handed over.
        _middle: crate::process::Middle,
    },
    ThisProcess(Arc<std::sync::OnceLock<String>>),
}

impl Handoff {
    /// The write end of the pipe the forked shepherd reads, and the process
    /// between the two.
    pub fn new(pipe: File, middle: crate::process::Middle) -> Handoff {
        Handoff(HandTo::Forked { pipe, _middle: middle })
    }

    /// This process takes the run: its id is set in `taken`.
    pub fn to_this_process(taken: Arc<std::sync::OnceLock<String>>) -> Handoff {
        Handoff(HandTo::ThisProcess(taken))
    }

    /// Gives `run_id` to the shepherd; an error if it is gone.
    fn hand(self, run_id: &str) -> std::io::Result<()> {
        match self.0 {
            HandTo::Forked { mut pipe, .. } => pipe.write_all(run_id.as_bytes()),
            HandTo::ThisProcess(taken) => {
                taken.set(run_id.to_string()).map_err(|_| std::io::Error::other("this process took a run already"))
            }
        }
    }
}

/// The `corral` CLI in the folder of `exe`, if it is there.
fn cli_beside(exe: &Path) -> Option<PathBuf> {
    Some(exe.with_file_name("corral")).filter(|cli| cli.is_file() && cli != exe)
}

/// After `cargo install` (or a package upgrade) replaced the binary, the
/// kernel names the running one `… (deleted)`; the new binary at the same
/// path is the one to start.
fn live_exe(exe: PathBuf) -> PathBuf {
    let text = exe.to_string_lossy();
    match text.strip_suffix(" (deleted)") {
        Some(path) if Path::new(path).is_file() => PathBuf::from(path),
        _ => exe,
    }
}

/// Starts queued runs into the free slots; returns their ids.
pub fn start_queued(store: &mut Store, config: &Config, shepherd: &ShepherdCommand) -> Result<Vec<String>, StoreError> {
    let ids = store.promote_queued(config.max_parallel)?;
    for id in &ids {
        start_or_fail(store, id, shepherd)?;
    }
    Ok(ids)
}

/// Starts the shepherd of a run that holds a slot; if it cannot be started,
/// the run fails with the reason.
pub(crate) fn start_or_fail(store: &mut Store, id: &str, shepherd: &ShepherdCommand) -> Result<(), StoreError> {
    let Err(e) = start_shepherd(store.home(), id, shepherd) else { return Ok(()) };
    store.fail_unstarted(id, format!("cannot start the run's shepherd {}: {e}", shepherd.program.display()))
}

/// Has the fires queued behind runs `ended` carried out, now that those
/// runs ended without their shepherd's last word (it died and they were
/// found lost, or they were aborted before they started), as a timer
/// would: `corral schedule fire NAME`, started detached. Otherwise such a
/// fire waited for a firer that may never come (only timers firing).
pub fn fire_queued_behind(store: &Store, ended: &[&str], shepherd: &ShepherdCommand) -> Result<(), StoreError> {
    let mut schedules = Vec::new();
    for run in ended {
        if let Some(name) = store.schedule_of_run(run)? {
            if !schedules.contains(&name) {
                schedules.push(name);
            }
        }
    }
    for name in schedules {
        if store.queued_fires(&name)?.is_empty() || !store.schedule_active_runs(&name)?.is_empty() {
            continue;
        }
        let dir = store.home().schedule_dir(&name);
        let started = home::ensure_private_dir(&dir)
            .map_err(std::io::Error::other)
            .and_then(|()| home::open_private_append(&dir.join("fire.log")))
            .and_then(|log| {
                let mut command = corral_command(&shepherd.program, store.home());
                command.args(["schedule", "fire", &name]);
                crate::process::spawn_detached(command, log)
            });
        if let Err(e) = started {
            tracing::warn!(schedule = name, "cannot carry out the fires queued behind runs that ended: {e}");
        }
    }
    Ok(())
}

/// Where a shepherd's own diagnostics go, in its run's folder.
pub fn shepherd_log(run_dir: &Path) -> PathBuf {
    run_dir.join("shepherd.log")
}

/// Creates the run's folder and starts `shepherd ... <id>` detached, its own
/// diagnostics going to `shepherd.log` in the run's folder.
fn start_shepherd(home: &Home, run_id: &str, shepherd: &ShepherdCommand) -> std::io::Result<()> {
    let dir = home.run_dir(run_id);
    home::ensure_private_dir(&dir).map_err(std::io::Error::other)?;
    let log = home::open_private_append(&shepherd_log(&dir))?;
    if let Some(forked) = shepherd.take_forked() {
        match forked.hand(run_id) {
            Ok(()) => return Ok(()),
            Err(e) => tracing::debug!(run = run_id, "the forked shepherd is gone ({e}): starting one"),
        }
    }
    let mut command = corral_command(&shepherd.program, home);
    // The shepherd is marked as one (so a parent run's shepherd, which may
    // adopt it as subreaper, leaves it alone).
    command.args(&shepherd.args).arg(run_id).env(SHEPHERD_ENV, run_id);
    crate::process::spawn_detached(command, log)
}

/// `program` (a `corral`) to be started detached for `home`: in `/`, with
/// this installation's `CORRAL_HOME`, and without the id of the run that
/// started it (so that run's cleanup does not find it).
pub(crate) fn corral_command(program: &Path, home: &Home) -> Command {
    let mut command = Command::new(program);
    command.current_dir(Path::new("/")).env_remove(RUN_ID_ENV);
    if let Some(root) = home.env_value() {
        command.env(home::HOME_ENV, root);
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn desktop_programs_shepherd_with_the_cli_beside_them_if_it_is_there() {
        let folder = tempfile::tempdir().unwrap();
        let tray = folder.path().join("corral-tray");
        std::fs::write(&tray, "").unwrap();
        assert_eq!(cli_beside(&tray), None, "no CLI installed: the program itself");
        std::fs::write(folder.path().join("corral"), "").unwrap();
        assert_eq!(cli_beside(&tray), Some(folder.path().join("corral")));
        assert_eq!(cli_beside(&folder.path().join("corral")), None, "the CLI is itself");
    }

    #[test]
    fn a_replaced_binary_is_started_from_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("corral");
        std::fs::write(&exe, "").unwrap();
        let deleted = PathBuf::from(format!("{} (deleted)", exe.display()));
        assert_eq!(live_exe(deleted.clone()), exe);
        std::fs::remove_file(&exe).unwrap();
        assert_eq!(live_exe(deleted.clone()), deleted, "nothing to start instead: keep the error visible");
    }
}
