//! Starting the waker of a usage limit's reset, one per store: a duty of
//! every heal (see `watch::limit_wake` for the waker itself and why it
//! stands).

use std::fs::File;
use std::process::Command;

use crate::home::{self, Home, HOME_ENV};
use crate::process::{self, FileLock};
use crate::store::{Store, StoreError};
use crate::upkeep::queue::ShepherdCommand;

/// The lock the one waker of a store holds while it stands.
pub(crate) fn lock_file(home: &Home) -> std::io::Result<File> {
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
