//! Pausing and resuming a run: the request is recorded in the store, the
//! run's shepherd is nudged (SIGUSR1, after checking it is still that very
//! process) and freezes or thaws every process of the run: its cgroup
//! (`cgroup.freeze`), or SIGSTOP and SIGCONT to each process without one.
//! A paused run holds no slot and its clocks stop; resuming takes a slot
//! back ahead of the queue.

use std::time::{Duration, Instant};

use crate::cost::budget::{BudgetChange, Crossing};
use crate::process::{ProcessId, Sig};
use crate::run::{PauseReason, Run, RunStatus};
use crate::store::{Store, StoreError};
use crate::upkeep::heal::HealError;
use crate::upkeep::queue::ShepherdCommand;
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
    /// A run paused for its budget is resumed only with more allowed.
    #[error("run {id} is paused: {words}. Allow more with `corral resume {id} --budget +N` (N more dollars), or stop it with `corral abort {id}`")]
    BudgetSpent {
        /// The run.
        id: String,
        /// The budget and what was spent, in words.
        words: String,
    },
    /// Someone changed the budget while this change was being made (two
    /// answers to one ask): it is changed once.
    #[error("run {id}'s budget was changed meanwhile (answered elsewhere?): see `corral show {id}` and try again if more is still needed")]
    BudgetChanged {
        /// The budget's run.
        id: String,
    },
    /// Asked from inside a run, of a budget over that run (its own, or one
    /// of a run that launched it): only a run's launcher or its user
    /// allows it more.
    #[error(
        "run {caller} cannot raise the budget of run {owner}, which is over it: its launcher or you allow more \
         (`corral resume {owner} --budget +N` in your own terminal)"
    )]
    OwnBudget {
        /// The calling run.
        caller: String,
        /// The budget's run.
        owner: String,
    },
    /// The budget allowed is still spent.
    #[error("run {id} stays paused: {words}, and the budget allowed ({allowed}) is spent too; allow more than that")]
    StillOver {
        /// The run.
        id: String,
        /// The budget and what was spent, in words.
        words: String,
        /// The budget that was asked for.
        allowed: String,
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
    // Paused at its usage limit, it would go on by itself at the reset:
    // paused by the user, it waits for `corral resume`.
    if pause && run.pause_reason == Some(crate::run::PauseReason::UsageLimit) && store.hold_limit_pause(&run.id)? {
        return Ok(store.run(&run.id)?);
    }
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

/// Resumes run `id` (as [`pause`] with `pause = false`), first changing
/// the budget it crossed by `change` when one is given. A run paused for a
/// budget is resumed only once its budget allows more; every run of the
/// same budget's tree paused for it goes on with it.
pub fn resume(
    store: &mut Store,
    id: &str,
    change: Option<BudgetChange>,
    patience: Duration,
    shepherd: &ShepherdCommand,
) -> Result<Run, PauseError> {
    let run = store.find_run(id)?;
    let crossing = store.budget_crossed(&run.id)?;
    let Some(change) = change else {
        if let Some(crossing) = crossing.filter(|_| run.pause_reason == Some(PauseReason::Budget)) {
            return Err(PauseError::BudgetSpent { words: crossing.words(&run.id), id: run.id });
        }
        return pause(store, &run.id, false, patience, shepherd);
    };
    // From inside a run, only a budget strictly below it: an agent raising
    // its own (or its launcher's) budget would make the budget nothing.
    if let Some(caller) = crate::run::caller::caller_run(store)? {
        let owner = crossing.as_ref().map_or(run.id.as_str(), |c| c.owner.as_str());
        if store.is_within(&caller, owner)? {
            return Err(PauseError::OwnBudget { caller, owner: owner.to_string() });
        }
    }
    let owner = match &crossing {
        Some(crossing) => raise(store, &run.id, crossing, &change)?,
        None => {
            // Nothing crossed yet: the change is to the run's own budget.
            let now = store.budget_of(&run.id)?.unwrap_or_default();
            if !store.change_budget(&run.id, &now, &change.applied_to(&now))? {
                return Err(PauseError::BudgetChanged { id: run.id });
            }
            run.id.clone()
        }
    };
    for other in store.paused_for_budget(&owner)? {
        if other != run.id {
            // Each goes on when its shepherd takes a slot; none is waited for.
            if let Err(e) = pause(store, &other, false, Duration::ZERO, shepherd) {
                tracing::warn!(run = %other, "cannot resume a run paused for the same budget: {e}");
            }
        }
    }
    if store.run(&run.id)?.status == RunStatus::Paused {
        pause(store, &run.id, false, patience, shepherd)
    } else {
        Ok(store.run(&run.id)?)
    }
}

/// Changes the budget `crossing` names, unless the new one is spent too;
/// returns its owner.
fn raise(store: &mut Store, id: &str, crossing: &Crossing, change: &BudgetChange) -> Result<String, PauseError> {
    let budget = change.applied_to(&crossing.budget);
    if Crossing::is_crossed(&budget, &crossing.spent) {
        return Err(PauseError::StillOver { id: id.to_string(), words: crossing.words(id), allowed: budget.words() });
    }
    if !store.change_budget(&crossing.owner, &crossing.budget, &budget)? {
        return Err(PauseError::BudgetChanged { id: crossing.owner.clone() });
    }
    Ok(crossing.owner.clone())
}

/// Tells run's shepherd to look at the store again (its pause request, its
/// sandbox's allowances).
pub fn nudge(run: &Run) {
    if let (Some(pid), Some(start)) = (run.shepherd_pid, run.shepherd_start) {
        // By identity; an error means the shepherd just exited: healing
        // finds out.
        let _ = (ProcessId { pid, start }).signal(Sig::Usr1);
    }
}
