//! `corral discard RUN`: removes a run's worktree and its branch. Refused
//! while the run is active.

use std::io::Write;

use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run id (or a unique prefix).
    pub run: String,
    /// Print the run as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(store: &mut Store, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    let branch = corral::verbs::review::recorded_worktree_of(&store.find_run(&args.run)?)?.branch.clone();
    let run = corral::verbs::review::discard(store, &args.run)?;
    if args.json {
        super::print_json(out, &run)?;
    } else {
        writeln!(out, "{}  worktree and branch {branch} removed", run.id)?;
    }
    Ok(0)
}
