//! `corral wait RUN...`: block until runs end. Exit 0 if all completed, 1 if
//! any ended otherwise, 124 if the timeout passed first.

use corral::run::blocking::Waiter;
use std::io::Write;
use std::time::{Duration, Instant};

use corral::upkeep::queue::ShepherdCommand;
use corral::verbs::wait::wait_for;
use corral::watch::asleep::HandOver;
use corral::{Run, Store};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run ids (or unique prefixes).
    #[arg(required = true)]
    pub runs: Vec<String>,
    /// Give up after this many seconds.
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Print JSON (an array of run objects).
    #[arg(long)]
    pub json: bool,
}

pub fn run(
    store: &mut Store,
    ids: &[String],
    timeout: Option<f64>,
    json: bool,
    shepherd: &ShepherdCommand,
    out: &mut impl Write,
) -> anyhow::Result<i32> {
    let deadline = match timeout {
        Some(secs) if !(secs.is_finite() && secs >= 0.0) => {
            anyhow::bail!("--timeout {secs} is not a number of seconds ≥ 0")
        }
        Some(secs) if secs > corral::text::time::LONGEST.as_secs_f64() => {
            let asked = Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX);
            let why = corral::text::time::too_long(asked).unwrap_or_default();
            anyhow::bail!("--timeout {secs}: {why}; leave --timeout out to wait as long as it takes")
        }
        Some(secs) => Instant::now().checked_add(Duration::from_secs_f64(secs)),
        None => None,
    };
    let caller = corral::run::caller::caller_run(store)?;
    // A person's wait, once only its runs' ends are left to be told of,
    // sleeps in the small `corral-wake` (which prints them as below).
    let hand_over = caller.is_none().then(|| HandOver::beside_this_program(json)).flatten();
    let result =
        wait_for(store, ids, deadline, caller.as_deref(), shepherd, None, Waiter::Command, hand_over.as_ref())?;
    corral::verbs::wait::collected_by(store, caller.as_deref(), &result.runs)?;
    if json {
        super::print_json(out, &result.runs)?;
    } else {
        for run in &result.runs {
            print_ended(run, out)?;
        }
        if result.timed_out {
            writeln!(out, "timed out with {} run(s) still active", result.still.len())?;
        }
    }
    Ok(result.exit_code())
}

/// One line per run: id, status, reason, and the first line of its result.
pub fn print_ended(run: &Run, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "{}", run.ended_line())
}
