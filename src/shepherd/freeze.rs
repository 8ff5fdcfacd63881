//! Freezing a run for `corral pause` without freezing the store with it.
//!
//! A process of the run (`corral wait`, `corral launch`, its MCP server)
//! may be frozen holding the store's write lock: then no one could write,
//! this shepherd included. So a pause is recorded only once the lock is
//! taken with the run frozen; else the run is thawed, lets go of the lock,
//! and is frozen again a little later.

use std::time::Duration;

use super::cleanup::Cleanup;
use crate::store::{Store, StoreError};

/// How long a pause waits for the store's write lock with the run frozen,
/// before it thaws the run (which may hold the lock) and tries again.
const FROZEN_WRITE_PATIENCE: Duration = Duration::from_millis(25);
/// How many times a pause freezes the run before it gives up, withdrawn.
const PAUSE_ATTEMPTS: u32 = 8;

/// How a pause went.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Frozen {
    /// Every process of the run is frozen and the run recorded `paused`.
    Paused,
    /// The run was no longer one to pause (it ended meanwhile): thawed.
    NotPaused,
    /// The store stayed locked each time the run was frozen: thawed, and
    /// the request withdrawn so no later wake acts on it.
    GaveUp,
}

/// Freezes run `run_id` (every process `cleanup` holds) and records it
/// paused, thawing it between attempts while the store stays locked.
pub(super) fn freeze(store: &mut Store, cleanup: &mut Cleanup, run_id: &str) -> Result<Frozen, StoreError> {
    for attempt in 1..=PAUSE_ATTEMPTS {
        cleanup.freeze(true);
        match store.mark_paused(run_id, FROZEN_WRITE_PATIENCE)? {
            Some(true) => return Ok(Frozen::Paused),
            Some(false) => {
                cleanup.freeze(false);
                return Ok(Frozen::NotPaused);
            }
            None => {
                cleanup.freeze(false);
                cleanup.note(&format!("pause {attempt}: the store stayed locked while frozen; thawed"));
                if attempt < PAUSE_ATTEMPTS {
                    std::thread::sleep(FROZEN_WRITE_PATIENCE * attempt);
                }
            }
        }
    }
    store.request_pause(run_id, false)?;
    Ok(Frozen::GaveUp)
}
