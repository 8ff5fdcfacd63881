//! `corral diff RUN`: everything a run with a worktree changed against its
//! base commit — its commits, its uncommitted and untracked files alike.

use std::io::Write;

use corral::review::worktree_of;
use corral::worktree;
use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run id (or a unique prefix).
    pub run: String,
    /// Files with added and removed line counts only.
    #[arg(long)]
    pub stat: bool,
    /// Print JSON: files with counts (and the diff, without --stat).
    #[arg(long)]
    pub json: bool,
}

pub fn run(store: &mut Store, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    let Args { run: id, stat, json } = args;
    let id = id.as_str();
    let run = store.find_run(id)?;
    let worktree = worktree_of(&run)?;
    if json {
        let (_, changes) = corral::review::changes(store, id)?;
        let mut value = serde_json::to_value(&changes)?;
        if !stat {
            value["diff"] = worktree::patch(worktree)?.into();
        }
        super::print_json(out, &value)?;
    } else if stat {
        let (_, changes) = corral::review::changes(store, id)?;
        let width = changes.files.iter().map(|f| f.path.chars().count()).max().unwrap_or(0);
        for file in &changes.files {
            let counts = if file.binary { "binary".to_string() } else { format!("+{} -{}", file.added, file.removed) };
            writeln!(out, " {:<width$} | {counts}", file.path)?;
        }
        writeln!(out, " {} files changed, +{} -{}", changes.files.len(), changes.added, changes.removed)?;
    } else {
        let patch = worktree::patch(worktree)?;
        // At a terminal, what the agent wrote cannot rewrite the screen or
        // the clipboard (OSC 52); piped, the patch stays one `git apply` takes.
        let patch = match std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            true => super::table::printable(&patch).into_owned(),
            false => patch,
        };
        let patch = if super::colour::wanted() { super::colour::diff(&patch) } else { patch };
        out.write_all(patch.as_bytes())?;
    }
    Ok(0)
}
