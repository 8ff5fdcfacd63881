//! A shepherd forked by `corral launch` as it begins, so that a run costs
//! one program start, not two.
//!
//! The copy is made before the launcher has logging, a store or a thread:
//! it is small (the launcher's parsed arguments and little more), and it
//! opens its own store while the launcher discovers presets and records
//! the run, so neither waits for the other and the second to open finds
//! the store's index already built. It then waits on a pipe for the run's
//! id ([`crate::upkeep::queue::Handoff`]); an empty pipe (a refused or queued
//! launch) sends it away quietly.
//!
//! Only a launcher outside every run forks: a process's `/proc/PID/environ`
//! is the one it was started with, and a run's processes are found by it
//! (`CORRAL_RUN_ID`) and spared as shepherds by it (`CORRAL_SHEPHERD`). A
//! fork of a run's process would still say it is that run's. Inside a run
//! the shepherd is started as a program, marked from its start.

use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;

use crate::home;
use crate::process::{self, Forked};
use crate::run::env::SHEPHERD_ENV;
use crate::store::Store;
use crate::upkeep::queue::Handoff;

/// Forks the shepherd of the run this launcher is about to record, if this
/// process may (one thread, outside every run). In the launcher, returns
/// the pipe to hand it the run; the forked shepherd never returns.
pub fn fork_ahead() -> Option<Handoff> {
    if !crate::run::caller::this_process_outside_every_run() {
        return None;
    }
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).ok()?;
    match process::fork_detached() {
        Ok(Some(Forked::Caller(middle))) => Some(Handoff::new(File::from(write), middle)),
        Ok(Some(Forked::Detached)) => {
            drop(write);
            std::process::exit(serve(read))
        }
        Ok(None) | Err(_) => None,
    }
}

/// The forked shepherd: opens the store, waits for its run, supervises it.
/// Returns the exit code.
fn serve(from_launcher: OwnedFd) -> i32 {
    let home = match crate::run::caller::home() {
        Ok(home) => home,
        Err(_) => return 1, // the launcher says it, and starts no run
    };
    let store = Store::open(&home);
    let mut run_id = String::new();
    let _ = File::from(from_launcher).read_to_string(&mut run_id);

    if run_id.is_empty() {
        return 0;
    }
    // From here on it is the run's shepherd, as `corral shepherd ID` is.
    let Ok(log) = home::open_private_append(&crate::upkeep::queue::shepherd_log(&home.run_dir(&run_id))) else {
        return 1; // no run folder: the run is healed as never started
    };
    if process::redirect_output(&log).is_err() {
        return 1;
    }
    std::env::set_var(SHEPHERD_ENV, &run_id);
    crate::home::logging::init(super::LOG_LEVEL);
    let result =
        store.map_err(super::ShepherdError::from).and_then(|store| super::shepherd_with(&home, &run_id, Some(store)));
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("corral shepherd {run_id} (forked by its launcher): {e}");
            1
        }
    }
}
