//! `corral pause RUN...` and `corral resume RUN...`: freeze a run's every
//! process (holding no slot, its clocks stopped) and thaw it again.

use std::io::Write;

use corral::cost::budget::BudgetChange;
use corral::store::StoreError;
use corral::upkeep::heal::HealError;
use corral::upkeep::queue::ShepherdCommand;
use corral::verbs::pause::{pause, resume, PauseError, PATIENCE};
use corral::{RunStatus, Store};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run ids (or unique prefixes).
    #[arg(required = true)]
    pub runs: Vec<String>,
    /// Print JSON (an array of run objects).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// Run ids (or unique prefixes).
    #[arg(required = true)]
    pub runs: Vec<String>,
    /// Print JSON (an array of run objects).
    #[arg(long)]
    pub json: bool,
    /// Allow more for a run paused at its budget: `+2` (two dollars
    /// more), `+500k tokens`, or a whole new budget (`usd=5,tokens=3M`).
    /// Every run paused for that budget goes on.
    #[arg(long, value_name = "BUDGET", value_parser = BudgetChange::parse)]
    pub budget: Option<BudgetChange>,
}

pub fn run(
    store: &mut Store,
    ids: &[String],
    paused: bool,
    json: bool,
    budget: Option<BudgetChange>,
    shepherd: &ShepherdCommand,
    out: &mut impl Write,
) -> anyhow::Result<i32> {
    let mut runs = Vec::new();
    let mut code = 0;
    let want = if paused { RunStatus::Paused } else { RunStatus::Running };
    for id in ids {
        // Each run is done or refused on its own: one that ended does not
        // leave the next one running.
        let done = if paused {
            pause(store, id, true, PATIENCE, shepherd)
        } else {
            resume(store, id, budget, PATIENCE, shepherd)
        };
        let run = match done {
            Ok(run) => run,
            Err(
                e @ (PauseError::NotApplicable { .. }
                | PauseError::BudgetSpent { .. }
                | PauseError::OwnBudget { .. }
                | PauseError::StillOver { .. }
                | PauseError::Heal(HealError::Store(StoreError::UnknownRun(_) | StoreError::AmbiguousRun { .. }))),
            ) => {
                code = super::EXIT_ERROR;
                eprintln!("corral: {e}");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if !json {
            if run.status == want {
                writeln!(out, "{}  {}", run.id, run.status)?;
            } else if !paused && run.status == RunStatus::Paused {
                writeln!(out, "{}  resume requested; it goes on as soon as a slot is free (max_parallel)", run.id)?;
            } else {
                code = code.max(1);
                writeln!(out, "{}  requested; still {} — see 'corral show {}'", run.id, run.status, run.id)?;
            }
        }
        runs.push(run);
    }
    if json {
        super::print_json(out, &runs)?;
    }
    Ok(code)
}
