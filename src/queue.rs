//! The queue: at most `max_parallel` runs hold a slot (`starting` or
//! `running`); the rest wait as `queued` and start in launch order.
//!
//! There is no scheduler process. Whoever frees or may have freed a slot
//! starts the next runs: a shepherd as it ends, and every CLI command, app
//! start and MCP call after reconciling. So the queue moves with no app or
//! CLI running, and recovers if a shepherd died before handing on its slot.

use crate::config::Config;
use crate::launch::{start_shepherd, ShepherdCommand};
use crate::run::{RunStatus, StopReason};
use crate::store::{Outcome, Store, StoreError};

/// Starts queued runs into the free slots; returns their ids.
pub fn start_queued(store: &mut Store, config: &Config, shepherd: &ShepherdCommand) -> Result<Vec<String>, StoreError> {
    let ids = store.promote_queued(config.max_parallel)?;
    for id in &ids {
        if let Err(e) = start_shepherd(store.home(), id, shepherd) {
            fail_unstarted(store, id, shepherd, &e)?;
        }
    }
    Ok(ids)
}

/// Records that a run's shepherd could not be started.
pub(crate) fn fail_unstarted(
    store: &mut Store,
    id: &str,
    shepherd: &ShepherdCommand,
    e: &std::io::Error,
) -> Result<(), StoreError> {
    let outcome = Outcome {
        status: RunStatus::Failed,
        stop_reason: StopReason::SpawnFailed,
        exit_code: None,
        exit_signal: None,
        error: Some(format!("cannot start the run's shepherd {}: {e}", shepherd.program.display())),
        report: Default::default(),
    };
    store.commit_outcome(id, &outcome)?;
    store.mark_exited(id, None, None)
}
