//! Waking at a usage limit's reset: the waker itself (`corral
//! limit-wake`; `upkeep::limit_waker` starts it). Queued runs of an agent whose usage
//! limit stands wait for its reset (see `store::slots`); the limited run's
//! shepherd starts them when it goes on, but a limited run aborted, or a
//! shepherd lost, leaves no process to look at that hour, and overnight
//! the night is lost. So every heal that finds a limit holding queued
//! runs makes sure one waker stands for the store: a detached `corral
//! limit-wake` (one per store, by a lock) that sleeps until the earliest
//! such reset, heals (which starts them), and leaves once no limit holds
//! a queued run.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::home::Home;
use crate::process::FileLock;
use crate::store::Store;
use crate::upkeep::heal::{heal, HealError};
use crate::upkeep::limit_waker::lock_file;
use crate::upkeep::queue::ShepherdCommand;

/// How long after a reset the queued runs are started: a reset said to the
/// minute ("try again at 5:40 PM") is over once that minute is.
const MARGIN: Duration = Duration::from_secs(5);

/// The longest a waker sleeps before it reads the store again (a limit
/// cleared or pushed back, its store removed).
const LOOK_AGAIN: Duration = Duration::from_secs(30);

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
