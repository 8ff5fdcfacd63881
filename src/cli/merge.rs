//! `corral merge RUN...`: brings runs' changes into the branch they started
//! from, as one commit each (or, with `--no-squash`, a merge of their
//! commits), in the order given. It never loses the user's work: with a
//! conflict, or uncommitted changes in the files it would touch, it changes
//! nothing and says why; several runs are tried together first, and two
//! that change the same lines are named before any is merged.

use std::io::Write;

use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run ids (or unique prefixes), merged in this order.
    #[arg(required = true)]
    pub runs: Vec<String>,
    /// Keep the agent's commits (a merge commit) instead of one commit.
    #[arg(long)]
    pub no_squash: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(store: &mut Store, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    if let [run] = args.runs.as_slice() {
        let merged = corral::verbs::review::merge(store, run, args.no_squash)?;
        if args.json {
            super::print_json(out, &merged)?;
        } else {
            say(out, &merged)?;
        }
        return Ok(0);
    }
    let merged = corral::verbs::review::merge_together(store, &args.runs, args.no_squash)?;
    if args.json {
        super::print_json(out, &merged)?;
    } else {
        for one in &merged {
            say(out, one)?;
        }
    }
    Ok(0)
}

fn say(out: &mut impl Write, merged: &corral::verbs::review::Merged) -> anyhow::Result<()> {
    let short = &merged.commit[..merged.commit.len().min(12)];
    writeln!(out, "{}  merged into {} as {short}", merged.id, merged.branch)?;
    Ok(())
}
