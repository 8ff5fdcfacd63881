//! `[retention]` in `config.toml`: which ended runs go by themselves. The
//! tray applies it once a day (`apply_if_due`), and `corral prune` without
//! `--older-than` applies it at once; nothing is removed unless it is set.
//! When it last ran is a file's time beside the database, so a tray that
//! restarts does not prune again the same day.

use std::time::{Duration, SystemTime};

use crate::home::config::{Config, Retention};
use crate::verbs::remove::{prune, PruneRule, Pruned, RemoveError};
use crate::Store;

/// How often the rule is applied.
pub const EVERY: Duration = Duration::from_secs(24 * 3600);

/// The prune rule `[retention]` says.
pub fn rule(retention: &Retention) -> PruneRule {
    PruneRule { older_than: retention.older_than, status: retention.status.clone(), preset: None }
}

/// Applies `[retention]` if it is set and was not applied in the last
/// [`EVERY`]; what it removed, or None if it was not due.
pub fn apply_if_due(store: &mut Store, config: &Config) -> Result<Option<Pruned>, RemoveError> {
    let Some(retention) = &config.retention else { return Ok(None) };
    let marker = store.home().data_dir().join("retention.applied");
    let last = std::fs::metadata(&marker).and_then(|m| m.modified()).ok();
    let due = last.is_none_or(|at| SystemTime::now().duration_since(at).is_ok_and(|age| age >= EVERY));
    if !due {
        return Ok(None);
    }
    let pruned = prune(store, &rule(retention), false)?;
    // Marked after the prune: a failed one is tried again at the next round.
    let stamp = crate::text::time::format(crate::text::time::now());
    if let Err(e) =
        crate::home::create_private(&marker).and_then(|mut f| std::io::Write::write_all(&mut f, stamp.as_bytes()))
    {
        tracing::warn!("cannot mark when retention ran ({}): {e}", marker.display());
    }
    Ok(Some(pruned))
}
