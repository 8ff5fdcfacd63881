//! `corral prune [--older-than AGE] [--status S]... [--preset P] [--dry-run]`:
//! removes ended runs (with the runs they launched) that ended more than
//! AGE ago, as `rm` does, and gives the database's space back. Without
//! `--older-than`, applies `[retention]` of config.toml.

use std::io::Write;

use anyhow::Context as _;
use corral::home::config::Config;
use corral::verbs::remove::{prune, PruneRule};
use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How long ago they ended: 30d, 12h (default: `[retention]` of
    /// config.toml, applied now).
    #[arg(long, value_name = "AGE")]
    pub older_than: Option<String>,
    /// Only runs with this status (repeatable).
    #[arg(long)]
    pub status: Vec<corral::RunStatus>,
    /// Only runs of this preset.
    #[arg(long)]
    pub preset: Option<String>,
    /// Say what would be removed, remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(store: &mut Store, given: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    let (dry_run, json) = (given.dry_run, given.json);
    let rule = match &given.older_than {
        Some(age) => PruneRule {
            older_than: humantime::parse_duration(age)
                .map_err(|_| anyhow::anyhow!("--older-than {age} is not an age: write e.g. 30d, 12h"))?,
            status: given.status.clone(),
            preset: given.preset.clone(),
        },
        None => {
            let config = Config::load(store.home()).context("reading config.toml")?;
            let Some(retention) = &config.retention else {
                anyhow::bail!(
                    "say which runs: --older-than 30d, or set `[retention] older_than = \"90d\"` in {}",
                    store.home().config_file().display()
                );
            };
            let mut rule = corral::upkeep::retention::rule(retention);
            if !given.status.is_empty() {
                rule.status = given.status.clone();
            }
            rule.preset = given.preset.clone();
            rule
        }
    };
    let age = corral::text::time::age_in_words(rule.older_than);
    let pruned = prune(store, &rule, dry_run)?;
    if json {
        super::print_json(out, &pruned)?;
        return Ok(0);
    }
    if pruned.removed.is_empty() {
        writeln!(
            out,
            "no ended run is older than {age}{}",
            if rule.status.is_empty() && rule.preset.is_none() { "" } else { " and matches" }
        )?;
    }
    for done in &pruned.removed {
        super::rm::say(done, dry_run, out)?;
    }
    if pruned.runs > 0 {
        writeln!(out, "{} {} run(s)", if dry_run { "would remove" } else { "removed" }, pruned.runs)?;
    }
    if let Some(db) = pruned.database {
        super::rm::say_reclaimed(&db, out)?;
    }
    Ok(0)
}
