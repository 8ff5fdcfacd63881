//! `corral prune --older-than AGE [--status S]... [--preset P] [--dry-run]`:
//! removes ended runs (with the runs they launched) that ended more than
//! AGE ago, as `rm` does.

use std::io::Write;

use corral::remove::prune;
use corral::{RunStatus, Store};

pub fn run(
    store: &mut Store,
    older_than: &str,
    statuses: &[RunStatus],
    preset: Option<&str>,
    dry_run: bool,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<i32> {
    let age = humantime::parse_duration(older_than)
        .map_err(|_| anyhow::anyhow!("--older-than {older_than} is not an age: write e.g. 30d, 12h"))?;
    let age = chrono::Duration::from_std(age).map_err(|_| anyhow::anyhow!("--older-than {older_than} is too long"))?;
    let before = corral::time::now()
        .checked_sub_signed(age)
        .ok_or_else(|| anyhow::anyhow!("--older-than {older_than} is too long"))?;
    let keep = |run: &corral::Run| {
        (!statuses.is_empty() && !statuses.contains(&run.status)) || preset.is_some_and(|p| run.preset != p)
    };
    let removed = prune(store, &corral::time::format(before), keep, dry_run)?;
    if json {
        super::print_json(out, &removed)?;
        return Ok(0);
    }
    if removed.is_empty() {
        writeln!(
            out,
            "no ended run is older than {older_than}{}",
            if statuses.is_empty() && preset.is_none() { "" } else { " and matches" }
        )?;
    }
    for done in &removed {
        super::rm::say(done, dry_run, out)?;
    }
    let runs: usize = removed.iter().map(|r| r.ids.len()).sum();
    if runs > 0 {
        writeln!(out, "{} {runs} run(s)", if dry_run { "would remove" } else { "removed" })?;
    }
    Ok(0)
}
