//! `corral watch [--json] [--since SEQ]`: every change to a run, as it
//! happens, each with the store's change number; never one missed. What a
//! desktop follows a remote host with, and a live log locally.

use std::io::Write;
use std::os::fd::AsFd;

use corral::store::Change;
use corral::upkeep::queue::ShepherdCommand;
use corral::watch::{Wake, Watcher};
use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// One JSON object per line: {"seq", "run"}, {"seq", "removed"},
    /// and {"caught_up": N} once the changes before now are sent.
    #[arg(long)]
    pub json: bool,
    /// Start after this change number.
    #[arg(long, value_name = "SEQ")]
    pub since: Option<i64>,
    /// Stop once caught up (what a one-off catch-up reads).
    #[arg(long, hide = true)]
    pub until_caught_up: bool,
}

/// Changes read per look.
const BATCH: usize = 500;

pub fn run(store: &mut Store, options: Args, shepherd: &ShepherdCommand, out: &mut impl Write) -> anyhow::Result<i32> {
    // Watching starts before the first read: a change in between is told.
    let mut watcher = Watcher::new(store)?;
    let mut position = match options.since {
        Some(seq) if seq < 0 => anyhow::bail!("--since {seq}: write a change number, 0 for every run"),
        Some(seq) => seq,
        None => store.change_seq()?,
    };
    // Whoever reads us may go away (a closed SSH connection): a pipe then
    // says so, and this ends instead of waiting on for no one.
    let stdout = std::io::stdout();
    let reader_gone = is_pipe(&stdout).then(|| stdout.as_fd());
    let mut caught_up = false;
    loop {
        let read = store.changes_since(position, BATCH)?;
        for change in &read.changes {
            print_change(out, change, options.json)?;
        }
        // Where the snapshot stood, not the store now: what committed while
        // these were written out comes next.
        position = read.upto;
        if read.more {
            continue;
        }
        if !caught_up {
            caught_up = true;
            if options.json {
                writeln!(out, "{}", serde_json::json!({ "caught_up": position }))?;
            }
            if options.until_caught_up {
                out.flush()?;
                return Ok(0);
            }
        }
        out.flush()?;
        watcher.heal_if_due(store, shepherd)?;
        let extra: Vec<_> = reader_gone.into_iter().collect();
        if let Wake::Extra(_) = watcher.wait(store, None, &extra)? {
            return Ok(0);
        }
    }
}

fn print_change(out: &mut impl Write, change: &Change, json: bool) -> anyhow::Result<()> {
    if json {
        serde_json::to_writer(&mut *out, change)?;
        writeln!(out)?;
        return Ok(());
    }
    match change {
        Change::Run { seq, run } => writeln!(
            out,
            "{seq:>6}  {}  {:<9}  {:<12}  {}",
            run.id,
            run.status.to_string(),
            super::table::cell(&run.preset, 12),
            super::table::cell(&run.task.replace('\n', " "), 60)
        )?,
        Change::Removed { seq, removed } => writeln!(out, "{seq:>6}  {removed}  removed")?,
    }
    Ok(())
}

/// True if `stdout` is a pipe or a socket (whose reader can go away).
fn is_pipe(stdout: &std::io::Stdout) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let Ok(file) = stdout.as_fd().try_clone_to_owned().map(std::fs::File::from) else { return false };
    file.metadata().is_ok_and(|m| m.file_type().is_fifo() || m.file_type().is_socket())
}
