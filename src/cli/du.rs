//! `corral du`: where Corral's disk space goes: the database, the runs'
//! folders, the worktrees, and the runs that take the most.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use corral::resources::human_bytes;
use corral::Store;

/// Runs listed as the largest.
const LARGEST: usize = 10;

pub fn run(store: &Store, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    let home = store.home();
    let db = home.database();
    let database: u64 = ["", "-wal", "-shm"]
        .iter()
        .map(|suffix| std::fs::metadata(format!("{}{suffix}", db.display())).map_or(0, |m| m.blocks() * 512))
        .sum();
    let runs = tree_bytes(&home.runs_dir());
    let worktrees = corral::worktree::disk_usage(&home.worktrees_dir());
    let largest: Vec<serde_json::Value> = store
        .largest_transcripts(LARGEST)?
        .into_iter()
        .map(|(id, transcript)| {
            let folder = tree_bytes(&home.run_dir(&id));
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

/// Bytes allocated under `dir` (links not followed; gone files skipped).
fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        for entry in entries.flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else { continue };
            total += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}
