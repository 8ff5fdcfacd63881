//! `corral conflicts [RUN...]`: which runs' unmerged work changes the same
//! lines, pair by pair, by git's own `merge-tree`, before anything is
//! merged. Without runs: every run with a worktree of the repository here.
//! Exit 1 if two runs conflict.

use std::io::Write;

use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run ids (or unique prefixes); default: every run with a worktree of
    /// this folder's repository.
    pub runs: Vec<String>,
    /// Print JSON: the runs looked at, and the conflicting pairs.
    #[arg(long)]
    pub json: bool,
}

pub fn run(store: &mut Store, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    let cwd = std::env::current_dir()?;
    let (runs, found) = corral::verbs::review::conflicts(store, &args.runs, &cwd)?;
    if args.json {
        let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
        super::print_json(out, &serde_json::json!({ "runs": ids, "conflicts": found }))?;
    } else if found.is_empty() {
        writeln!(out, "no conflicts among {} runs", runs.len())?;
    } else {
        for pair in &found {
            // The files are named as the agents named them.
            let files: Vec<String> = pair.files.iter().map(|f| super::table::name(f)).collect();
            match pair.same {
                true => writeln!(out, "{} × {}: the same change ({})", pair.first, pair.second, files.join(", "))?,
                false => writeln!(out, "{} × {}: {}", pair.first, pair.second, files.join(", "))?,
            }
        }
        writeln!(
            out,
            "{} conflicting pairs among {} runs: merge one of each, then reply to the other to redo its change on top \
             (or discard it, where it is the same change)",
            found.len(),
            runs.len()
        )?;
    }
    Ok(if found.is_empty() { 0 } else { 1 })
}
