//! Pausing and resuming a run: the request is recorded in the store, the
//! run's shepherd is nudged (SIGUSR1, after checking it is still that very
//! process) and freezes or thaws every process of the run: its cgroup
//! (`cgroup.freeze`), or SIGSTOP and SIGCONT to each process without one.
//! A paused run holds no slot and its clocks stop; resuming takes a slot
//! back ahead of the queue.

use std::time::{Duration, Instant};

use crate::heal::HealError;
use crate::process::{self, ProcessId, Sig};
use crate::queue::ShepherdCommand;
use crate::run::{Run, RunStatus};
use crate::store::{Store, StoreError};
use crate::watch::Watcher;

/// Why a pause or resume did not happen.
#[derive(Debug, thiserror::Error)]
pub enum PauseError {
    /// The store failed, or could not be healed.
    #[error(transparent)]
    Heal(#[from] HealError),
    /// The run is not in a state the request applies to.
    #[error("run {id} is {status}: {what}")]
    NotApplicable {
        /// The run.
        id: String,
        /// Its status.
        status: RunStatus,
        /// What can be done instead.
        what: &'static str,
    },
}

impl From<StoreError> for PauseError {
    fn from(e: StoreError) -> Self {
        PauseError::Heal(e.into())
    }
}

/// How long `pause` and `resume` wait for the shepherd to act.
pub const PATIENCE: Duration = Duration::from_secs(5);

/// Pauses (`pause = true`) or resumes run `id` (or a unique prefix), and
/// waits up to `patience` for its shepherd to act. Returns the run as it
/// then is: `paused`, `running`, or still as it was if the shepherd has
/// not acted yet (a resumed run waits for a free slot).
pub fn pause(
    store: &mut Store,
    id: &str,
    pause: bool,
    patience: Duration,
    shepherd: &ShepherdCommand,
) -> Result<Run, PauseError> {
    let run = store.find_run(id)?;
    let target = if pause { RunStatus::Paused } else { RunStatus::Running };
    // A paused run with a resume pending (no slot yet) is paused again by
    // a later pause: the last word wins.
    let settled = if pause { store.pause_requested(&run.id)? } else { run.paused_at.is_none() };
    if run.status == target && settled {
        return Ok(run);
    }
    if !store.request_pause(&run.id, pause)? {
        let what = if pause {
            "only a running run can be paused (a waiting run is idle already)"
        } else {
            "only a paused run can be resumed"
        };
        return Err(PauseError::NotApplicable { id: run.id, status: run.status, what });
    }
    nudge(&run);
    let deadline = Instant::now() + patience;
    let mut watcher = Watcher::new(store)?;
    loop {
        // Healed at once, then when a followed process exits (and as a
        // safety net), not at every commit while the run winds down.
        let changed = watcher.heal_if_due(store, shepherd)?;
        let now = store.run(&run.id)?;
        if now.status == target || now.status.is_terminal() || Instant::now() >= deadline {
            return Ok(now);
        }
        if !changed {
            watcher.changed_before(store, Some(deadline))?;
        }
    }
}

/// Tells run's shepherd to look at its pause request.
fn nudge(run: &Run) {
    if let (Some(pid), Some(start)) = (run.shepherd_pid, run.shepherd_start) {
        if (ProcessId { pid, start }).is_alive() {
            // An error means the shepherd just exited; healing finds out.
            let _ = process::signal_pid(pid, Sig::Usr1);
        }
    }
}
