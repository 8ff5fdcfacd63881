//! `corral abort RUN...`: stop runs and every process they started.

use std::io::Write;
use std::time::Duration;

use corral::home::config::Config;
use corral::upkeep::queue::ShepherdCommand;
use corral::verbs::abort::{abort_all, Aborted};
use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run ids (or unique prefixes).
    #[arg(required = true)]
    pub runs: Vec<String>,
    /// Print JSON (an array of run objects).
    #[arg(long)]
    pub json: bool,
}

pub fn run(
    store: &mut Store,
    ids: &[String],
    json: bool,
    shepherd: &ShepherdCommand,
    out: &mut impl Write,
) -> anyhow::Result<i32> {
    let config = Config::load(store.home())?;
    // Enough for the shepherd to commit and run its whole stop sequence.
    let patience = config.stop_grace + Duration::from_secs(2);
    let mut runs = Vec::new();
    let mut code = 0;
    for result in abort_all(store, ids, patience, shepherd)? {
        if !json {
            let run = result.run();
            match &result {
                Aborted::Stopped(_) => writeln!(out, "{}  {}", run.id, run.status)?,
                Aborted::AlreadyOver(_) => writeln!(out, "{}  already ended: {}", run.id, run.status)?,
                Aborted::Pending(_) => {
                    code = 1;
                    writeln!(out, "{}  abort requested; still {} — see 'corral show {}'", run.id, run.status, run.id)?
                }
            }
        }
        runs.push(result.run().clone());
    }
    if json {
        super::print_json(out, &runs)?;
    }
    Ok(code)
}
