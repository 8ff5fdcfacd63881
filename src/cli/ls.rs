//! `corral ls`: runs, newest first, as a table or JSON.

use std::io::Write;

use super::table::{cell, Table};
use corral::store::RunFilter;
use std::collections::{HashMap, HashSet};

use corral::{time, Run, RunStatus, Store};

pub fn run(
    store: &Store,
    all: bool,
    status: Option<RunStatus>,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<i32> {
    let runs = store.runs(&RunFilter { include_dismissed: all, status, ..RunFilter::default() })?;
    if json {
        super::print_json(out, &runs)?;
        return Ok(0);
    }
    if runs.is_empty() {
        writeln!(out, "no runs yet: start one with 'corral launch PRESET TASK' (see 'corral presets')")?;
        return Ok(0);
    }
    let now = time::now();
    let mut table = Table::new(&["ID", "STATUS", "PRESET", "AGE", "DURATION", "TOKENS", "TASK"]);
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
            Some(retry) => format!("{} (retrying: {})", run.status, retry),
            None => run.status.to_string(),
        };
        table.row(vec![id, status, run.preset.clone(), age, duration, tokens, cell(&run.task, 60)]);
    }
    table.write(out)?;
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
