//! `corral about [--json]`: this machine as Corral sees it (version, OS,
//! architecture, runs, the store's latest change). What a desktop asks a
//! host before following it.

use std::io::Write;

use corral::remote::About;
use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(store: &Store, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    let about = About::here(store)?;
    if args.json {
        super::print_json(out, &about)?;
    } else {
        writeln!(
            out,
            "corral {} on {} {}: {} running, {} runs, change {}",
            about.version, about.os, about.arch, about.running, about.total, about.seq
        )?;
    }
    Ok(0)
}
