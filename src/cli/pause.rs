//! `corral pause RUN...` and `corral resume RUN...`: freeze a run's every
//! process (holding no slot, its clocks stopped) and thaw it again.

use std::io::Write;

use corral::pause::{pause, PATIENCE};
use corral::queue::ShepherdCommand;
use corral::{RunStatus, Store};

pub fn run(
    store: &mut Store,
    ids: &[String],
    paused: bool,
    json: bool,
    shepherd: &ShepherdCommand,
    out: &mut impl Write,
) -> anyhow::Result<i32> {
    let mut runs = Vec::new();
    let mut code = 0;
    let want = if paused { RunStatus::Paused } else { RunStatus::Running };
    for id in ids {
        let run = pause(store, id, paused, PATIENCE, shepherd)?;
        if !json {
            if run.status == want {
                writeln!(out, "{}  {}", run.id, run.status)?;
            } else if !paused && run.status == RunStatus::Paused {
                writeln!(out, "{}  resume requested; it goes on as soon as a slot is free (max_parallel)", run.id)?;
            } else {
                code = 1;
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
