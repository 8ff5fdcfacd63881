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
    let mut aborted = abort_all(store, &[id.to_string()], patience, shepherd)?;
    Ok(aborted.remove(0))
}

/// Aborts runs `ids` (or unique prefixes), each with its active
/// descendants, as [`abort`] does one. Every id is found, then every abort
/// recorded (the queued ones first), before any is waited for: a queued
/// run named with a running one is aborted before the slot the running one
/// frees could start its agent, and an unknown id aborts none.
pub fn abort_all(
    store: &mut Store,
    ids: &[String],
    patience: Duration,
    shepherd: &ShepherdCommand,
) -> Result<Vec<Aborted>, HealError> {
    let runs: Vec<Run> = ids.iter().map(|id| store.find_run(id)).collect::<Result<_, _>>()?;
    // The queued first: a running run's shepherd hands its slot on as soon
    // as it stops, and a queued run already aborted is never started.
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by_key(|&i| runs[i].status != crate::run::RunStatus::Queued);
    let mut requests: Vec<Option<AbortRequest>> = runs.iter().map(|_| None).collect();
    for i in order {
        requests[i] = Some(request(store, &runs[i].id)?);
    }
    let ids: Vec<String> = runs.into_iter().map(|run| run.id).collect();
    let requests: Vec<AbortRequest> = requests.into_iter().flatten().collect();
    let before_start: Vec<&str> = requests
        .iter()
        .filter_map(|r| match r {
            AbortRequest::AbortedBeforeStart(run) => Some(run.id.as_str()),
            _ => None,
        })
        .collect();
    if !before_start.is_empty() {
        // No shepherd of theirs hands on what waited behind them.
        crate::upkeep::queue::fire_queued_behind(store, &before_start, shepherd)?;
    }
    let deadline = Instant::now() + patience;
    let mut watcher = Watcher::new(store)?;
    let mut aborted = Vec::with_capacity(ids.len());
    for (id, request) in ids.iter().zip(requests) {
        aborted.push(match request {
            AbortRequest::AlreadyOver(run) => Aborted::AlreadyOver(run),
            AbortRequest::AbortedBeforeStart(run) => Aborted::Stopped(run),
            AbortRequest::Requested(_) => until_stopped(store, &mut watcher, id, deadline, shepherd)?,
        });
    }
    Ok(aborted)
}

/// Waits until run `id`, whose abort is recorded, has ended, or `deadline`.
fn until_stopped(
    store: &mut Store,
    watcher: &mut Watcher,
    id: &str,
    deadline: Instant,
    shepherd: &ShepherdCommand,
) -> Result<Aborted, HealError> {
    loop {
        // Healed at once, then when a followed process exits (and as a
        // safety net), not at every commit while the run winds down.
        let changed = watcher.heal_if_due(store, shepherd)?;
        let run = store.run(id)?;
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
