//! Waiting for runs to end, as `corral wait` and the MCP server do: by
//! watching the store, never by polling processes.

use std::time::{Duration, Instant};

use crate::run::{Run, RunStatus};
use crate::store::{Store, StoreError};
use crate::watch::Watcher;

/// How a wait ended.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitResult {
    /// The runs as they were when the wait ended, in the order asked.
    pub runs: Vec<Run>,
    /// True if the deadline passed with some run still active.
    pub timed_out: bool,
}

impl WaitResult {
    /// True if every run completed.
    pub fn all_completed(&self) -> bool {
        self.runs.iter().all(|r| r.status == RunStatus::Completed)
    }
}

/// How often a wait re-checks shepherds even when nothing is committed: a
/// shepherd killed with SIGKILL commits nothing, yet its run must end.
const RECHECK: Duration = Duration::from_millis(500);

/// Blocks until every run in `ids` (ids or unique prefixes) is terminal, or
/// `deadline` passes.
pub fn wait_for(store: &mut Store, ids: &[String], deadline: Option<Instant>) -> Result<WaitResult, StoreError> {
    let ids: Vec<String> = ids.iter().map(|id| store.find_run(id).map(|r| r.id)).collect::<Result<_, _>>()?;
    let mut watcher = Watcher::new(store)?;
    loop {
        // A shepherd that died must not leave the wait hanging forever.
        crate::reconcile::reconcile(store)?;
        let runs: Vec<Run> = ids.iter().map(|id| store.run(id)).collect::<Result<_, _>>()?;
        if runs.iter().all(|r| r.status.is_terminal()) {
            return Ok(WaitResult { runs, timed_out: false });
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(WaitResult { runs, timed_out: true });
        }
        let recheck = Instant::now() + RECHECK;
        watcher.changed_before(store, Some(deadline.map_or(recheck, |d| d.min(recheck))))?;
    }
}

/// Records that the run `caller` (the run the asking process belongs to,
/// from its `CORRAL_RUN_ID`) now has the results of those of `runs` that
/// are its ended children: a parent that waited on its children, or read
/// their results, needs no continuation turn to be handed them.
pub fn collected_by(store: &mut Store, caller: Option<&str>, runs: &[Run]) -> Result<(), StoreError> {
    let Some(caller) = caller else { return Ok(()) };
    let ids: Vec<String> = runs
        .iter()
        .filter(|r| r.status.is_terminal() && r.parent_id.as_deref() == Some(caller) && r.collected_at.is_none())
        .map(|r| r.id.clone())
        .collect();
    if ids.is_empty() {
        return Ok(());
    }
    store.mark_collected(&ids)
}

/// The run this process belongs to, if it runs inside one.
pub fn caller_run() -> Option<String> {
    std::env::var(crate::shepherd::RUN_ID_ENV).ok().filter(|id| !id.is_empty())
}
