//! `corral discard RUN…`: removes a run's worktree and its branch (each
//! run's, in order: the runs of a pull request of several merged on the
//! forge). Refused while the run is active.

use std::io::Write;

use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run id (or a unique prefix); several are discarded in order.
    #[arg(required = true, num_args = 1.., value_name = "RUN")]
    pub runs: Vec<String>,
    /// Print the run as JSON (several: a list).
    #[arg(long)]
    pub json: bool,
}

pub fn run(store: &mut Store, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    // Every run found, each with a worktree, before any is discarded.
    let mut branches = Vec::new();
    for id in &args.runs {
        let run = store.find_run(id)?;
        let branch = corral::verbs::review::recorded_worktree_of(&run)?.branch.clone();
        // A branch deleted by hand is not said to be removed now.
        let repo = std::path::PathBuf::from(run.worktree_repo.clone().unwrap_or_default());
        let there = corral::worktree::branch_tip(&repo, &branch).is_ok();
        branches.push((run.id, branch, there));
    }
    let mut discarded = Vec::new();
    for (id, branch, there) in branches {
        let run = corral::verbs::review::discard(store, &id)?;
        if !args.json && there {
            writeln!(out, "{}  worktree and branch {branch} removed", run.id)?;
        } else if !args.json {
            writeln!(out, "{}  worktree removed (its branch {branch} was gone already)", run.id)?;
        }
        discarded.push(run);
    }
    if args.json {
        match discarded.as_slice() {
            [one] => super::print_json(out, one)?,
            all => super::print_json(out, &all)?,
        }
    }
    Ok(0)
}
