//! Numbered migrations, applied in order by `PRAGMA user_version`, each in
//! its own IMMEDIATE transaction. A database whose version is above the last
//! migration this binary knows was written by a newer Corral and is refused,
//! never downgraded or guessed at.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use super::StoreError;

/// Every migration, numbered from 1. Append only; never edit a shipped one.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_init.sql"),
    include_str!("migrations/0002_descendants.sql"),
    include_str!("migrations/0003_seen.sql"),
    include_str!("migrations/0004_slots.sql"),
    include_str!("migrations/0005_worktrees.sql"),
    include_str!("migrations/0006_status_version.sql"),
    include_str!("migrations/0007_denied.sql"),
    include_str!("migrations/0008_unreaped_index.sql"),
    include_str!("migrations/0009_replies_and_changes.sql"),
    include_str!("migrations/0010_containment.sql"),
    include_str!("migrations/0011_run_removal.sql"),
    include_str!("migrations/0012_transcript_size.sql"),
    include_str!("migrations/0013_changes_and_hosts.sql"),
    include_str!("migrations/0014_pause_agrees_with_status.sql"),
    include_str!("migrations/0015_waits_that_block.sql"),
    include_str!("migrations/0016_trusted_presets.sql"),
    include_str!("migrations/0017_merge_record.sql"),
    include_str!("migrations/0018_store_identity.sql"),
    include_str!("migrations/0019_schedules.sql"),
    include_str!("migrations/0020_budgets.sql"),
    include_str!("migrations/0021_usage_limits.sql"),
    include_str!("migrations/0022_pushes.sql"),
    include_str!("migrations/0023_fire_firer_process.sql"),
    include_str!("migrations/0024_sandbox_allows.sql"),
    include_str!("migrations/0025_fire_precheck_process.sql"),
    include_str!("migrations/0026_schedule_resumed_at.sql"),
    include_str!("migrations/0027_push_retries.sql"),
    include_str!("migrations/0028_fire_reservations.sql"),
    include_str!("migrations/0029_launch_requests.sql"),
    include_str!("migrations/0030_shown_events.sql"),
    include_str!("migrations/0031_port_blocks.sql"),
    include_str!("migrations/0032_torn_down.sql"),
    include_str!("migrations/0033_budget_step.sql"),
    include_str!("migrations/0034_merge_sets.sql"),
    include_str!("migrations/0035_push_claimer.sql"),
    include_str!("migrations/0036_spend.sql"),
    include_str!("migrations/0037_removal_is_a_change.sql"),
    include_str!("migrations/0038_spend_by_schedule.sql"),
    include_str!("migrations/0039_pull_requests.sql"),
    include_str!("migrations/0040_changes_are_a_change.sql"),
    include_str!("migrations/0041_pull_requests_together.sql"),
];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the database at `path` up to [`SCHEMA_VERSION`].
pub(super) fn apply(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let fail = |version, source| StoreError::Migration { path: path.to_path_buf(), version, source };
    let current: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(|e| fail(0, e))?;
    if current > SCHEMA_VERSION {
        return Err(StoreError::TooNew { path: path.to_path_buf(), found: current, supported: SCHEMA_VERSION });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        let version = index as i64 + 1;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| fail(version, e))?;
        // Another process may have migrated while we waited for the lock.
        let now: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(|e| fail(version, e))?;
        if now >= version {
            continue;
        }
        tx.execute_batch(sql).map_err(|e| fail(version, e))?;
        tx.pragma_update(None, "user_version", version).map_err(|e| fail(version, e))?;
        tx.commit().map_err(|e| fail(version, e))?;
    }
    Ok(())
}
