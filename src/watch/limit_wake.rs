//! Waking at a usage limit's reset. Queued runs of an agent whose usage
//! limit stands wait for its reset (see `store::slots`); the limited run's
//! shepherd starts them when it goes on, but a limited run aborted, or a
//! shepherd lost, leaves no process to look at that hour, and overnight
//! the night is lost. So every heal that finds a limit holding queued
//! runs makes sure one waker stands for the store: a detached `corral
//! limit-wake` (one per store, by a lock) that sleeps until the earliest
//! such reset, heals (which starts them), and leaves once no limit holds
//! a queued run.

use std::fs::File;
use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::heal::{heal, HealError};
use crate::home::{self, Home, HOME_ENV};
use crate::process::{self, FileLock};
use crate::queue::ShepherdCommand;
use crate::store::{Store, StoreError};

/// How long after a reset the queued runs are started: a reset said to the
/// minute ("try again at 5:40 PM") is over once that minute is.
const MARGIN: Duration = Duration::from_secs(5);

/// The longest a waker sleeps before it reads the store again (a limit
/// cleared or pushed back, its store removed).
const LOOK_AGAIN: Duration = Duration::from_secs(30);

fn lock_file(home: &Home) -> std::io::Result<File> {
    home::open_private_append(&home.data_dir().join("limit-wake.lock"))
}

/// Starts a waker if a usage limit holds queued runs and none stands.
/// Cheap when no limit stands (one read of a small table).
pub fn ensure(store: &Store) -> Result<(), StoreError> {
    if store.next_reset_holding_queued()?.is_none() {
        return Ok(());
    }
    let home = store.home();
    let Ok(file) = lock_file(home) else { return Ok(()) };
    // Held: one stands. Free now: a waker started by two heals at once
    // finds the lock taken, and leaves.
    if FileLock::try_exclusive(file).is_none() {
        return Ok(());
    }
    let Ok(program) = ShepherdCommand::lightest().map(|c| c.program) else { return Ok(()) };
    let mut command = Command::new(program);
    command.arg("limit-wake");
    if let Some(value) = home.env_value() {
        command.env(HOME_ENV, value);
    }
    let log = home::open_private_append(&home.data_dir().join("limit-wake.log"));
    if let Err(e) = log.and_then(|log| process::spawn_detached(command, log)) {
        tracing::warn!("cannot start a waker for the usage limits' reset: {e}");
    }
    Ok(())
}

/// The waker (`corral limit-wake`): until no limit holds a queued run,
/// sleeps to the earliest reset that does, then heals. Leaves at once if
/// another waker stands.
pub fn serve(home: &Home, shepherd: &ShepherdCommand) -> Result<(), HealError> {
    let Some(_held) = lock_file(home).ok().and_then(FileLock::try_exclusive) else { return Ok(()) };
    let mut store = Store::open(home)?;
    loop {
        heal(&mut store, shepherd)?;
        let Some(next) = store.next_reset_holding_queued()? else { return Ok(()) };
        let at = DateTime::parse_from_rfc3339(&next).map(|t| t.with_timezone(&Utc)).unwrap_or_else(|_| Utc::now());
        let until = (at - Utc::now()).to_std().unwrap_or_default() + MARGIN;
        std::thread::sleep(until.min(LOOK_AGAIN));
        // Its store removed (a test's, a home moved): nothing to wake.
        if !home.database().exists() {
            return Ok(());
        }
    }
}
