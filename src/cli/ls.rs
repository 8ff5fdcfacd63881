//! `corral ls`: runs, newest first, as a table that fits the terminal, or
//! JSON; the latest 20 unless told otherwise, filtered by status, preset,
//! folder and age.

use std::io::Write;

use super::table::{cell, Table};
use corral::store::RunFilter;
use std::collections::{HashMap, HashSet};

use corral::{time, Run, Store};

/// Runs listed without `-n` or `--all`.
pub const DEFAULT_COUNT: usize = 20;
/// The task column is never narrower than this.
const MIN_TASK: usize = 20;

pub fn run(store: &Store, filter: &RunFilter, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    let runs = store.runs(filter)?;
    if json {
        super::print_json(out, &runs)?;
        return Ok(0);
    }
    if runs.is_empty() {
        let filtered = !filter.statuses.is_empty()
            || filter.preset.is_some()
            || filter.folder.is_some()
            || filter.created_since.is_some();
        if filtered {
            writeln!(out, "no runs match")?;
        } else {
            writeln!(out, "no runs yet: start one with 'corral launch PRESET TASK' (see 'corral presets')")?;
        }
        return Ok(0);
    }
    let now = time::now();
    let mut rows = Vec::new();
    for (depth, run) in as_tree(&runs) {
        let id = match depth {
            0 => run.id.clone(),
            d => format!("{}└─ {}", "   ".repeat(d - 1), run.id),
        };
        let age = time::parse(&run.created_at).map_or_else(String::new, |at| time::ago(at, now));
        let duration = run.duration(now).map_or_else(|| "-".to_string(), time::human_duration);
        let tokens = match run.usage.total() {
            0 => "-".to_string(),
            n => n.to_string(),
        };
        let status = match &run.retrying {
            Some(retry) => format!("{} (retrying: {})", run.status, cell(retry, 40)),
            None => run.status.to_string(),
        };
        let folder = run.launch_folder();
        let folder = folder.file_name().map_or_else(|| "/".to_string(), |n| n.to_string_lossy().into_owned());
        rows.push(vec![id, status, run.preset.clone(), cell(&folder, 20), age, duration, tokens, run.task.clone()]);
    }
    // The task takes what the terminal has left (everything, into a pipe).
    let fixed: usize = (0..7).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0) + 2).sum();
    let task_width = super::terminal_width().map_or(usize::MAX, |w| w.saturating_sub(fixed + 10).max(MIN_TASK));
    let mut table = Table::new(&["ID", "STATUS", "PRESET", "FOLDER", "AGE", "DURATION", "TOKENS", "TASK"]);
    if super::colour::wanted() {
        let statuses: Vec<corral::RunStatus> = as_tree(&runs).iter().map(|(_, r)| r.status).collect();
        table.paint(move |row, column, text| match column {
            1 => super::colour::status(text, statuses[row]),
            _ => text.to_string(),
        });
    }
    for mut row in rows {
        row[7] = cell(&row[7], task_width.min(200));
        table.row(row);
    }
    table.write(out)?;
    if filter.limit.is_some_and(|n| runs.len() >= n) {
        writeln!(out, "(the latest {}: -n N or --all for more)", runs.len())?;
    }
    Ok(0)
}

/// The runs in tree order: each run followed by its children (oldest first),
/// with their depth. Runs whose parent is not listed are roots.
fn as_tree(runs: &[Run]) -> Vec<(usize, &Run)> {
    let listed: HashSet<&str> = runs.iter().map(|r| r.id.as_str()).collect();
    let by_id: HashMap<&str, &Run> = runs.iter().map(|r| (r.id.as_str(), r)).collect();
    let mut out = Vec::with_capacity(runs.len());
    let mut stack: Vec<(usize, &Run)> = runs
        .iter()
        .filter(|r| r.parent_id.as_deref().is_none_or(|p| !listed.contains(p)))
        .rev()
        .map(|r| (0, r))
        .collect();
    while let Some((depth, run)) = stack.pop() {
        out.push((depth, run));
        for child in run.children.iter().rev().filter_map(|id| by_id.get(id.as_str())) {
            stack.push((depth + 1, child));
        }
    }
    out
}
