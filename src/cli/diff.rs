//! `corral diff RUN...`: everything a run with a worktree changed against
//! its base commit — its commits, its uncommitted and untracked files
//! alike. Several runs are shown together: grouped by file, each file's
//! diff marked with its run, the files more than one run changed first.

use std::io::Write;

use corral::review::worktree_of;
use corral::worktree;
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

/// One run's diff of one file: the run, its preset, the diff.
type RunDiff = (String, String, String);

/// Several runs' changes, grouped by file: the files more than one run
/// changed first, each file's diff under the run that made it.
fn together(store: &mut Store, ids: &[String], stat: bool, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    // path -> [(run, preset, that file's diff)]
    let mut files: std::collections::BTreeMap<String, Vec<RunDiff>> = Default::default();
    for id in ids {
        let run = store.find_run(id)?;
        let patch = worktree::patch(worktree_of(&run)?)?;
        for part in patch.split_inclusive('\n').fold(Vec::<String>::new(), |mut parts, line| {
            if line.starts_with("diff --git ") || parts.is_empty() {
                parts.push(String::new());
            }
            parts.last_mut().expect("one part at least").push_str(line);
            parts
        }) {
            let Some(path) = part.lines().next().and_then(|l| l.rsplit_once(" b/")).map(|(_, p)| p.to_string()) else {
                continue;
            };
            files.entry(path).or_default().push((run.id.clone(), run.preset.clone(), part));
        }
    }
    let mut order: Vec<(&String, &Vec<RunDiff>)> = files.iter().collect();
    order.sort_by_key(|(path, runs)| (std::cmp::Reverse(runs.len()), (*path).clone()));
    if json {
        let value: Vec<serde_json::Value> = order
            .iter()
            .map(|(path, runs)| {
                let runs: Vec<_> = runs
                    .iter()
                    .map(|(id, preset, diff)| serde_json::json!({ "run": id, "preset": preset, "diff": if stat { None } else { Some(diff) } }))
                    .collect();
                serde_json::json!({ "path": path, "runs": runs })
            })
            .collect();
        super::print_json(out, &value)?;
        return Ok(0);
    }
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    for (path, runs) in order {
        let who: Vec<&str> = runs.iter().map(|(id, _, _)| id.as_str()).collect();
        writeln!(out, "=== {path}  ({})", who.join(", "))?;
        if stat {
            continue;
        }
        for (id, preset, diff) in runs {
            writeln!(out, "--- run {id} ({preset})")?;
            let diff = if terminal { super::table::printable(diff).into_owned() } else { diff.clone() };
            let diff = if super::colour::wanted() { super::colour::diff(&diff) } else { diff };
            out.write_all(diff.as_bytes())?;
        }
    }
    Ok(0)
}
