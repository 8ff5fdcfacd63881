//! `corral ls`: runs, newest first, as a table or JSON.

use std::io::Write;

use super::table::{cell, Table};
use corral::store::RunFilter;
use corral::{time, RunStatus, Store};

pub fn run(store: &Store, all: bool, status: Option<RunStatus>, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
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
    for run in &runs {
        let age = time::parse(&run.created_at).map_or_else(String::new, |at| time::ago(at, now));
        let duration = run.duration(now).map_or_else(|| "-".to_string(), time::human_duration);
        let tokens = match run.usage.total() {
            0 => "-".to_string(),
            n => n.to_string(),
        };
        table.row(vec![run.id.clone(), run.status.to_string(), run.preset.clone(), age, duration, tokens, cell(&run.task, 60)]);
    }
    table.write(out)?;
    Ok(0)
}
