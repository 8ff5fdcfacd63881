//! `corral discard RUN`: removes a run's worktree and its branch. Refused
//! while the run is active.

use std::io::Write;

use corral::Store;

pub fn run(store: &mut Store, id: &str, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    let branch = corral::review::worktree_of(&store.find_run(id)?)?.branch.clone();
    let run = corral::review::discard(store, id)?;
    if json {
        super::print_json(out, &run)?;
    } else {
        writeln!(out, "{}  worktree and branch {branch} removed", run.id)?;
    }
    Ok(0)
}
