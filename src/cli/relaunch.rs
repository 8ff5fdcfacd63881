//! `corral relaunch RUN`: the same preset, task, folder, model, worktree
//! choice and environment, as a new run.

use std::io::Write;

use corral::queue::ShepherdCommand;
use corral::Store;

pub fn run(
    store: &mut Store,
    id: &str,
    json: bool,
    shepherd: &ShepherdCommand,
    out: &mut impl Write,
) -> anyhow::Result<i32> {
    let run = corral::launch::relaunch(store, id, shepherd)?;
    if json {
        super::print_json(out, &run)?;
    } else {
        writeln!(out, "{}", run.id)?;
    }
    Ok(0)
}
