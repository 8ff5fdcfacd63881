//! `corral du`: where Corral's disk space goes: the database, the runs'
//! folders, the worktrees, and the runs that take the most.

use std::io::Write;
use std::os::unix::fs::MetadataExt;

use corral::cost::resources::human_bytes;
use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs listed as the largest.
const LARGEST: usize = 10;

pub fn run(store: &Store, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    let json = args.json;
    let home = store.home();
    let db = home.database();
    let database: u64 = ["", "-wal", "-shm"]
        .iter()
        .map(|suffix| std::fs::metadata(format!("{}{suffix}", db.display())).map_or(0, |m| m.blocks() * 512))
        .sum();
    let runs = corral::worktree::bytes_under(&home.runs_dir());
    let worktrees = corral::worktree::disk_usage(&home.worktrees_dir());
    let largest: Vec<serde_json::Value> = store
        .largest_transcripts(LARGEST)?
        .into_iter()
        .map(|(id, transcript)| {
            let folder = corral::worktree::bytes_under(&home.run_dir(&id));
            serde_json::json!({ "id": id, "transcript_bytes": transcript, "folder_bytes": folder })
        })
        .collect();
    if json {
        super::print_json(
            out,
            &serde_json::json!({
                "database_bytes": database,
                "run_folders_bytes": runs,
                "worktrees": worktrees.worktrees,
                "worktrees_bytes": worktrees.bytes,
                "largest_runs": largest,
            }),
        )?;
        return Ok(0);
    }
    writeln!(out, "database     {:>10}  {}", human_bytes(database), db.display())?;
    writeln!(out, "run folders  {:>10}  {}", human_bytes(runs), home.runs_dir().display())?;
    writeln!(out, "worktrees    {:>10}  {} worktree(s)", human_bytes(worktrees.bytes), worktrees.worktrees)?;
    if !largest.is_empty() {
        writeln!(out, "\nlargest runs (transcript in the database + folder):")?;
        for run in &largest {
            let (t, f) = (run["transcript_bytes"].as_u64().unwrap_or(0), run["folder_bytes"].as_u64().unwrap_or(0));
            writeln!(out, "  {}  {:>10} + {:>10}", run["id"].as_str().unwrap_or("?"), human_bytes(t), human_bytes(f))?;
        }
        writeln!(out, "\n(corral rm RUN or corral prune --older-than 30d frees them)")?;
    }
    Ok(0)
}
