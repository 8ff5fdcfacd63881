//! Reconciliation: making the store true again after a shepherd died.
//!
//! Every reader (CLI, app, MCP server) runs this when it starts. A run that
//! is active in the store but whose shepherd is gone (checked by pid *and*
//! start time, never pid alone) becomes `lost` / `shepherd_died` — never
//! `completed`, never silently `failed` — and every process still alive from
//! it is killed: the recorded agent, and any process carrying the run's id
//! in its environment (a `setsid` grandchild whose parents are gone).

use std::time::Duration;

use crate::process::{self, ProcessId, Sig};
use crate::run::{Run, RunStatus, StopReason};
use crate::shepherd::RUN_ID_ENV;
use crate::store::{Outcome, Store, StoreError};
use crate::time;

/// A run still `starting` with no shepherd recorded after this long never
/// got one (its launcher died between writing the row and spawning).
const SHEPHERD_START_LIMIT: Duration = Duration::from_secs(60);

/// Marks runs whose shepherd is gone as `lost` and kills their survivors.
/// Returns the runs it marked.
pub fn reconcile(store: &mut Store) -> Result<Vec<Run>, StoreError> {
    let mut lost = Vec::new();
    for run in store.active_runs()? {
        if !shepherd_is_gone(&run) {
            continue;
        }
        let outcome = Outcome {
            status: RunStatus::Lost,
            stop_reason: StopReason::ShepherdDied,
            exit_code: None,
            exit_signal: None,
            error: Some(lost_reason(store)),
            report: Default::default(),
        };
        if store.commit_outcome(&run.id, &outcome)? {
            kill_survivors(&run);
            store.mark_exited(&run.id, None, None)?;
            lost.push(store.run(&run.id)?);
        }
    }
    Ok(lost)
}

/// Why a run is lost, with the likely cause when the store's disk is full
/// (a shepherd dies when it cannot write its outcome).
fn lost_reason(store: &Store) -> String {
    let base = "the run's shepherd process died, so how the agent ended is unknown";
    let folder = store.home().data_dir();
    match process::disk_free(folder) {
        Some(free) if free < LOW_DISK => {
            format!(
                "{base}; the disk holding {} is full ({free} bytes free): free space, then relaunch",
                folder.display()
            )
        }
        _ => base.to_string(),
    }
}

/// Below this much free space a dead shepherd most likely could not write.
const LOW_DISK: u64 = 1 << 20;

fn shepherd_is_gone(run: &Run) -> bool {
    match (run.status, run.shepherd_pid, run.shepherd_start) {
        (RunStatus::Queued, _, _) => false,
        (_, Some(pid), Some(start)) => !ProcessId { pid, start }.is_alive(),
        (_, _, _) => {
            let created = time::parse(&run.created_at).unwrap_or_else(time::now);
            (time::now() - created).to_std().unwrap_or_default() > SHEPHERD_START_LIMIT
        }
    }
}

/// Kills the recorded agent (if it is still that process) and every process
/// that carries the run's id.
fn kill_survivors(run: &Run) {
    if let (Some(pid), Some(start)) = (run.agent_pid, run.agent_start) {
        if (ProcessId { pid, start }).is_alive() {
            let _ = process::signal_group(pid, Sig::Kill);
            let _ = process::signal_pid(pid, Sig::Kill);
        }
    }
    for pid in process::pids_with_env(RUN_ID_ENV, &run.id) {
        let _ = process::signal_pid(pid, Sig::Kill);
    }
}
