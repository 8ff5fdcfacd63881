//! `corral diff RUN...`: everything a run with a worktree changed against
//! its base commit — its commits, its uncommitted and untracked files
//! alike. Several runs are shown together: grouped by file, each file's
//! diff marked with its run, the files more than one run changed first.

use std::io::Write;

use corral::verbs::review::worktree_of;
use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run ids (or unique prefixes).
    #[arg(required = true)]
    pub runs: Vec<String>,
    /// Files with added and removed line counts only.
    #[arg(long)]
    pub stat: bool,
    /// Print JSON: files with counts (and the diff, without --stat).
    #[arg(long)]
    pub json: bool,
}

pub fn run(store: &mut Store, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    let Args { runs, stat, json } = args;
    if runs.len() > 1 {
        return together(store, &runs, stat, json, out);
    }
    let id = runs[0].as_str();
    let run = store.find_run(id)?;
    // A run without a worktree says so before anything is read.
    worktree_of(&run)?;
    if json {
        let (_, changes) = corral::verbs::review::changes(store, id)?;
        let mut value = serde_json::to_value(&changes)?;
        if !stat {
            value["diff"] = corral::verbs::review::patch(store, &run)?.into();
        }
        super::print_json(out, &value)?;
    } else if stat {
        let (_, changes) = corral::verbs::review::changes(store, id)?;
        let width = changes.files.iter().map(|f| f.path.chars().count()).max().unwrap_or(0);
        for file in &changes.files {
            let counts = if file.binary { "binary".to_string() } else { format!("+{} -{}", file.added, file.removed) };
            writeln!(out, " {:<width$} | {counts}", super::table::name(&file.path))?;
        }
        writeln!(out, " {} files changed, +{} -{}", changes.files.len(), changes.added, changes.removed)?;
    } else {
        let patch = corral::verbs::review::patch(store, &run)?;
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

/// Several runs' changes, grouped by file: the files more than one run
/// changed first, each file's diff under the run that made it.
fn together(store: &mut Store, ids: &[String], stat: bool, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    let files = corral::verbs::review::diff_together(store, ids)?;
    if json {
        let value: Vec<serde_json::Value> = files
            .iter()
            .map(|f| {
                let runs: Vec<_> = f
                    .runs
                    .iter()
                    .map(|r| serde_json::json!({ "run": r.run, "preset": r.preset, "diff": if stat { None } else { Some(&r.diff) } }))
                    .collect();
                serde_json::json!({ "path": f.path, "runs": runs })
            })
            .collect();
        super::print_json(out, &value)?;
        return Ok(0);
    }
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    for file in &files {
        let who: Vec<&str> = file.runs.iter().map(|r| r.run.as_str()).collect();
        writeln!(out, "=== {}  ({})", super::table::name(&file.path), who.join(", "))?;
        if stat {
            continue;
        }
        for r in &file.runs {
            writeln!(out, "--- run {} ({})", r.run, r.preset)?;
            let diff = if terminal { super::table::printable(&r.diff).into_owned() } else { r.diff.clone() };
            let diff = if super::colour::wanted() { super::colour::diff(&diff) } else { diff };
            out.write_all(diff.as_bytes())?;
        }
    }
    Ok(0)
}
