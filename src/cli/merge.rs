//! `corral merge RUN`: brings a run's changes into the branch it started
//! from, as one commit (or, with `--no-squash`, a merge of its commits). It
//! never loses the user's work: with a conflict, or uncommitted changes in
//! the files it would touch, it changes nothing and says why.

use std::io::Write;

use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run id (or a unique prefix).
    pub run: String,
    /// Keep the agent's commits (a merge commit) instead of one commit.
    #[arg(long)]
    pub no_squash: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(store: &mut Store, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    let merged = corral::review::merge(store, &args.run, args.no_squash)?;
    if args.json {
        super::print_json(out, &merged)?;
    } else {
        let short = &merged.commit[..merged.commit.len().min(12)];
        writeln!(out, "{}  merged into {} as {short}", merged.id, merged.branch)?;
    }
    Ok(0)
}
