//! Aborting a run: the request is recorded in the store, then the run's
//! shepherd is signalled (after checking it is still that very process, by
//! pid and start time) and runs the stop sequence. Idempotent: aborting a
//! run that is over changes nothing.

use std::time::{Duration, Instant};

use crate::process::{ProcessId, Sig};
use crate::run::Run;
use crate::store::{AbortRequest, Store, StoreError};
use crate::upkeep::heal::HealError;
use crate::upkeep::queue::ShepherdCommand;
use crate::watch::Watcher;

/// What an abort did.
#[derive(Debug, Clone, PartialEq)]
pub enum Aborted {
    /// The run was stopped by this request (or one just before it).
    Stopped(Run),
    /// The run had already ended; it is unchanged.
    AlreadyOver(Run),
    /// The request is recorded but the run had not ended by the deadline.
    Pending(Run),
}

impl Aborted {
    /// The run as it now is.
    pub fn run(&self) -> &Run {
        match self {
            Aborted::Stopped(run) | Aborted::AlreadyOver(run) | Aborted::Pending(run) => run,
        }
    }
}

/// Records an abort of run `id` and signals its shepherd, without waiting.
/// The shepherd aborts the run's own active children in turn.
pub fn request(store: &mut Store, id: &str) -> Result<AbortRequest, StoreError> {
    let request = store.request_abort(id)?;
    if let AbortRequest::Requested(run) = &request {
        if let (Some(pid), Some(start)) = (run.shepherd_pid, run.shepherd_start) {
            // By identity: a shepherd gone, its pid taken, is never
            // signalled. An error here means the shepherd just exited;
            // reconciling finds out.
            let _ = (ProcessId { pid, start }).signal(Sig::Term);
        }
    }
    Ok(request)
}

/// Aborts run `id` (or a unique prefix) and its active descendants, and
/// waits up to `patience` for its outcome to be committed, healing the
/// store meanwhile (the freed slot goes to the next queued run).
pub fn abort(
    store: &mut Store,
    id: &str,
    patience: Duration,
    shepherd: &ShepherdCommand,
) -> Result<Aborted, HealError> {
    let id = store.find_run(id)?.id;
    match request(store, &id)? {
        AbortRequest::AlreadyOver(run) => return Ok(Aborted::AlreadyOver(run)),
        AbortRequest::AbortedBeforeStart(run) => {
            // No shepherd of its hands on what waited behind it.
            crate::upkeep::queue::fire_queued_behind(store, &[run.id.as_str()], shepherd)?;
            return Ok(Aborted::Stopped(run));
        }
        AbortRequest::Requested(_) => {}
    }
    let deadline = Instant::now() + patience;
    let mut watcher = Watcher::new(store)?;
    loop {
        // Healed at once, then when a followed process exits (and as a
        // safety net), not at every commit while the run winds down.
        let changed = watcher.heal_if_due(store, shepherd)?;
        let run = store.run(&id)?;
        if run.status.is_terminal() {
            return Ok(Aborted::Stopped(run));
        }
        if Instant::now() >= deadline {
            return Ok(Aborted::Pending(run));
        }
        if !changed {
            watcher.changed_before(store, Some(deadline))?;
        }
    }
}
